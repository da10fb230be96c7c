"""Drive the official ``slatedb==0.17.0`` package synchronously, for interop tests.

The official Python API (UniFFI bindings over the Rust core) is async. This module wraps
the parts our tests need behind blocking calls that all run on one private event loop,
plus a :class:`Model` of the state a reader must see. It imports nothing from slatelib:
it is the *oracle* side of every interop test.

What is here:

- stores: :func:`local_store` (a local folder as the store root, like the fixtures) and
  :func:`s3_store` (an S3-compatible endpoint such as the tests' moto server);
- :class:`DbSettings` -> official ``Settings`` (codec, block size, ``min_filter_keys``,
  ``flush_interval = null``, an embedded compactor that never compacts on its own, or none);
- write operations :class:`Put`, :class:`Delete`, :class:`Merge` (with TTLs), applied as
  one batch (= one sequence number) by :meth:`OfficialDb.write`;
- :class:`OfficialDb`: a writable ``Db`` (write, flush WAL / memtable, close);
- :class:`OfficialAdmin`: read manifests, submit a tiered compaction and wait for it,
  create checkpoints;
- :func:`clone` with :class:`CloneSource`: full, projected and union clones;
- :class:`OfficialReader` / :func:`read_all`: the official ``DbReader`` (scan, get), with an
  optional merge operator (:class:`Concat`) and segment extractor (:class:`FixedPrefix`);
- :class:`Model`: key -> expected value, including 0.17.0's TTL behaviour.
- ``wal_store=`` on :meth:`OfficialDb.open`, :meth:`OfficialReader.open`, :func:`read_all`,
  :class:`OfficialAdmin` and :func:`clone`: a second store for the WAL
  (``with_wal_object_store``), a local folder or an official ObjectStore.

Example::

    model = Model()
    with OfficialDb.open(tmp_path, "db", DbSettings(codec="Zstd"), model=model) as db:
        db.write([Put(b"k", b"v"), Delete(b"gone")])    # one batch, one seq
        db.flush_memtable()                              # -> one new L0 SST
        db.write([Put(b"w", b"wal only")])
        db.flush_wal()                                   # WAL-only row
    OfficialAdmin(tmp_path, "db").compact(l0=1, destination=0)   # oldest L0 -> run 0
    assert read_all(tmp_path, "db") == model.items()

0.17.0 behaviour these helpers encode (see ``../shared/fixtures/README.md`` and ``docs/format.md``):

- Opening a ``Db`` or a ``DbReader`` WRITES to the database (manifest versions, WAL
  fences, reader checkpoints). Never point these helpers at the checked-in golden folder:
  use the ``fixture_copy`` pytest fixture.
- TTL is not applied at read time: an expired row that is still only in the WAL is
  returned by every reader. A memtable flush rewrites rows whose ``expire_ts`` has passed as
  tombstones (:meth:`Model.flush_memtable` mirrors this).
- ``flush_interval = null``: the WAL is written only by an explicit flush (or a memtable
  flush, which writes the WAL first, or a close with a WAL flush).
- Projected and union clones refuse sources whose checkpoint still has data WALs to
  replay: call :meth:`OfficialDb.flush_all` (WAL, then memtable) before checkpointing.
- A tiered compaction's sources must be consecutive in the order [L0 newest -> oldest,
  then sorted runs by descending id]; with sorted runs among the sources the destination
  must be the lowest of their ids; an L0-only compaction needs a destination above every
  existing run id. :meth:`OfficialAdmin.compact` picks sources that satisfy this.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import threading
import time
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from typing import Any, TypeAlias, TypeVar

from slatedb.uniffi import (
    AdminBuilder,
    BloomFilterOptions,
    CheckpointCreateResult,
    CheckpointOptions,
    CloneSourceSpec,
    CloseOptions,
    CompactionSpec,
    CompactionStatus,
    Db,
    DbBuilder,
    DbReader,
    DbReaderBuilder,
    FilterPolicy,
    FlushOptions,
    FlushType,
    KeyRange,
    MergeOperator,
    MergeOptions,
    ObjectStore,
    ObjectStoreBuilder,
    ObjectStoreType,
    PrefixExtractor,
    PutOptions,
    ReaderMode,
    Settings,
    SourceId,
    SstBlockSize,
    Ttl,
    VersionedManifest,
    WriteBatch,
    WriteOptions,
)

T = TypeVar("T")

OFFICIAL_VERSION = "0.17.0"
CODECS: tuple[str | None, ...] = (None, "Snappy", "Zlib", "Lz4", "Zstd")
"""Every compression codec of 0.17.0 (None = uncompressed), as its Settings JSON spells it."""
FAR_FUTURE_MS = 4102444800000
"""2100-01-01T00:00:00Z: a TTL that stays live for the whole test run."""
LONG_AGO_MS = 946684800000
"""2000-01-01T00:00:00Z: a TTL already expired when the row is written."""

BLOCK_SIZES: dict[int, SstBlockSize] = {
    1024: SstBlockSize.BLOCK1_KIB,
    2048: SstBlockSize.BLOCK2_KIB,
    4096: SstBlockSize.BLOCK4_KIB,
    8192: SstBlockSize.BLOCK8_KIB,
    16384: SstBlockSize.BLOCK16_KIB,
    32768: SstBlockSize.BLOCK32_KIB,
    65536: SstBlockSize.BLOCK64_KIB,
}
"""SST block sizes (bytes) that 0.17.0 can be configured with."""

StoreRoot: TypeAlias = "str | PathLike[str] | ObjectStore"
"""Where a database lives: a local folder (the store root) or an official ObjectStore."""


# ------------------------------------------------------------------------------ event loop
_loop: asyncio.AbstractEventLoop | None = None
_thread_loops = threading.local()


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run one coroutine of the official API to completion.

    Every call of a thread uses the same private event loop of that thread, so objects
    made by one call (a ``Db``, an iterator) can be used by the next; the main thread's
    loop is closed at exit, another thread's when the thread ends.
    """
    global _loop
    if threading.current_thread() is not threading.main_thread():
        loop = getattr(_thread_loops, "loop", None)
        if loop is None or loop.is_closed():
            loop = _thread_loops.loop = asyncio.new_event_loop()
        return loop.run_until_complete(coro)
    if _loop is None or _loop.is_closed():
        _loop = asyncio.new_event_loop()
    return _loop.run_until_complete(coro)


@atexit.register
def _close_loop() -> None:
    if _loop is not None and not _loop.is_closed():
        _loop.close()


# ---------------------------------------------------------------------------------- stores
def local_store(root: str | PathLike[str]) -> ObjectStore:
    """An official store rooted at the local folder ``root`` (database paths are relative
    to it, as in the fixtures: clones reference their sources by that relative path)."""
    builder = ObjectStoreBuilder.from_env(ObjectStoreType.LOCAL)
    builder.with_config("local_path", str(root))
    return builder.build()


def s3_store(
    bucket: str,
    *,
    endpoint: str,
    region: str = "us-east-1",
    access_key_id: str = "testing",
    secret_access_key: str = "testing",
    allow_http: bool = True,
) -> ObjectStore:
    """An official store on an S3-compatible endpoint (path-style requests), e.g. moto."""
    builder = ObjectStoreBuilder.from_env(ObjectStoreType.S3)
    config = {
        "bucket": bucket,
        "endpoint": endpoint,
        "region": region,
        "access_key_id": access_key_id,
        "secret_access_key": secret_access_key,
        "allow_http": "true" if allow_http else "false",
        "virtual_hosted_style_request": "false",
    }
    for key, value in config.items():
        builder.with_config(key, value)
    return builder.build()


def as_store(where: StoreRoot) -> ObjectStore:
    """An official ObjectStore for a folder path, or ``where`` itself if it already is one."""
    return where if isinstance(where, ObjectStore) else local_store(where)


# -------------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class DbSettings:
    """The writer settings our tests vary, turned into official ``Settings``.

    Attributes:
        codec: None (uncompressed) or one of ``"Snappy"``, ``"Zlib"``, ``"Lz4"``, ``"Zstd"``;
            used by the writer (WAL and L0 SSTs) and by the compactor (sorted runs).
        block_size: SST block size in bytes (a key of :data:`BLOCK_SIZES`).
        min_filter_keys: SSTs with fewer rows get no bloom filter (0.17.0 default 1000).
        compactor: run an embedded compactor that only executes submitted compactions
            (it never schedules one by itself); False sets ``compactor_options = null``.
        compaction_max_sst_size: ``compactor_options.worker.max_sst_size``; small values make
            a compaction split its output run into several SSTs.
        flush_interval: None keeps ``flush_interval = null`` (WAL written only when asked).
        extra: more top-level Settings keys as JSON values (e.g. ``{"wal_enabled": "false"}``).
    """

    codec: str | None = None
    block_size: int = 4096
    min_filter_keys: int = 1
    compactor: bool = True
    compaction_max_sst_size: int | None = None
    flush_interval: str | None = None
    extra: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.codec not in CODECS:
            raise ValueError(f"unknown codec {self.codec!r}; expected one of {CODECS}")
        if self.block_size not in BLOCK_SIZES:
            raise ValueError(f"block size {self.block_size} not in {sorted(BLOCK_SIZES)}")

    @property
    def sst_block_size(self) -> SstBlockSize:
        return BLOCK_SIZES[self.block_size]

    def to_official(self) -> Settings:
        """The official ``Settings`` object (as ``make_fixtures.py`` builds it)."""
        st = Settings.default()
        st.set("flush_interval", json.dumps(self.flush_interval))
        st.set("min_filter_keys", json.dumps(self.min_filter_keys))
        st.set("compression_codec", json.dumps(self.codec))
        if self.compactor:
            co = json.loads(Settings.default().to_json_string())["compactor_options"]
            co["poll_interval"] = "50ms"
            # Never compact on its own: only submitted compactions run.
            co["scheduler_options"] = {
                "min_compaction_sources": "1000",
                "max_compaction_sources": "1000",
            }
            co["worker"]["compactions_poll_interval"] = "50ms"
            co["worker"]["min_filter_keys"] = self.min_filter_keys
            co["worker"]["compression_codec"] = self.codec
            if self.compaction_max_sst_size is not None:
                co["worker"]["max_sst_size"] = self.compaction_max_sst_size
            st.set("compactor_options", json.dumps(co))
        else:
            st.set("compactor_options", "null")
        for key, value in self.extra.items():
            st.set(key, value)
        return st


# ------------------------------------------------------------ merge operator and segments
class Concat(MergeOperator):  # type: ignore[misc]
    """The merge operator of our tests (slatelib's builtin ``"concat"``):
    ``(existing value or b"") + operand``."""

    def merge(self, key: bytes, existing_value: bytes | None, operand: bytes) -> bytes:
        return (existing_value or b"") + operand


class FixedPrefix(PrefixExtractor):  # type: ignore[misc]
    """Segment extractor: the first ``n`` bytes of every key, named ``fixed<n>``
    (``FixedPrefix(4)`` is the ``fixed4`` extractor of the ``segmented`` fixture). Keys
    shorter than ``n`` have no prefix, which a segmented database refuses."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    def name(self) -> str:
        return f"fixed{self.n}"

    def prefix_len(self, target: Any) -> int | None:
        data = target.key if target.is_point() else target.prefix
        return self.n if len(data) >= self.n else None


def bloom_policy(
    bits_per_key: int = 10, *, prefix: PrefixExtractor | None = None, whole_keys: bool = True
) -> FilterPolicy:
    """A bloom filter policy: whole keys (named ``_bf``), or prefixes of ``prefix`` too
    (``_bf:p=<name>``), or prefixes only (``whole_keys=False``: ``_bf:p=<name>:wh=0``)."""
    if prefix is None and whole_keys:
        return FilterPolicy.bloom(bits_per_key)
    opts = BloomFilterOptions(bits_per_key=bits_per_key, whole_key_filtering=whole_keys)
    return FilterPolicy.bloom_with_options(opts, prefix)


# ------------------------------------------------------------------------------ operations
@dataclass(frozen=True)
class Put:
    """Put ``value`` at ``key``. TTL: ``expire_at_ms`` (absolute, ``Ttl.EXPIRE_AT_MILLIS``)
    or ``ttl_ms`` (relative to the write, ``Ttl.EXPIRE_AFTER_MILLIS``); neither means the
    database's default TTL (none, unless ``default_ttl_millis`` is set)."""

    key: bytes
    value: bytes
    expire_at_ms: int | None = None
    ttl_ms: int | None = None

    def ttl(self) -> Ttl:
        return _ttl(self.expire_at_ms, self.ttl_ms)


@dataclass(frozen=True)
class Delete:
    key: bytes


@dataclass(frozen=True)
class Merge:
    """Merge ``operand`` into ``key`` (needs a merge operator on the Db and the readers)."""

    key: bytes
    operand: bytes
    expire_at_ms: int | None = None
    ttl_ms: int | None = None

    def ttl(self) -> Ttl:
        return _ttl(self.expire_at_ms, self.ttl_ms)


Op = Put | Delete | Merge


def _ttl(expire_at_ms: int | None, ttl_ms: int | None) -> Ttl:
    if expire_at_ms is not None and ttl_ms is not None:
        raise ValueError("give expire_at_ms or ttl_ms, not both")
    if expire_at_ms is not None:
        return Ttl.EXPIRE_AT_MILLIS(expire_at_ms)
    if ttl_ms is not None:
        return Ttl.EXPIRE_AFTER_MILLIS(ttl_ms)
    return Ttl.DEFAULT()


def _expire_at(op: Put | Merge, now_ms: int) -> int | None:
    """When ``op``'s row expires (Unix ms), or None."""
    if op.expire_at_ms is not None:
        return op.expire_at_ms
    return None if op.ttl_ms is None else now_ms + op.ttl_ms


def to_batch(ops: Iterable[Op]) -> WriteBatch:
    """One official ``WriteBatch`` holding ``ops`` in order."""
    wb = WriteBatch()
    for op in ops:
        if isinstance(op, Put):
            if op.expire_at_ms is None and op.ttl_ms is None:
                wb.put(op.key, op.value)
            else:
                wb.put_with_options(op.key, op.value, PutOptions(ttl=op.ttl()))
        elif isinstance(op, Delete):
            wb.delete(op.key)
        elif isinstance(op, Merge):
            if op.expire_at_ms is None and op.ttl_ms is None:
                wb.merge(op.key, op.operand)
            else:
                wb.merge_with_options(op.key, op.operand, MergeOptions(ttl=op.ttl()))
        else:  # pragma: no cover - a test bug
            raise TypeError(f"not an operation: {op!r}")
    return wb


# ---------------------------------------------------------------------------------- model
class Model:
    """What a reader of the database must see, maintained next to the official writes.

    ``kv`` maps every key ever written to its expected value, or None when it reads as
    absent (deleted, or expired and flushed). Merges use :class:`Concat` semantics. TTL
    follows 0.17.0: a row stays readable while it is only in the WAL/memtable, and a memtable
    flush (:meth:`flush_memtable`) turns rows whose expiry has passed into tombstones.
    Keep TTL keys apart from merge keys: merging onto an expired value is not modelled.
    """

    def __init__(self, kv: Mapping[bytes, bytes | None] | None = None) -> None:
        self.kv: dict[bytes, bytes | None] = dict(kv or {})
        self.expired: set[bytes] = set()
        self._expire_at: dict[bytes, int] = {}
        self._unflushed: set[bytes] = set()

    # -- updates
    def apply(self, ops: Iterable[Op], now_ms: int | None = None) -> None:
        """Apply one batch (in order, as the writer applies it) written at ``now_ms``
        (default: now; it only matters for relative TTLs)."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        for op in ops:
            key = op.key
            if isinstance(op, Put):
                self.kv[key] = op.value
            elif isinstance(op, Delete):
                self.kv[key] = None
            elif isinstance(op, Merge):
                self.kv[key] = (self.kv.get(key) or b"") + op.operand
            self.expired.discard(key)
            expire = None if isinstance(op, Delete) else _expire_at(op, now)
            if expire is None:
                self._expire_at.pop(key, None)
            else:
                self._expire_at[key] = expire
            self._unflushed.add(key)

    def flush_memtable(self, now_ms: int | None = None) -> None:
        """A memtable flush: expired rows written since the last one become tombstones."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        for key in self._unflushed:
            expire = self._expire_at.get(key)
            if expire is not None and expire <= now and self.kv.get(key) is not None:
                self.kv[key] = None
                self.expired.add(key)
        self._unflushed.clear()

    # -- views
    def get(self, key: bytes) -> bytes | None:
        return self.kv.get(key)

    def live(self) -> dict[bytes, bytes]:
        """Every readable key and its value, in key order."""
        return {k: v for k, v in sorted(self.kv.items()) if v is not None}

    def items(
        self, start: bytes | None = None, end: bytes | None = None
    ) -> list[tuple[bytes, bytes]]:
        """``(key, value)`` for readable keys with ``start <= key < end``, in key order."""
        return [
            (k, v) for k, v in self.live().items()
            if (start is None or k >= start) and (end is None or k < end)
        ]

    def deleted(self) -> list[bytes]:
        """Keys that were written but read as absent (deleted or expired), sorted."""
        return sorted(k for k, v in self.kv.items() if v is None)

    def keys(self) -> list[bytes]:
        """Every key ever written, sorted."""
        return sorted(self.kv)

    # -- derived models
    def copy(self) -> Model:
        """A snapshot (e.g. the state a checkpoint pins)."""
        out = Model(self.kv)
        out.expired = set(self.expired)
        out._expire_at = dict(self._expire_at)
        out._unflushed = set(self._unflushed)
        return out

    def projected(self, start: bytes | None, end: bytes | None) -> Model:
        """The model of a clone projected to ``[start, end)``: only keys in the range."""
        out = self.copy()

        def inside(k: bytes) -> bool:
            return (start is None or k >= start) and (end is None or k < end)

        out.kv = {k: v for k, v in self.kv.items() if inside(k)}
        out.expired = {k for k in out.expired if inside(k)}
        out._expire_at = {k: e for k, e in out._expire_at.items() if inside(k)}
        out._unflushed = {k for k in out._unflushed if inside(k)}
        return out

    @staticmethod
    def union(*models: Model) -> Model:
        """The model of a union clone of sources with disjoint key ranges."""
        out = Model()
        for m in models:
            overlap = out.kv.keys() & m.kv.keys()
            if overlap:
                raise ValueError(f"union sources overlap on {sorted(overlap)[:3]}")
            out.kv.update(m.kv)
            out.expired |= m.expired
            out._expire_at.update(m._expire_at)
            out._unflushed |= m._unflushed
        return out


# --------------------------------------------------------------------------------- writer
class OfficialDb:
    """A writable official ``Db``. Use :meth:`open`; close with :meth:`close` or ``with``.

    When opened with a ``model``, every :meth:`write` and :meth:`flush_memtable` is mirrored
    into it.
    """

    def __init__(self, db: Db, path: str, model: Model | None) -> None:
        self.db = db
        self.path = path
        self.model = model
        self._closed = False

    @classmethod
    def open(
        cls,
        where: StoreRoot,
        path: str,
        settings: DbSettings | None = None,
        *,
        model: Model | None = None,
        merge_operator: MergeOperator | None = None,
        segment_extractor: PrefixExtractor | None = None,
        filter_policies: list[FilterPolicy] | None = None,
        seed: int | None = None,
        wal_store: StoreRoot | None = None,
    ) -> OfficialDb:
        """Open (creating when absent) the database at ``path`` in ``where``.

        ``filter_policies`` replaces the default (one whole-key bloom filter, 10 bits per
        key, named ``_bf``); ``[]`` writes no filters. See :func:`bloom_policy`.
        """
        st = settings or DbSettings()
        builder = DbBuilder(path, as_store(where))
        builder.with_settings(st.to_official())
        builder.with_sst_block_size(st.sst_block_size)
        if filter_policies is not None:
            builder.with_filter_policies(filter_policies)
        if seed is not None:
            builder.with_seed(seed)
        if merge_operator is not None:
            builder.with_merge_operator(merge_operator)
        if segment_extractor is not None:
            builder.with_segment_extractor(segment_extractor)
        if wal_store is not None:
            builder.with_wal_object_store(as_store(wal_store))
        return cls(run(builder.build()), path, model)

    def write(self, ops: Sequence[Op], *, seqnum: int = 0) -> int:
        """Apply ``ops`` as ONE write batch (one sequence number) and return that number.
        ``seqnum`` > 0 asks for that sequence number (it must exceed every earlier one)."""
        if not ops:
            raise ValueError("an empty batch")
        now_ms = int(time.time() * 1000)
        handle = run(self.db.write_with_options(to_batch(ops), WriteOptions(seqnum=seqnum)))
        if self.model is not None:
            self.model.apply(ops, now_ms)
        seq: int = handle.seqnum()
        return seq

    def flush_wal(self) -> None:
        """Write the buffered rows as a new WAL SST (they stay out of L0)."""
        run(self.db.flush_with_options(FlushOptions(flush_type=FlushType.WAL)))

    def flush_memtable(self) -> None:
        """Flush the memtable to a new L0 SST (0.17.0 writes the WAL first)."""
        run(self.db.flush_with_options(FlushOptions(flush_type=FlushType.MEM_TABLE)))
        if self.model is not None:
            self.model.flush_memtable()

    def flush_all(self) -> None:
        """WAL then memtable: afterwards ``replay_after_wal_id == wal_id_last_seen``, so a
        checkpoint has no data WAL (projected and union clones need that)."""
        self.flush_wal()
        self.flush_memtable()

    def get(self, key: bytes) -> bytes | None:
        result: bytes | None = run(self.db.get(key))
        return result

    def scan(self, start: bytes | None = None, end: bytes | None = None) -> list[tuple[bytes, bytes]]:
        return _drain(run(self.db.scan(key_range(start, end))))

    def close(self, flush: str | None = "wal") -> None:
        """Shut down; ``flush`` is ``"wal"`` (default: nothing written is lost),
        ``"memtable"`` or None (unflushed writes are dropped)."""
        if self._closed:
            return
        self._closed = True
        kind = {"wal": FlushType.WAL, "memtable": FlushType.MEM_TABLE, None: None}[flush]
        run(self.db.shutdown_with_options(CloseOptions(flush_type=kind)))
        if flush == "memtable" and self.model is not None:
            self.model.flush_memtable()

    def __enter__(self) -> OfficialDb:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------------------- admin
class CompactionFailed(AssertionError):
    """A submitted compaction failed or did not finish in time."""


class OfficialAdmin:
    """The official ``Admin`` of one database: manifests, compactions, checkpoints."""

    def __init__(self, where: StoreRoot, path: str, *, wal_store: StoreRoot | None = None,
                 ) -> None:
        self.store = as_store(where)
        self.path = path
        builder = AdminBuilder(path, self.store)
        if wal_store is not None:
            builder.with_wal_object_store(as_store(wal_store))
        self.admin = builder.build()

    def manifest(self, manifest_id: int | None = None) -> VersionedManifest:
        """A manifest (the latest by default), as the official package decodes it."""
        m = run(self.admin.read_manifest(manifest_id))
        if m is None:
            raise LookupError(f"{self.path}: no manifest {manifest_id or '(latest)'}")
        return m

    def l0_view_ids(self) -> list[str]:
        """L0 view ULIDs, newest first."""
        return [v.id for v in self.manifest().l0]

    def sorted_run_ids(self) -> list[int]:
        """Sorted run ids, highest (newest) first."""
        return [sr.id for sr in self.manifest().compacted]

    @staticmethod
    def tree(m: VersionedManifest, segment: bytes = b"") -> tuple[list[Any], list[Any]]:
        """``(l0 views, sorted runs)`` of the top-level tree (``segment=b""``) or of the
        segment with that prefix."""
        if not segment:
            return list(m.l0), list(m.compacted)
        for seg in m.segments:
            if seg.prefix == segment:
                return list(seg.l0), list(seg.compacted)
        raise LookupError(f"no segment {segment!r}")

    def compact(
        self,
        *,
        l0: int | None = None,
        runs: int = 0,
        destination: int | None = None,
        segment: bytes = b"",
        timeout_s: float = 30.0,
    ) -> VersionedManifest:
        """Submit one tiered compaction and wait until the manifest shows it done.

        Sources are consecutive in the official order, within the top-level tree or the
        given ``segment``: the ``l0`` OLDEST L0 views (None: all of them) followed by the
        ``runs`` newest sorted runs. The destination defaults to the lowest run id among
        the sources, else to one above every run id of every tree (run ids are global).

        Raises:
            CompactionFailed: the compaction failed or was not done within ``timeout_s``.
        """
        m = self.manifest()
        tree_l0, tree_runs = self.tree(m, segment)
        views = [v.id for v in tree_l0]
        chosen_views = views if l0 is None else views[len(views) - l0:]
        chosen_runs = [sr.id for sr in tree_runs][:runs]
        if runs and chosen_views and chosen_views[-1] != views[-1]:
            raise ValueError("sources must be consecutive: include the oldest L0 with runs")
        if destination is None:
            if chosen_runs:
                destination = min(chosen_runs)
            else:
                every = [sr.id for sr in m.compacted]
                every += [sr.id for seg in m.segments for sr in seg.compacted]
                destination = max(every, default=-1) + 1
        sources = [SourceId.SST_VIEW(v) for v in chosen_views]
        sources += [SourceId.SORTED_RUN(r) for r in chosen_runs]
        return self.compact_sources(sources, destination, segment=segment, timeout_s=timeout_s)

    def compact_sources(
        self, sources: list[SourceId], destination: int, *, segment: bytes = b"",
        timeout_s: float = 30.0,
    ) -> VersionedManifest:
        """Submit ``TIERED(sources -> destination)`` and wait (see :meth:`compact`)."""
        spec = CompactionSpec.TIERED(segment=segment, sources=sources, destination=destination)
        compaction = run(self.admin.submit_compaction(spec))
        view_ids = {s[0] for s in sources if s.is_SST_VIEW()}
        run_ids = {s[0] for s in sources if s.is_SORTED_RUN()} - {destination}
        deadline = time.monotonic() + timeout_s
        while True:
            m = self.manifest()
            tree_l0, tree_runs = self.tree(m, segment)
            done = (
                not view_ids & {v.id for v in tree_l0}
                and not run_ids & {sr.id for sr in tree_runs}
                and any(sr.id == destination for sr in tree_runs)
            )
            if done:
                return m
            current = run(self.admin.read_compaction(compaction.id, None))
            if current is not None and current.status == CompactionStatus.FAILED:
                raise CompactionFailed(f"{self.path}: compaction {spec} failed")
            if time.monotonic() > deadline:
                raise CompactionFailed(
                    f"{self.path}: compaction {spec} not done after {timeout_s}s "
                    f"(status {None if current is None else current.status})"
                )
            run(asyncio.sleep(0.02))

    def checkpoint(
        self, name: str | None = None, *, lifetime_ms: int | None = None,
        source: str | None = None,
    ) -> CheckpointCreateResult:
        """A detached checkpoint of the latest manifest (``.id`` is the UUID string,
        ``.manifest_id`` the manifest it pins)."""
        opts = CheckpointOptions(lifetime_ms=lifetime_ms, source=source, name=name)
        result: CheckpointCreateResult = run(self.admin.create_detached_checkpoint(opts))
        return result


# ---------------------------------------------------------------------------------- clones
@dataclass(frozen=True)
class CloneSource:
    """One source of a clone: a database path, an optional checkpoint UUID (None: the
    latest state) and an optional projection ``[start, end)``."""

    path: str
    checkpoint: str | None = None
    start: bytes | None = None
    end: bytes | None = None

    @property
    def projected(self) -> bool:
        return self.start is not None or self.end is not None

    def spec(self) -> CloneSourceSpec:
        rng = key_range(self.start, self.end) if self.projected else None
        return CloneSourceSpec(path=self.path, checkpoint=self.checkpoint, projection_range=rng)


def clone(
    where: StoreRoot, clone_path: str, sources: Sequence[CloneSource], *, seed: int | None = None,
    wal_store: StoreRoot | None = None,
) -> None:
    """Create ``clone_path`` from one source (a full or projected clone) or several sources
    (a union clone; 0.17.0 requires their key ranges to be disjoint)."""
    if not sources:
        raise ValueError("a clone needs at least one source")
    admin_builder = AdminBuilder(clone_path, as_store(where))
    if wal_store is not None:
        admin_builder.with_wal_object_store(as_store(wal_store))
    admin = admin_builder.build()
    builder = admin.create_clone_builder_from_source(sources[0].spec())
    for extra in sources[1:]:
        builder.with_source(extra.spec())
    if seed is not None:
        builder.with_seed(seed)
    run(builder.build())


# --------------------------------------------------------------------------------- reader
def key_range(
    start: bytes | None = None, end: bytes | None = None, *, end_inclusive: bool = False
) -> KeyRange:
    """The official ``KeyRange`` of ``[start, end)`` (``[start, end]`` when inclusive)."""
    return KeyRange(start=start, start_inclusive=True, end=end, end_inclusive=end_inclusive)


def _drain(iterator: Any, batch: int = 4096) -> list[tuple[bytes, bytes]]:
    out: list[tuple[bytes, bytes]] = []
    while True:
        got = run(iterator.next_batch(batch))
        out.extend((kv.key, kv.value) for kv in got)
        if len(got) < batch:
            return out


class OfficialReader:
    """The official ``DbReader``. Use :meth:`open`; close with :meth:`close` or ``with``.

    It adds a checkpoint to the database while open (unless ``follow_latest``).
    """

    def __init__(self, reader: DbReader) -> None:
        self.reader = reader
        self._closed = False

    @classmethod
    def open(
        cls,
        where: StoreRoot,
        path: str,
        *,
        merge_operator: MergeOperator | None = None,
        segment_extractor: PrefixExtractor | None = None,
        checkpoint: str | None = None,
        follow_latest: bool = False,
        filter_policies: list[FilterPolicy] | None = None,
        wal_store: StoreRoot | None = None,
    ) -> OfficialReader:
        builder = DbReaderBuilder(path, as_store(where))
        if wal_store is not None:
            builder.with_wal_object_store(as_store(wal_store))
        if filter_policies is not None:
            builder.with_filter_policies(filter_policies)
        if merge_operator is not None:
            builder.with_merge_operator(merge_operator)
        if segment_extractor is not None:
            builder.with_segment_extractor(segment_extractor)
        if checkpoint is not None:
            builder.with_reader_mode(ReaderMode.CHECKPOINT(checkpoint))
        elif follow_latest:
            builder.with_reader_mode(ReaderMode.FOLLOW_LATEST())
        return cls(run(builder.build()))

    def get(self, key: bytes) -> bytes | None:
        result: bytes | None = run(self.reader.get(key))
        return result

    def get_many(self, keys: Iterable[bytes]) -> dict[bytes, bytes | None]:
        return {k: self.get(k) for k in keys}

    def scan(
        self, start: bytes | None = None, end: bytes | None = None, *, end_inclusive: bool = False
    ) -> list[tuple[bytes, bytes]]:
        """Every ``(key, value)`` in ``[start, end)`` (or ``[start, end]``), in key order."""
        return _drain(run(self.reader.scan(key_range(start, end, end_inclusive=end_inclusive))))

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            run(self.reader.shutdown())

    def __enter__(self) -> OfficialReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_all(
    where: StoreRoot,
    path: str,
    *,
    merge_operator: MergeOperator | None = None,
    segment_extractor: PrefixExtractor | None = None,
    wal_store: StoreRoot | None = None,
) -> list[tuple[bytes, bytes]]:
    """Full scan of ``path`` with the official ``DbReader`` (``wal_store``: its WAL store)."""
    with OfficialReader.open(
        where, path, merge_operator=merge_operator, segment_extractor=segment_extractor,
        wal_store=wal_store,
    ) as r:
        return r.scan()


__all__ = [
    "BLOCK_SIZES",
    "CODECS",
    "FAR_FUTURE_MS",
    "LONG_AGO_MS",
    "OFFICIAL_VERSION",
    "CloneSource",
    "CompactionFailed",
    "Concat",
    "DbSettings",
    "Delete",
    "FixedPrefix",
    "Merge",
    "Model",
    "OfficialAdmin",
    "OfficialDb",
    "OfficialReader",
    "Op",
    "Put",
    "as_store",
    "bloom_policy",
    "clone",
    "key_range",
    "local_store",
    "read_all",
    "run",
    "s3_store",
    "to_batch",
]
