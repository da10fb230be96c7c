"""GC work that runs wherever the objects are: list a key range, re-check and delete.

Plain functions over picklable inputs (a :class:`StoreSpec`, paths, :class:`GcRules`), so a
Spark executor and the single-process :func:`slatelib.ops.gc.collect_garbage` call the
same code.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from slatelib.core.gc_rules import LAYOUT_DIRS, Action, GcRules, ObjectKind, classify, decide
from slatelib.errors import InternalError, SlateError
from slatelib.ids import Ulid, ulid_to_str
from slatelib.objstore import ObjectStore, StoreSpec
from slatelib.ops.gc.state import list_directory

log = logging.getLogger(__name__)

DELETE_BATCH = 1000
"""Paths per ``delete_many`` call (S3's DeleteObjects limit)."""
MAX_ERROR_SAMPLES = 20

Row = tuple[str, int, int]
"""A listed object: ``(path, size, last_modified_ms)``."""

_stores: dict[StoreSpec, ObjectStore] = {}
_stores_lock = threading.Lock()


def open_cached(spec: StoreSpec) -> ObjectStore:
    """One store per spec and process (executors reuse it across tasks).

    Raises:
        InvalidArgumentError / StorageError: the spec cannot be opened.
    """
    with _stores_lock:
        store = _stores.get(spec)
        if store is None:
            store = _stores[spec] = spec.open()
        return store


def list_range(
    spec: StoreSpec, root: str, directory: str, start_after: str | None, end_before: str | None
) -> list[Row]:
    """One key range of ``<root>/<directory>/`` as rows (checked to lie inside it).

    Raises:
        StorageError: the listing returned a path outside the directory.
    """
    store = open_cached(spec)
    return [(m.path, m.size, m.last_modified_ms)
            for m in list_directory(store, root, directory, start_after, end_before)]


@dataclass
class DeleteTally:
    """What a deletion pass did: per kind ``[count, bytes]`` deleted, how many candidates a
    fresh re-check kept, and failures."""

    deleted: dict[str, list[int]] = field(default_factory=dict)
    revalidated_kept: dict[str, int] = field(default_factory=dict)
    error_count: int = 0
    errors: list[str] = field(default_factory=list)

    def add_deleted(self, kind: str, n: int, nbytes: int) -> None:
        cur = self.deleted.setdefault(kind, [0, 0])
        cur[0] += n
        cur[1] += nbytes

    def add_error(self, message: str, n: int = 1) -> None:
        self.error_count += n
        if len(self.errors) < MAX_ERROR_SAMPLES:
            self.errors.append(message)

    def merge(self, other: DeleteTally) -> DeleteTally:
        for k, (n, b) in other.deleted.items():
            self.add_deleted(k, n, b)
        for k, n in other.revalidated_kept.items():
            self.revalidated_kept[k] = self.revalidated_kept.get(k, 0) + n
        self.error_count += other.error_count
        self.errors = (self.errors + other.errors)[:MAX_ERROR_SAMPLES]
        return self


def revalidate(
    rules: GcRules, rows: Iterable[tuple[str, int, int, str | None]],
    skip: frozenset[str] = frozenset(),
) -> tuple[list[tuple[str, ObjectKind, int]], dict[str, int]]:
    """Re-decide delete candidates ``(path, size, mtime, ref)`` with ``rules`` built from a
    fresh read (``ref``: the fresh manifest referencing a compacted SST, or None): the
    survivors (``(path, kind, size)``) and, per kind, how many the fresh state now keeps."""
    survivors: list[tuple[str, ObjectKind, int]] = []
    kept: dict[str, int] = {}
    for path, size, mtime, ref in rows:
        if path in skip:
            continue
        d = decide(rules, path, size, mtime, ref)
        if d.action is Action.DELETE:
            survivors.append((path, d.kind, size))
        else:
            kept[d.kind.value] = kept.get(d.kind.value, 0) + 1
            log.info("gc kept candidate after re-check [path=%s, reason=%s]", path, d.reason)
    return survivors, kept


def with_refs(root: str, rows: Iterable[Row], refs: Mapping[Ulid, str]
              ) -> Iterator[tuple[str, int, int, str | None]]:
    """Attach to each row the reference of its compacted SST (None for other kinds)."""
    for path, size, mtime in rows:
        c = classify(root, path, size)
        ref = refs.get(Ulid(c.id)) if c.kind is ObjectKind.COMPACTED and c.id is not None else None
        yield path, size, mtime, ref


def _guard(root: str, path: str) -> None:
    prefix = f"{root}/" if root else ""
    rest = path[len(prefix):] if path.startswith(prefix) else ""
    head, slash, name = rest.partition("/")
    if head not in LAYOUT_DIRS or not slash or not name:
        raise InternalError(
            f"refusing to delete {path!r}: not inside a SlateDB directory of {root!r}")


def delete_objects(
    store: ObjectStore,
    root: str,
    items: Sequence[tuple[str, ObjectKind, int]],
    *,
    concurrency: int = 8,
    batch_size: int = DELETE_BATCH,
    on_batch: Callable[[int], None] | None = None,
) -> DeleteTally:
    """Delete ``items`` in batches of ``batch_size`` with at most ``concurrency`` requests in
    flight. A failed batch is recorded, not raised, so the rest still goes (as 0.17 logs a
    failed delete and carries on). ``on_batch(n)``: called as each batch of ``n`` items is
    done, deleted or failed (progress).

    Raises:
        InternalError: an item lies outside ``root`` (checked before anything is deleted).
    """
    for path, _, _ in items:
        _guard(root, path)
    tally = DeleteTally()
    batches = [items[i:i + batch_size] for i in range(0, len(items), max(1, batch_size))]

    def run(batch: Sequence[tuple[str, ObjectKind, int]]) -> DeleteTally:
        out = DeleteTally()
        try:
            store.delete_many([p for p, _, _ in batch])
        except SlateError as exc:
            out.add_error(f"deleting {len(batch)} objects from {batch[0][0]!r}: {exc}", len(batch))
            return out
        for _, kind, size in batch:
            out.add_deleted(kind.value, 1, size)
        return out

    if len(batches) <= 1 or concurrency <= 1:
        for b in batches:
            tally.merge(run(b))
            if on_batch is not None:
                on_batch(len(b))
    else:
        with ThreadPoolExecutor(max_workers=min(concurrency, len(batches))) as pool:
            for b, part in zip(batches, pool.map(run, batches), strict=True):
                tally.merge(part)
                if on_batch is not None:
                    on_batch(len(b))
    for kind, (n, _) in sorted(tally.deleted.items()):
        log.info("gc deleted objects [kind=%s, count=%d, root=%s]", kind, n, root)
    return tally


def revalidate_and_delete(
    spec: StoreSpec, rules: GcRules, rows: Iterable[tuple[str, int, int, str | None]],
    skip: frozenset[str], concurrency: int, batch_size: int = DELETE_BATCH,
) -> DeleteTally:
    """Executor entry point: re-check candidates against fresh rules, delete survivors."""
    survivors, kept = revalidate(rules, rows, skip)
    tally = delete_objects(open_cached(spec), rules.root, survivors,
                           concurrency=concurrency, batch_size=batch_size)
    tally.revalidated_kept = kept
    return tally


ListedRow = tuple[str, int, int, str | None]
"""A listed object with its id key: ``(path, size, last_modified_ms, id)`` where ``id`` is
the ULID text of a compacted SST, the decimal id of a manifest/WAL/compactions file, or None
for a name GC does not recognise."""


def id_key(root: str, path: str, size: int) -> str | None:
    """The join/aggregation key of a listed object (see :data:`ListedRow`)."""
    c = classify(root, path, size)
    if c.id is None:
        return None
    return ulid_to_str(c.id) if c.kind is ObjectKind.COMPACTED else str(c.id)


def list_range_keyed(
    spec: StoreSpec, root: str, directory: str, start_after: str | None, end_before: str | None
) -> list[ListedRow]:
    """:func:`list_range` with each object's :func:`id_key`.

    Raises:
        StorageError: the listing returned a path outside the directory.
    """
    return [(p, s, m, id_key(root, p, s))
            for p, s, m in list_range(spec, root, directory, start_after, end_before)]


def decide_rows(
    rules: GcRules, rows: Iterable[tuple[str, int, int, str | None, str | None]]
) -> Iterator[tuple[str, str, str, str, int, int, str | None]]:
    """Decide joined rows ``(path, size, mtime, id, ref)`` into decision rows ``(path, kind,
    action, reason, size, mtime, id)``."""
    for path, size, mtime, key, ref in rows:
        d = decide(rules, path, size, mtime, ref)
        yield (d.path, d.kind.value, d.action.value, d.reason, d.size, d.last_modified_ms, key)
