"""Two-phase CAS over a transactional store, for object stores without conditional writes
(design doc 'manifest', "CAS on S3" pattern 5 and "Two-Phase CAS Protocol";
docs/rfcs/0012-two-phase-cas.md).

:class:`TwoPhaseObjectStore` wraps any :class:`ObjectStore` and implements
``put_if_absent`` and ``put_if_match`` without asking the object store for a conditional
write. A write of ``data`` to the final path ``P``:

1. writes ``data`` under the temporary name ``P.<token>.<crc32>`` next to ``P`` (a plain
   PUT; the token is a fresh UUID in hex, the CRC32 that of ``data``, as the design doc's
   ``[UUID].[checksum]``);
2. inserts the intent ``{destination: P, source: tmp, committed: false}`` into the
   transactional store, keyed by ``P`` with put-if-not-exists semantics (the CAS: of
   concurrent writers exactly one inserts). From here on the write is durable;
3. copies the object to ``P`` (a plain PUT of the same bytes);
4. marks the record committed;
5. deletes the temporary object.

``put_if_absent`` returns after step 4, so an acknowledged write is always visible under
its final name. A writer that finds the record of another writer's unfinished write (the
insert of step 2 conflicts) finishes it before reporting ``AlreadyExistsError``; a reader
that lists a directory, or misses an object, first finishes (or rolls back) the
unfinished records below it, so a crash between any two steps is repaired by the next
process that looks (see :meth:`TwoPhaseObjectStore.recover`).

Recovery of one record (the design doc's steps, plus two checks that make it safe to repeat):

- the final object exists with the record's checksum: the copy happened; mark committed
  and delete the temporary object;
- the final object exists with other bytes that are not the version being replaced: the
  object predates the record (written before two-phase CAS was configured, or by a tool
  that bypasses it), so the write lost: roll the record back (delete it and the temporary);
- the final object is missing (or holds the version being replaced) and the temporary
  object is there: copy it (after checking its checksum), mark committed, delete it;
- both are missing: the write can never be finished (its temporary object was lost):
  roll it back.

Deletes: :meth:`delete` removes the record before the object, so a path whose object GC
deleted can be created again, exactly as on a store with native CAS. GC of committed
records therefore follows the object store's GC (which deletes inactive manifests and WAL
SSTs below ``replay_after_wal_id``, design doc 'manifest' "Transactional Store Deletion");
:meth:`collect` sweeps what a crash leaves behind: records whose object is gone, orphaned
temporary objects, incomplete records.

ETags: ``put_if_match`` (mutable CAS, e.g. GC boundary files) compares against the record
token: :meth:`get_with_meta` returns ``2pc:<token>`` when the object is the committed
version of its record, else ``2pcc:<sha256 of the bytes>`` (an object with no record yet:
the first conditional overwrite adopts it). ``head`` reports no ETag.

What this cannot protect against: a process that writes the final names without going
through the same transactional store (an official SlateDB writer, or slatelib without the
``cas`` option). See docs/rfcs/0012-two-phase-cas.md.
"""

from __future__ import annotations

import hashlib
import logging
import re
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

from slatelib.errors import (
    AlreadyExistsError,
    CommitStateUnknownError,
    ConflictError,
    CorruptObjectError,
    InternalError,
    InvalidArgumentError,
    ObjectMissingError,
    SlateError,
    UnavailableError,
)
from slatelib.objstore.cas_records import CasBackend, CasRecord, CasUnreachableError, now_ms
from slatelib.objstore.forwarding import ForwardingStore
from slatelib.objstore.object_store import (
    BytesLike,
    ObjectMeta,
    ObjectStore,
    check_data,
    check_path,
    check_prefix,
)
from slatelib.objstore.url import split_store_url

log = logging.getLogger(__name__)

TEMPORARY = re.compile(r"\.[0-9a-f]{32}\.[0-9a-f]{8}$")
"""How the name of a temporary object ends (``.<token>.<crc32>``)."""


def is_temporary(path: str) -> bool:
    """Whether ``path`` names a temporary object of two-phase CAS."""
    return TEMPORARY.search(path) is not None


TOKEN_ETAG = "2pc:"
CONTENT_ETAG = "2pcc:"

PHASES = ("temp_written", "recorded", "copied", "committed")
"""The points between steps where :attr:`TwoPhaseObjectStore.on_phase` is called."""

PhaseHook = Callable[[str, str], None]


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class CollectReport:
    """What :meth:`TwoPhaseObjectStore.collect` did."""

    finished: int = 0
    rolled_back: int = 0
    records_deleted: int = 0
    temps_deleted: int = 0


class TwoPhaseObjectStore(ForwardingStore):
    """An :class:`ObjectStore` whose conditional writes go through ``backend``.

    Args:
        inner: the object store (its own conditional writes are never called).
        backend: the transactional store of intents.
        on_phase: test hook called with ``(phase, path)`` after each step of a write (see
            :data:`PHASES`); raising there stands for a crash between two steps.
    """

    def __init__(self, inner: ObjectStore, backend: CasBackend, *,
                 on_phase: PhaseHook | None = None) -> None:
        super().__init__(inner)
        self._backend = backend
        self.on_phase = on_phase
        # Records are keyed by the absolute location (bucket or file-system root, and the
        # path below it), so that handles rooted at different prefixes of one bucket or
        # file system (a writer at file:///data, a job at file:/// with path data/db) share
        # them.
        self._key, self._base = split_store_url(inner.spec.url)

    # -- identity ---------------------------------------------------------------------------

    @property
    def backend(self) -> CasBackend:
        """The transactional store."""
        return self._backend

    def with_inner(self, inner: ObjectStore) -> TwoPhaseObjectStore:
        """The same two-phase store over another handle of the same object store."""
        return TwoPhaseObjectStore(inner, self._backend, on_phase=self.on_phase)

    def _abs(self, path: str) -> str:
        return f"{self._base}/{path}" if self._base and path else (path or self._base)

    def _rel(self, location: str) -> str:
        if not self._base:
            return location
        if not location.startswith(self._base + "/"):
            raise InternalError(f"two-phase cas: record {location!r} lies outside the store "
                                f"{self.url}")
        return location[len(self._base) + 1:]

    def __repr__(self) -> str:
        return f"TwoPhaseObjectStore({self._inner!r}, cas={self._backend.url!r})"

    def close(self) -> None:
        """Close the transactional store's connections."""
        self._backend.close()

    def _phase(self, phase: str, path: str) -> None:
        if self.on_phase is not None:
            self.on_phase(phase, path)

    def record(self, path: str) -> CasRecord | None:
        """The record of ``path`` (its ``destination`` and ``source`` are absolute: the
        path below the bucket or file-system root), if any."""
        return self._backend.get(self._key, self._abs(check_path(path)))

    def records(self, prefix: str = "", *, committed: bool | None = None) -> list[CasRecord]:
        """The records below the directory ``prefix`` (all, or only committed or incomplete
        ones), in destination order."""
        return self._backend.scan(self._key, self._abs(check_prefix(prefix)),
                                  committed=committed)

    # -- reads: finish an unfinished write before reporting a missing object ------------------

    def _on_missing(self, path: str) -> bool:
        """After a miss at ``path``: finish its incomplete record; True if it now exists."""
        try:
            rec = self._backend.get(self._key, self._abs(path))
            if rec is None or rec.committed:
                return False
            return self.recover_record(rec)
        except UnavailableError as err:
            log.warning("two-phase cas: cannot check for an unfinished write [path=%s, "
                        "error=%s]", path, err)
            return False

    def get(self, path: str) -> bytes:
        try:
            return self._inner.get(path)
        except ObjectMissingError:
            if not self._on_missing(check_path(path)):
                raise
        return self._inner.get(path)

    def get_with_meta(self, path: str) -> tuple[bytes, ObjectMeta]:
        """The object and its metadata; ``e_tag`` is this store's token (see the module
        docstring), to pass to :meth:`put_if_match`."""
        p = check_path(path)
        for _ in range(3):
            try:
                data, meta = self._inner.get_with_meta(p)
            except ObjectMissingError:
                if not self._on_missing(p):
                    raise
                data, meta = self._inner.get_with_meta(p)
            rec = self._backend.get(self._key, self._abs(p))
            digest = sha256_hex(data)
            if rec is not None and not rec.committed:
                self.recover_record(rec)
                continue
            if rec is not None and rec.checksum == digest:
                return data, replace(meta, e_tag=TOKEN_ETAG + rec.token)
            return data, replace(meta, e_tag=CONTENT_ETAG + digest)
        raise UnavailableError(f"{self.url}: {p}: its record keeps changing")

    def get_range(self, path: str, start: int, end: int) -> bytes:
        try:
            return self._inner.get_range(path, start, end)
        except ObjectMissingError:
            if not self._on_missing(check_path(path)):
                raise
        return self._inner.get_range(path, start, end)

    def get_ranges(self, path: str, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        try:
            return self._inner.get_ranges(path, ranges)
        except ObjectMissingError:
            if not self._on_missing(check_path(path)):
                raise
        return self._inner.get_ranges(path, ranges)

    def head(self, path: str) -> ObjectMeta:
        """Metadata without an ETag (use :meth:`get_with_meta` for one)."""
        try:
            meta = self._inner.head(path)
        except ObjectMissingError:
            if not self._on_missing(check_path(path)):
                raise
            meta = self._inner.head(path)
        return replace(meta, e_tag=None)

    def list(
        self, prefix: str, *, start_after: str | None = None, end_before: str | None = None
    ) -> Iterator[ObjectMeta]:
        """See :meth:`ObjectStore.list`; unfinished writes below ``prefix`` are finished
        (or rolled back) first, so that every durable write is listed."""
        base = check_prefix(prefix)
        try:
            self.recover(base)
        except UnavailableError as err:
            log.warning("two-phase cas: listing without recovery [prefix=%s, error=%s]",
                        base, err)
        listing = self._inner.list(prefix, start_after=start_after, end_before=end_before)
        return (meta for meta in listing if not is_temporary(meta.path))

    # -- plain writes and deletes ---------------------------------------------------------------

    def delete(self, path: str) -> None:
        """Delete the record of ``path`` (and an unfinished write's temporary), then the
        object. A failure of the transactional store fails the delete before anything is
        deleted."""
        p = check_path(path)
        self._delete_record(p)
        self._inner.delete(p)

    def _delete_record(self, p: str) -> None:
        rec = self._backend.get(self._key, self._abs(p))
        if rec is not None:
            self._backend.delete(self._key, rec.destination)
            if not rec.committed:
                self._inner.delete(self._rel(rec.source))

    def delete_many(self, paths: Iterable[str]) -> None:
        checked = [check_path(p) for p in paths]
        gone = self._backend.delete_many(self._key, [self._abs(p) for p in checked])
        temps = [self._rel(r.source) for r in gone if not r.committed]
        self._inner.delete_many([*temps, *checked])

    # -- conditional writes ----------------------------------------------------------------------

    def put_if_absent(self, path: str, data: BytesLike) -> None:
        """Create the object at ``path`` unless one exists, through the transactional store.

        Raises:
            AlreadyExistsError: an object or a record of another write exists at ``path``.
            UnavailableError: the transactional store (or the object store) failed before
                the intent was recorded: nothing was written.
            CommitStateUnknownError: the intent may or may not have been recorded, or it
                was recorded but the copy to ``path`` failed (a later reader, writer or
                :meth:`recover` finishes it; reading ``path`` back tells).
        """
        self._write(check_path(path), check_data(data), None)

    def put_if_match(self, path: str, data: BytesLike, e_tag: str | None) -> str | None:
        """Overwrite the object only if ``e_tag`` (from :meth:`get_with_meta`) is still
        current (``None``: create only if absent). Returns the new ETag.

        Raises:
            AlreadyExistsError: ``e_tag`` is None and the object exists.
            ConflictError: ``e_tag`` is not current (or not one of this store's).
            UnavailableError, CommitStateUnknownError: as for :meth:`put_if_absent`.
        """
        p = check_path(path)
        payload = check_data(data)
        if e_tag is not None and (not isinstance(e_tag, str) or not e_tag):
            raise InvalidArgumentError(f"e_tag must be a non-empty string or None: {e_tag!r}")
        return TOKEN_ETAG + self._write(p, payload, e_tag)

    def _write(self, p: str, payload: bytes, e_tag: str | None) -> str:
        token = uuid.uuid4().hex
        tmp = f"{p}.{token}.{zlib.crc32(payload):08x}"
        digest = sha256_hex(payload)
        t = now_ms()
        rec = CasRecord(destination=self._abs(p), source=self._abs(tmp), token=token,
                        checksum=digest,
                        prev_checksum=None, size=len(payload), committed=False,
                        created_ms=t, updated_ms=t)
        # Fail early, before any PUT, when the transactional store is down or the object
        # exists: an extra read, but a cleanly refused write leaves nothing behind.
        current = self._backend.get(self._key, rec.destination)
        if e_tag is None:
            self._refuse_existing(p, current)
        self._inner.put(tmp, payload)  # 1: temporary object
        self._phase("temp_written", p)
        try:
            prev = self._record(p, rec, e_tag, current)  # 2: the intent (the CAS)
        except (ConflictError, UnavailableError):
            self._delete_quietly(tmp)
            raise
        self._phase("recorded", p)
        try:
            self._check_destination(p, rec, prev)
            self._inner.put(p, payload)  # 3: the copy to the final name
            self._phase("copied", p)
            if not self._backend.mark_committed(self._key, rec.destination, token):  # 4
                log.warning("two-phase cas: the record of our write vanished before we "
                            "marked it committed (deleted concurrently) [path=%s]", p)
        except UnavailableError as err:
            raise CommitStateUnknownError(
                f"{self.url}: {p}: the write is recorded in the cas store but could not be "
                f"finished ({err}); the next reader or writer of {p} finishes it") from err
        self._phase("committed", p)
        self._delete_quietly(tmp)  # 5: the temporary object
        return token

    def _refuse_existing(self, p: str, current: CasRecord | None) -> None:
        if current is not None:
            if not current.committed:
                self.recover_record(current)
            raise AlreadyExistsError(f"{self.url}: {p} already exists (two-phase cas)", path=p)
        if self._exists(p):
            raise AlreadyExistsError(f"{self.url}: {p} already exists", path=p)

    def _record(self, p: str, rec: CasRecord, e_tag: str | None,
                current: CasRecord | None) -> str | None:
        """Step 2; returns the checksum of the version being replaced (None for a create).

        Raises:
            AlreadyExistsError, ConflictError: another write won.
        """
        if e_tag is None:
            if self._insert(rec):
                return None
            found = self._backend.get(self._key, rec.destination)
            if found is not None and not found.committed:
                self.recover_record(found)
            raise AlreadyExistsError(f"{self.url}: {p} already exists (two-phase cas)", path=p)
        if e_tag.startswith(TOKEN_ETAG):
            expected = e_tag[len(TOKEN_ETAG):]
            if current is None or current.token != expected or not current.committed:
                self._conflict(p, current, e_tag)
            assert current is not None
            new = replace(rec, prev_checksum=current.checksum)
            if not self._replace(new, expected):
                self._conflict(p, self._backend.get(self._key, rec.destination), e_tag)
            return current.checksum
        if e_tag.startswith(CONTENT_ETAG):
            seen = e_tag[len(CONTENT_ETAG):]
            new = replace(rec, prev_checksum=seen)
            if current is None:
                if not self._insert(new):
                    self._conflict(p, self._backend.get(self._key, rec.destination), e_tag)
                return seen
            if not current.committed:
                self._conflict(p, current, e_tag)
            try:
                digest = sha256_hex(self._inner.get(p))
            except ObjectMissingError:
                digest = None
            if digest != seen or current.checksum == digest:
                # Changed since it was read, or now tracked by its record (whose token the
                # caller must present).
                self._conflict(p, current, e_tag)
            if not self._replace(new, current.token):
                self._conflict(p, self._backend.get(self._key, rec.destination), e_tag)
            return seen
        self._conflict(p, current, e_tag)
        raise AssertionError("unreachable")

    def _conflict(self, p: str, found: CasRecord | None, e_tag: str) -> None:
        if found is not None and not found.committed:
            self.recover_record(found)
        raise ConflictError(f"{self.url}: {p}: ETag {e_tag!r} is not current (two-phase cas)")

    def _insert(self, rec: CasRecord) -> bool:
        return self._resolved(rec, lambda: self._backend.insert(self._key, rec))

    def _replace(self, rec: CasRecord, expected: str) -> bool:
        return self._resolved(rec, lambda: self._backend.replace(self._key, rec, expected))

    def _resolved(self, rec: CasRecord, fn: Callable[[], bool]) -> bool:
        """Run the recording statement; after a lost answer, read the record back."""
        try:
            return fn()
        except CasUnreachableError:
            raise  # nothing was sent: a clean failure
        except UnavailableError as err:
            try:
                found = self._backend.get(self._key, rec.destination)
            except UnavailableError as again:
                raise CommitStateUnknownError(
                    f"{self.url}: {rec.destination}: the cas store failed while recording "
                    f"the write ({err}) and cannot be asked whether it was ({again})"
                ) from err
            if found is not None and found.token == rec.token:
                return True
            raise

    def _check_destination(self, p: str, rec: CasRecord, prev: str | None) -> None:
        """After step 2: an object at ``p`` that is neither ours (copied by a recovering
        process) nor the version we replace was written outside two-phase CAS, and an
        overwrite whose object vanished has nothing to replace: roll back."""
        try:
            digest: str | None = sha256_hex(self._inner.get(p))
        except ObjectMissingError:
            digest = None
        if digest == rec.checksum or (digest is not None and digest == prev):
            return
        if digest is None and prev is None:
            return
        self._backend.delete(self._key, rec.destination, rec.token)
        self._delete_quietly(self._rel(rec.source))
        if prev is None:
            raise AlreadyExistsError(f"{self.url}: {p} already exists (written without "
                                     "two-phase cas)", path=p)
        raise ConflictError(f"{self.url}: {p} changed or vanished since it was read")

    def _exists(self, p: str) -> bool:
        try:
            self._inner.head(p)
            return True
        except ObjectMissingError:
            return False

    def _delete_quietly(self, path: str) -> None:
        try:
            self._inner.delete(path)
        except SlateError as err:
            log.warning("two-phase cas: could not delete a temporary object (collect() "
                        "removes it later) [path=%s, error=%s]", path, err)

    # -- recovery and collection ------------------------------------------------------------------

    def recover(self, prefix: str = "") -> int:
        """Finish or roll back every incomplete record below the directory ``prefix``;
        returns how many were looked at.

        Raises:
            UnavailableError: the transactional store or the object store failed.
            CorruptObjectError: a temporary object does not match its record's checksum.
        """
        records = self._backend.scan(self._key, self._abs(check_prefix(prefix)),
                                     committed=False)
        for rec in records:
            self.recover_record(rec)
        return len(records)

    def recover_record(self, rec: CasRecord) -> bool:
        """Finish or roll back one incomplete record (see the module docstring); True if
        the write is now committed, False if it was rolled back (or replaced meanwhile).

        Raises:
            CorruptObjectError: the temporary object does not match the record's checksum.
        """
        p, source = self._rel(rec.destination), self._rel(rec.source)
        try:
            existing: bytes | None = self._inner.get(p)
        except ObjectMissingError:
            existing = None
        if existing is not None:
            digest = sha256_hex(existing)
            if digest == rec.checksum:
                self._finish(rec, copied=True)
                return True
            if rec.prev_checksum is None or digest != rec.prev_checksum:
                self._roll_back(rec, "the object at its destination is not the one it writes "
                                "or replaces")
                return False
        elif rec.prev_checksum is not None:
            self._roll_back(rec, "the object it replaces is gone")
            return False
        try:
            data = self._inner.get(source)
        except ObjectMissingError:
            again = self._backend.get(self._key, rec.destination)
            if again is None or again.token != rec.token:
                return False
            if again.committed:
                return True
            self._roll_back(rec, "its temporary object is gone")
            return False
        if sha256_hex(data) != rec.checksum:
            raise CorruptObjectError(
                f"two-phase cas: temporary object {source} does not match the checksum "
                f"recorded for {p}", path=source)
        self._inner.put(p, data)
        self._finish(rec, copied=False)
        return True

    def _finish(self, rec: CasRecord, *, copied: bool) -> None:
        if self._backend.mark_committed(self._key, rec.destination, rec.token):
            log.info("two-phase cas: finished an interrupted write [path=%s, copy=%s]",
                     rec.destination, "already done" if copied else "done now")
        self._delete_quietly(self._rel(rec.source))

    def _roll_back(self, rec: CasRecord, why: str) -> None:
        if self._backend.delete(self._key, rec.destination, rec.token):
            log.warning("two-phase cas: rolled back an interrupted write: %s [path=%s]",
                        why, rec.destination)
        self._delete_quietly(self._rel(rec.source))

    def collect(self, min_age_s: float = 3600.0, prefix: str = "") -> CollectReport:
        """Sweep what crashes leave behind below the directory ``prefix`` (default: the
        whole store, which this lists), older than ``min_age_s``: finish or roll back
        incomplete records, delete committed records whose object is gone (a crash between
        the two deletes of :meth:`delete`, or an object deleted by a tool that bypasses this
        store) and temporary objects that no incomplete record names (a crash after step 1
        or step 4). A write that takes longer than ``min_age_s`` between its steps 1 and 2
        loses its temporary object (and is rolled back if it then crashes).

        Raises:
            InvalidArgumentError: a negative ``min_age_s``.
            UnavailableError: the transactional store or the object store failed.
        """
        if min_age_s < 0:
            raise InvalidArgumentError(f"min_age_s must be >= 0, got {min_age_s}")
        cutoff = now_ms() - int(min_age_s * 1000)  # older: at or before the cutoff
        base = check_prefix(prefix)
        where = self._abs(base)
        report = CollectReport()
        for rec in self._backend.scan(self._key, where, committed=False,
                                      created_before_ms=cutoff + 1):
            if self.recover_record(rec):
                report.finished += 1
            else:
                report.rolled_back += 1
        for rec in self._backend.scan(self._key, where, committed=True,
                                      created_before_ms=cutoff + 1):
            if not self._exists(self._rel(rec.destination)) and self._backend.delete(
                    self._key, rec.destination, rec.token):
                report.records_deleted += 1
        for meta in self._inner.list(base):
            if not is_temporary(meta.path) or meta.last_modified_ms > cutoff:
                continue
            if not self._backend.source_pending(self._key, self._abs(meta.path)):
                self._inner.delete(meta.path)
                report.temps_deleted += 1
        return report
