"""Where GC lists, decides and deletes: in this process, or on Spark executors.

The orchestrator (:func:`slatelib.ops.gc.run_gc`) reads the manifests and builds the rules;
a :class:`GcBackend` lists each directory, joins the listing with the SST references,
decides every object, and later re-checks the delete candidates against rules built from a
fresh read and deletes the survivors. :class:`LocalBackend` does all of it in this process;
``jobs/gc.py`` provides the Spark one (distributed listing, DataFrame joins, parallel
deletes).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from slatelib.core.gc_rules import GcDecision, GcRules, ObjectKind, classify, decide
from slatelib.ids import Ulid
from slatelib.objstore import ObjectStore
from slatelib.ops.gc.exec import (
    DELETE_BATCH,
    DeleteTally,
    Row,
    delete_objects,
    revalidate,
    with_refs,
)
from slatelib.ops.gc.state import list_directory
from slatelib.ops.progress import start
from slatelib.paths import DbPaths, join

Tally = dict[tuple[str, str], tuple[int, int]]
"""``(kind, action) -> (objects, bytes)``."""


class DecisionSet(Protocol):
    """The decisions for one listed directory."""

    def tally(self) -> Tally:
        """Objects and bytes per kind and action."""
        ...

    def max_delete_id(self) -> int | None:
        """The highest manifest/compactions id to delete (for the boundary), or None."""
        ...

    def __iter__(self) -> Iterator[GcDecision]:
        """Every decision, in path order."""
        ...


class GcBackend(Protocol):
    def list_dir(self, store: ObjectStore, root: str, directory: str, hi_hint: int) -> Any:
        """List ``<root>/<directory>/`` (``hi_hint``: the highest id/time expected, to split
        the key space).

        Raises:
            StorageError: the store returned a path outside the directory.
        """
        ...

    def unlisted(self, listing: Any, ids: set[Ulid]) -> list[Ulid]:
        """Which of the SST ``ids`` the compacted listing does not hold (sorted)."""
        ...

    def describe(self, listing: Any) -> dict[str, int]:
        """How the listing was made: ``objects``, ``ranges`` listed, ``nonempty_ranges``
        and ``largest_range`` (objects in the largest one)."""
        ...

    def release(self) -> None:
        """Free what the last database's run kept (cached listings and decisions)."""
        ...

    def decide(self, listing: Any, rules: GcRules, refs: Mapping[Ulid, str]) -> DecisionSet:
        """Decide every listed object."""
        ...

    def execute(
        self, store: ObjectStore, decisions: DecisionSet, rules: GcRules,
        refs: Mapping[Ulid, str], skip: frozenset[str] = frozenset(),
    ) -> DeleteTally:
        """Re-decide the delete candidates with ``rules``/``refs`` from a fresh read and
        delete those that still go (never the paths in ``skip``)."""
        ...


@dataclass(frozen=True)
class LocalListing:
    """A directory listed in this process."""

    root: str
    rows: list[Row]


class LocalDecisions:
    """Decisions held in memory (:class:`LocalBackend`)."""

    def __init__(self, root: str, decisions: Sequence[GcDecision]) -> None:
        self.root = root
        self.items = list(decisions)

    def tally(self) -> Tally:
        out: dict[tuple[str, str], tuple[int, int]] = {}
        for d in self.items:
            n, b = out.get((d.kind.value, d.action.value), (0, 0))
            out[(d.kind.value, d.action.value)] = (n + 1, b + d.size)
        return out

    def max_delete_id(self) -> int | None:
        ids = [classify(self.root, d.path, d.size).id for d in self.items if d.deletes]
        return max((i for i in ids if i is not None), default=None)

    def __iter__(self) -> Iterator[GcDecision]:
        return iter(self.items)


class LocalBackend:
    """Everything in this process: for one small database (``slate gc``, tests)."""

    def __init__(self, *, concurrency: int = 8, batch_size: int = DELETE_BATCH) -> None:
        self.concurrency = concurrency
        self.batch_size = batch_size

    def list_dir(self, store: ObjectStore, root: str, directory: str, hi_hint: int) -> LocalListing:
        rows = []
        with start(f"gc list {join(root, directory)}") as progress:
            for m in list_directory(store, root, directory):
                rows.append((m.path, m.size, m.last_modified_ms))
                progress.update(len(rows))
        return LocalListing(root, rows)

    def unlisted(self, listing: Any, ids: set[Ulid]) -> list[Ulid]:
        assert isinstance(listing, LocalListing)
        paths = DbPaths.of(listing.root)
        present = {path for path, _, _ in listing.rows}
        return sorted(i for i in ids if paths.compacted(i) not in present)

    def describe(self, listing: Any) -> dict[str, int]:
        assert isinstance(listing, LocalListing)
        n = len(listing.rows)
        return {"objects": n, "ranges": 1, "nonempty_ranges": int(n > 0), "largest_range": n}

    def release(self) -> None:
        return None

    def decide(self, listing: Any, rules: GcRules, refs: Mapping[Ulid, str]) -> LocalDecisions:
        assert isinstance(listing, LocalListing)
        out = []
        for path, size, mtime in listing.rows:
            c = classify(rules.root, path, size)
            ref = refs.get(Ulid(c.id)) if c.kind is ObjectKind.COMPACTED and c.id else None
            out.append(decide(rules, path, size, mtime, ref))
        return LocalDecisions(rules.root, out)

    def execute(
        self, store: ObjectStore, decisions: DecisionSet, rules: GcRules,
        refs: Mapping[Ulid, str], skip: frozenset[str] = frozenset(),
    ) -> DeleteTally:
        rows = [(d.path, d.size, d.last_modified_ms) for d in decisions if d.deletes]
        survivors, kept = revalidate(rules, with_refs(rules.root, rows, refs), skip)
        with start(f"gc delete {_kinds_of(rules.root, survivors)}",
                   total=len(survivors)) as progress:
            tally = delete_objects(store, rules.root, survivors, concurrency=self.concurrency,
                                   batch_size=self.batch_size, on_batch=progress.add)
        tally.revalidated_kept = kept
        return tally


def _kinds_of(root: str, items: Sequence[tuple[str, ObjectKind, int]]) -> str:
    """``<root> wal`` / ``<root> compacted``: what a delete pass works on (progress label)."""
    kinds = sorted({kind.value for _, kind, _ in items})
    return " ".join([root or "/", *kinds])
