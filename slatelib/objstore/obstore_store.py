"""ObjectStore over obstore (Rust ``object_store``): memory, local file system, S3, GCS, Azure.

This is the only module that calls obstore. Every exception is translated at this boundary
by :func:`slatelib.objstore.obstore_errors.map_error`.

Backend notes (obstore 0.12, checked by the tests):

- ``put_if_absent`` uses ``PutMode.Create`` (S3 ``If-None-Match: *``; a hard link on the
  local file system; a locked map in memory), so it is atomic everywhere.
- ``put_if_match`` with an ETag uses ``PutMode.Update`` (S3 ``If-Match``) on memory and S3.
  obstore's local file system does not support it, so a ``file://`` store does it itself:
  a ``flock`` on a sidecar ``<name>.lock`` file, an ETag check, then a staging file renamed
  over the object (:mod:`slatelib.objstore.local_cas`, docs/rfcs/0006-local-conditional-put.md).
- Conditional puts go through ``cas_store``, a second client of the same bucket whose
  built-in retries are off (see :func:`slatelib.objstore.url.open_store`): a create that
  object_store retried internally after a lost response would come back as a spurious
  "already exists" that no caller could tell from a lost race. Surfacing the transient
  error instead lets ``RetryingObjectStore`` resolve it.
- obstore refuses a range that starts at or after the end of the object, and its
  ``get_ranges`` *panics* (pyo3 ``PanicException``) when one of the ranges it coalesced
  does. Ranges are therefore coalesced here (:mod:`slatelib.objstore.byte_ranges`) and
  sent with ``coalesce=0``; when a ranged read fails and one HEAD shows that a range
  starts past the end, the read is answered with the bytes that exist.
- Listing order: memory, S3, GCS and Azure list in lexicographic order and are streamed
  (the order is checked a chunk at a time as it streams); the local file system lists in
  directory order, so its listing is collected and sorted. Each chunk is converted in a
  few comprehensions, the prefix and the bounds applied by bisection (a database of 100k
  SSTs lists 100k objects; docs/rfcs/0014-large-manifest-planning.md, "``slate ls``").
"""

from __future__ import annotations

import gc
import logging
import operator
import os
import re
import urllib.error
import urllib.request
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, cast

import obstore
from obstore.store import S3Store

from slatelib.errors import (
    InvalidArgumentError,
    ObjectMissingError,
    PathIsFileError,
    SlateError,
    StorageError,
    UnavailableError,
)
from slatelib.objstore import accounting, local_cas
from slatelib.objstore.byte_ranges import (
    ByteRange,
    check_ranges,
    clamp_ranges,
    plan_spans,
    slice_spans,
)
from slatelib.objstore.local_files import file_in_the_way
from slatelib.objstore.object_store import (
    BytesLike,
    ObjectMeta,
    check_data,
    check_path,
    check_prefix,
)
from slatelib.objstore.obstore_errors import (
    Op,
    is_missing_container,
    is_not_a_directory,
    is_panic,
    map_error,
)
from slatelib.objstore.spec import StoreSpec

if TYPE_CHECKING:
    from obstore import ObjectMeta as ObsMeta
    from obstore import PutMode
    from obstore.store import ObjectStore as ObsStore

_log = logging.getLogger(__name__)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)

DEFAULT_COALESCE_BYTES = 1024 * 1024
DEFAULT_LIST_CHUNK = 1000
DEFAULT_DELETE_BATCH = 1000
SIGNED_DELETE_TIMEOUT_S = 60.0
"""Timeout of one signed ``DeleteObject`` request (the fallback of :meth:`delete_many`)."""
_BULK_DELETE_REFUSED = re.compile(
    r"\b501 Not Implemented|\b405 Method Not Allowed|<Code>(?:NotImplemented|MethodNotAllowed)<")
"""How a DeleteObjects refusal reads in obstore's error (status line or S3 error code)."""
MULTIPART_THRESHOLD = 16 * 1024 * 1024
"""A plain ``put`` larger than this is uploaded in parts (a multipart upload)."""
MULTIPART_PART_SIZE = 16 * 1024 * 1024
"""Bytes per part of a multipart upload: ``2 + ceil(size / part)`` PUT requests."""


def to_unix_ms(when: datetime) -> int:
    """Unix milliseconds of a datetime (naive values are taken as UTC)."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (when - _EPOCH) // _MS


class ObstoreObjectStore:
    """:class:`~slatelib.objstore.object_store.ObjectStore` over an obstore store.

    Args:
        store: obstore store used for every operation but conditional puts.
        spec: how to reopen this store (its ``url`` is used in messages).
        cas_store: store used for ``put_if_absent``/``put_if_match`` (default ``store``).
        root: path prefix applied inside ``store`` (for backends without a native one).
        sorted_listing: the backend lists in lexicographic order (False: sort here).
        coalesce_bytes: ranges closer than this are fetched with one request.
        local_root: the directory of a local-file-system ``store`` (conditional overwrites
            are then done by :mod:`slatelib.objstore.local_cas`).
    """

    def __init__(
        self,
        store: ObsStore,
        *,
        spec: StoreSpec,
        cas_store: ObsStore | None = None,
        root: str = "",
        sorted_listing: bool = True,
        coalesce_bytes: int = DEFAULT_COALESCE_BYTES,
        list_chunk_size: int = DEFAULT_LIST_CHUNK,
        delete_batch_size: int = DEFAULT_DELETE_BATCH,
        local_root: str | None = None,
    ) -> None:
        self._store = store
        self._cas_store = cas_store if cas_store is not None else store
        self._spec = spec
        self._root = check_prefix(root, what="store root")
        self._sorted_listing = sorted_listing
        self._coalesce = coalesce_bytes
        self._list_chunk = list_chunk_size
        self._delete_batch = delete_batch_size
        self._local_root = local_root
        self._bulk_delete = True

    @property
    def spec(self) -> StoreSpec:
        return self._spec

    @property
    def url(self) -> str:
        return self._spec.url

    def __repr__(self) -> str:
        return f"ObstoreObjectStore({self.url!r})"

    # -- helpers ---------------------------------------------------------------------------

    @contextmanager
    def _mapped(self, op: Op, path: str) -> Iterator[None]:
        try:
            yield
        except SlateError:
            raise
        except BaseException as exc:
            if isinstance(exc, Exception) or is_panic(exc):
                _record_hidden_retries(exc, _OP_KINDS[op])
                err = map_error(exc, op=op, path=path, url=self.url)
                if isinstance(err, PathIsFileError) and self._local_root is not None:
                    err = self._name_the_file(err, op, path)
                raise err from exc
            raise

    def _name_the_file(self, err: PathIsFileError, op: Op, path: str) -> PathIsFileError:
        """``err`` naming the file in the way of ``path`` on the local disk (as an object
        path of this store), when it can still be found."""
        assert self._local_root is not None
        loc = file_in_the_way(self._local_root, self._loc(path))
        if loc is None or (self._root and not loc.startswith(self._root + "/")):
            return err
        file = loc[len(self._root) + 1:] if self._root else loc
        return PathIsFileError(f"{self.url}: {op} {path!r}: {file!r} is a file, not a directory",
                               path=path, file=file)

    def _loc(self, path: str) -> str:
        return f"{self._root}/{path}" if self._root else path

    def _meta(self, raw: ObsMeta) -> ObjectMeta:
        location = raw["path"]
        if self._root:
            location = location[len(self._root) + 1 :]
        return ObjectMeta(
            path=location,
            size=raw["size"],
            last_modified_ms=to_unix_ms(raw["last_modified"]),
            e_tag=raw.get("e_tag"),
            version=raw.get("version"),
        )

    # -- reads -----------------------------------------------------------------------------

    def get(self, path: str) -> bytes:
        """See :meth:`ObjectStore.get`.

        Raises:
            ObjectMissingError: no object at ``path``.
        """
        p = check_path(path)
        with self._mapped("get", p):
            accounting.record("get")
            data = bytes(obstore.get(self._store, self._loc(p)).bytes())
        accounting.record_read(len(data))
        return data

    def get_with_meta(self, path: str) -> tuple[bytes, ObjectMeta]:
        """See :meth:`ObjectStore.get_with_meta`.

        Raises:
            ObjectMissingError: no object at ``path``.
        """
        p = check_path(path)
        with self._mapped("get_with_meta", p):
            accounting.record("get")
            result = obstore.get(self._store, self._loc(p))
            data = bytes(result.bytes())
            raw = result.meta
        accounting.record_read(len(data))
        return data, self._meta(raw)

    def head(self, path: str) -> ObjectMeta:
        """See :meth:`ObjectStore.head`.

        Raises:
            ObjectMissingError: no object at ``path``.
        """
        p = check_path(path)
        with self._mapped("head", p):
            accounting.record("head")
            raw = obstore.head(self._store, self._loc(p))
        return self._meta(raw)

    def get_range(self, path: str, start: int, end: int) -> bytes:
        """See :meth:`ObjectStore.get_range` (short read past the end of the object).

        Raises:
            ObjectMissingError: no object at ``path``.
            InvalidArgumentError: ``start < 0`` or ``end < start``.
        """
        return self._read_ranges("get_range", check_path(path), [(start, end)])[0]

    def get_range_buffer(self, path: str, start: int, end: int) -> memoryview | bytes:
        """:meth:`get_range` without the copy into ``bytes``: a read-only memoryview of the
        fetched buffer (for readers that take any buffer, such as a compaction task's block
        checks; see :func:`slatelib.objstore.forwarding.read_range_buffer`).

        Raises:
            ObjectMissingError: no object at ``path``.
            InvalidArgumentError: ``start < 0`` or ``end < start``.
        """
        got = self._read_ranges("get_range", check_path(path), [(start, end)], copy=False)[0]
        return cast("memoryview | bytes", got)

    def get_ranges(self, path: str, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """See :meth:`ObjectStore.get_ranges` (short reads past the end of the object).

        Raises:
            ObjectMissingError: no object at ``path``.
            InvalidArgumentError: a range has ``start < 0`` or ``end < start``.
        """
        return self._read_ranges("get_ranges", check_path(path), ranges)

    def _read_ranges(self, op: Op, p: str, ranges: Iterable[ByteRange], *,
                     copy: bool = True) -> list[bytes]:
        wanted = check_ranges(ranges)
        if not wanted:
            return []
        if all(end == start for start, end in wanted):
            self.head(p)  # an empty read still reports a missing object
            return [b""] * len(wanted)
        try:
            with self._mapped(op, p):
                return self._fetch(p, wanted, None, copy=copy)
        except SlateError as err:
            if isinstance(err, ObjectMissingError | InvalidArgumentError):
                raise
            size = self._size_or_none(p)
            if size is None or all(start < size for start, end in wanted if end > start):
                raise
            with self._mapped(op, p):
                return self._fetch(p, wanted, size, copy=copy)

    def _size_or_none(self, p: str) -> int | None:
        try:
            return self.head(p).size
        except ObjectMissingError:
            raise
        except SlateError:
            return None

    def _fetch(self, p: str, ranges: list[ByteRange], size: int | None, *,
               copy: bool = True) -> list[bytes]:
        if size is not None:
            ranges = clamp_ranges(ranges, size)
        spans = plan_spans(ranges, self._coalesce)
        if not spans:
            return [b""] * len(ranges)
        # One ranged GET per span: spans are disjoint and more than ``coalesce_bytes`` apart,
        # so obstore (coalesce=0 still joins touching ranges) sends exactly these.
        accounting.record("ranged_get", len(spans))
        buffers = obstore.get_ranges(
            self._store,
            self._loc(p),
            starts=[s for s, _ in spans],
            ends=[e for _, e in spans],
            coalesce=0,  # already coalesced: obstore's own merging can panic past the end
        )
        views = [memoryview(b) for b in buffers]
        accounting.record_read(sum(v.nbytes for v in views))
        return slice_spans(ranges, spans, views, copy=copy)

    # -- writes ----------------------------------------------------------------------------

    def put(self, path: str, data: BytesLike) -> None:
        """See :meth:`ObjectStore.put`.

        Raises:
            StorageError: e.g. missing bucket, access denied.
        """
        p = check_path(path)
        payload = check_data(data)
        multipart = len(payload) > MULTIPART_THRESHOLD
        n = accounting.multipart_requests(len(payload), MULTIPART_PART_SIZE) if multipart else 1
        with self._mapped("put", p):
            accounting.record("put", n, bytes_written=len(payload))
            obstore.put(self._store, self._loc(p), payload, use_multipart=multipart,
                        chunk_size=MULTIPART_PART_SIZE)

    def put_if_absent(self, path: str, data: BytesLike) -> None:
        """See :meth:`ObjectStore.put_if_absent`.

        Raises:
            AlreadyExistsError: an object already exists at ``path``.
        """
        p = check_path(path)
        payload = check_data(data)
        with self._mapped("put_if_absent", p):
            accounting.record("conditional_put", bytes_written=len(payload))
            obstore.put(self._cas_store, self._loc(p), payload, mode="create")

    def put_if_match(self, path: str, data: BytesLike, e_tag: str | None) -> str | None:
        """See :meth:`ObjectStore.put_if_match`.

        Raises:
            ConflictError: ETag mismatch or missing object (``AlreadyExistsError`` when
                ``e_tag`` is None and the object exists).
            StorageError: the backend refused the write.
        """
        p = check_path(path)
        payload = check_data(data)
        if e_tag is not None and (not isinstance(e_tag, str) or not e_tag):
            raise InvalidArgumentError(f"e_tag must be a non-empty string or None: {e_tag!r}")
        if self._local_root is not None and e_tag is not None:
            target = os.path.join(self._local_root, self._loc(p))
            with self._mapped("put_if_match", p):
                accounting.record("conditional_put", bytes_written=len(payload))
                return local_cas.put_if_match_file(target, payload, e_tag, path=p)
        mode: PutMode = "create" if e_tag is None else {"e_tag": e_tag}
        with self._mapped("put_if_match", p):
            accounting.record("conditional_put", bytes_written=len(payload))
            result = obstore.put(self._cas_store, self._loc(p), payload, mode=mode)
        return result["e_tag"]

    def delete(self, path: str) -> None:
        """See :meth:`ObjectStore.delete` (idempotent).

        Raises:
            StorageError: e.g. missing bucket, access denied.
        """
        p = check_path(path)
        with self._mapped("delete", p):
            self._delete_locs([self._loc(p)])

    def delete_many(self, paths: Iterable[str]) -> None:
        """See :meth:`ObjectStore.delete_many` (idempotent, batched).

        Raises:
            InvalidArgumentError: a path is invalid (nothing was deleted).
            StorageError: e.g. missing bucket, access denied.
        """
        if isinstance(paths, str):
            raise InvalidArgumentError("delete_many takes an iterable of paths, not a str")
        checked = list(dict.fromkeys(check_path(p) for p in paths))
        for i in range(0, len(checked), self._delete_batch):
            batch = checked[i : i + self._delete_batch]
            with self._mapped("delete_many", batch[0]):
                self._delete_locs([self._loc(p) for p in batch])

    def _delete_locs(self, locs: list[str]) -> None:
        if not self._bulk_delete:
            for loc in locs:
                self._delete_signed(loc)
            return
        # obstore deletes through S3's DeleteObjects even for one path: one request per
        # call (batches are at most 1000 keys). The per-object retry below happens only
        # on stores that refuse to delete a missing object (local disk), never on S3, so
        # it is not counted: the count stays what S3 would bill.
        accounting.record("multi_delete")
        try:
            obstore.delete(self._store, locs if len(locs) > 1 else locs[0])
        except Exception as exc:
            if self._refuses_bulk_delete(exc):
                _record_hidden_retries(exc, "multi_delete")
                _log.warning("objstore: %s refuses multi-object delete; deleting one object "
                             "per request from now on [error=%s]", self.url, exc)
                self._bulk_delete = False
                for loc in locs:
                    self._delete_signed(loc)
                return
            # Local and some remote stores refuse to delete a missing object; a batch may
            # stop at the first one, so finish the batch one object at a time.
            if not _is_absent(exc):
                raise
            for loc in locs:
                try:
                    obstore.delete(self._store, loc)
                except Exception as one:
                    if not _is_absent(one):
                        raise

    def _refuses_bulk_delete(self, exc: Exception) -> bool:
        """An S3-compatible service without ``DeleteObjects`` answered (501 Not
        Implemented, 405 Method Not Allowed): deletes then go one object per request."""
        return isinstance(self._store, S3Store) and bool(_BULK_DELETE_REFUSED.search(str(exc)))

    def _delete_signed(self, loc: str) -> None:
        """Delete one object with a plain S3 ``DeleteObject`` request (obstore has none: its
        deletes are ``DeleteObjects``), sent to a URL that obstore signs with the store's
        credentials. A missing object is not an error.

        Raises:
            UnavailableError: a 5xx, 408 or 429 answer, or no answer.
            StorageError: any other refusal.
        """
        store = self._store
        if not isinstance(store, S3Store):
            raise StorageError(f"{self.url}: delete {loc!r}: no per-object delete here")
        url = obstore.sign(store, "DELETE", loc, timedelta(minutes=5))
        accounting.record("delete")
        request = urllib.request.Request(url, method="DELETE")
        try:
            with urllib.request.urlopen(request, timeout=SIGNED_DELETE_TIMEOUT_S) as response:
                response.read()
        except urllib.error.HTTPError as err:
            if err.code == 404:
                return
            msg = f"{self.url}: delete {loc!r}: HTTP {err.code} {err.reason}"
            if err.code >= 500 or err.code in (408, 429):
                raise UnavailableError(msg) from err
            raise StorageError(msg) from err
        except OSError as err:  # URLError, timeouts, resets
            raise UnavailableError(f"{self.url}: delete {loc!r}: {err}") from err

    # -- listing ---------------------------------------------------------------------------

    def list(
        self, prefix: str, *, start_after: str | None = None, end_before: str | None = None
    ) -> Iterator[ObjectMeta]:
        """See :meth:`ObjectStore.list` (directory prefix, sorted, bounds exclusive).

        Raises:
            InvalidArgumentError: invalid prefix or bound.
        """
        pre = check_prefix(prefix)
        for name, bound in (("start_after", start_after), ("end_before", end_before)):
            if bound is not None and not isinstance(bound, str):
                raise InvalidArgumentError(f"{name} must be a string or None: {bound!r}")
        return self._list(pre, start_after, end_before)

    def _list(
        self, pre: str, start_after: str | None, end_before: str | None
    ) -> Iterator[ObjectMeta]:
        offset = None
        if start_after is not None:
            floor = _offset_floor(start_after)
            offset = self._loc(floor) if floor else None
        full_prefix = "/".join(x for x in (self._root, pre) if x)
        window = _Window(pre, start_after, end_before)
        with self._mapped("list", pre):
            stream = obstore.list(
                self._store, full_prefix or None, offset=offset, chunk_size=self._list_chunk
            )
            if not self._sorted_listing:
                # Converted as it arrives (while the chunk is fresh), sorted at the end.
                with _collector_paused():
                    metas = [m for chunk in stream for m in _metas(self._root, chunk)]
                    metas.sort(key=_META_PATH)
                paths = [m.path for m in metas]
                _check_order(self.url, pre, None, paths)  # only a repeated path can fail here
                lo, hi, done = window.select(paths)
                # The pages S3 would have sent before the first path past the window.
                accounting.record("list", accounting.list_pages(hi + 1 if done else len(paths)))
                yield from metas[lo:hi]
                return
            for chunk in _counted_pages(stream):
                paths = _paths(self._root, chunk)
                _check_order(self.url, pre, window.last, paths)
                lo, hi, done = window.select(paths)
                with _collector_paused():
                    metas = _metas(self._root, chunk[lo:hi])
                yield from metas
                if done:
                    return


def _counted_pages(stream: Iterable[Sequence[ObsMeta]]) -> Iterator[Sequence[ObsMeta]]:
    """The chunks of an obstore listing, counting one ``list`` request per chunk taken and
    one for a listing that has none: chunks are :data:`DEFAULT_LIST_CHUNK` (1000) keys, the
    size of an S3 page, and obstore fetches a page only when the next chunk is taken."""
    taken = 0
    try:
        for chunk in stream:
            accounting.record("list")
            taken += 1
            yield chunk
    finally:
        if taken == 0:
            accounting.record("list")


class _Window:
    """Which paths of a sorted listing :meth:`ObjectStore.list` returns: those below the
    directory ``pre`` with ``start_after < path < end_before``, found by bisection in each
    chunk (the paths below a directory are contiguous in lexicographic order:
    ``"db/" <= path < "db0"``, ``"0"`` being the character after ``"/"``)."""

    def __init__(self, pre: str, start_after: str | None, end_before: str | None) -> None:
        self.low = pre + "/" if pre else None
        self.high = pre + "0" if pre else None
        self.start_after = start_after
        self.end_before = end_before
        self.last: str | None = None

    def select(self, paths: list[str]) -> tuple[int, int, bool]:
        """``paths[lo:hi]`` are returned; ``done``: no later path can be."""
        if paths:
            self.last = paths[-1]
        lo, hi = 0, len(paths)
        if self.low is not None and self.high is not None:
            lo = bisect_left(paths, self.low)
            hi = bisect_left(paths, self.high, lo)
        if self.start_after is not None:
            lo = max(lo, bisect_right(paths, self.start_after))
        if self.end_before is not None:
            hi = min(hi, bisect_left(paths, self.end_before, lo))
        return lo, max(lo, hi), hi < len(paths)


_META_PATH = operator.attrgetter("path")


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a listing's objects are made (never
    across a ``yield``). They form no cycles, so a collection could free nothing of theirs,
    but the ones their allocation triggers walk every tracked object of the process (a
    decoded manifest of 100k SSTs when GC or ``slate ls`` lists): 50-60 ms per listing of
    100k objects in one measurement. Re-enabled only if it was enabled, so a caller that
    paused it keeps it paused (docs/rfcs/0014-large-manifest-planning.md, "``slate ls``")."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _metas(root: str, raws: Sequence[ObsMeta]) -> list[ObjectMeta]:
    """The :class:`ObjectMeta` of each listed object (its location without ``root``), in
    one pass over a chunk."""
    n = len(root) + 1 if root else 0
    try:
        return [ObjectMeta(raw["path"][n:], raw["size"], (raw["last_modified"] - _EPOCH) // _MS,
                           raw.get("e_tag"), raw.get("version")) for raw in raws]
    except TypeError:  # a naive datetime somewhere: to_unix_ms takes it as UTC
        return [ObjectMeta(raw["path"][n:], raw["size"], to_unix_ms(raw["last_modified"]),
                           raw.get("e_tag"), raw.get("version")) for raw in raws]


def _paths(root: str, chunk: Sequence[ObsMeta]) -> list[str]:
    if not root:
        return [raw["path"] for raw in chunk]
    n = len(root) + 1
    return [raw["path"][n:] for raw in chunk]


def _check_order(url: str, pre: str, last: str | None, paths: list[str]) -> None:
    """Raise unless ``paths`` is strictly ascending and above ``last`` (the last path of
    the previous chunk).

    Raises:
        StorageError: naming the first path that is not above the one before it.
    """
    if not paths or (
        (last is None or last < paths[0]) and all(map(operator.lt, paths, paths[1:]))
    ):
        return
    before = [last, *paths] if last is not None else paths
    bad = next(i for i in range(1, len(before)) if before[i] <= before[i - 1])
    raise StorageError(
        f"{url}: list {pre!r}: backend returned {before[bad]!r} after "
        f"{before[bad - 1]!r}; it does not list in lexicographic order"
    )


_OP_KINDS: dict[Op, accounting.RequestKind] = {
    "open": "head", "get": "get", "get_with_meta": "get", "get_range": "ranged_get",
    "get_ranges": "ranged_get", "head": "head", "put": "put", "put_if_absent": "conditional_put",
    "put_if_match": "conditional_put", "list": "list", "delete": "multi_delete",
    "delete_many": "multi_delete"}
"""The request kind of each operation, for :func:`_record_hidden_retries`."""
_RETRIED = re.compile(r"\bafter (\d+) retries\b")


def _record_hidden_retries(exc: BaseException, kind: accounting.RequestKind) -> None:
    """Count the requests that obstore's own retries sent before it gave up: its error says
    ``after N retries`` (the retries of a request that then succeeded stay unseen)."""
    if m := _RETRIED.search(str(exc)):
        accounting.record(kind, int(m.group(1)))


def _is_absent(exc: Exception) -> bool:
    """A delete failed only because the object is not there: not found (but not the bucket),
    or a folder of its path is a file on the local disk (nothing can be below it)."""
    if isinstance(exc, FileNotFoundError):
        return not is_missing_container(exc)
    return is_not_a_directory(exc)


def _offset_floor(bound: str) -> str | None:
    """The longest valid object path that is a prefix of ``bound`` (so ``<= bound``), to
    let the backend skip ahead; the exact ``> bound`` filter is applied afterwards."""
    for cut in range(len(bound), 0, -1):
        candidate = bound[:cut].rstrip("/")
        try:
            return check_path(candidate) if candidate else None
        except InvalidArgumentError:
            continue
    return None
