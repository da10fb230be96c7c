"""One-shot compaction of databases with segments (SlateDB RFC-0024): one compaction per
segment in one run (one fence, one compactions-file version listing them, one runner call,
one manifest CAS), each into its own segment. Databases are built with
``tests.compaction_fixtures.flush_segmented`` (a 0.17 flush with a ``fixed4`` extractor);
the rules are checked against official databases in
``tests/interop/test_compact_segments_interop.py``."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import pytest

from slatelib import DbReader
from slatelib.config import CompactionSettings, Settings, SstSettings
from slatelib.core.compactions import CompactionStatus
from slatelib.core.manifest import Manifest
from slatelib.core.row import TOMBSTONE, VALUE, Row
from slatelib.errors import InvalidArgumentError
from slatelib.ids import ulid_to_str
from slatelib.objstore import ObjectStore, open_store
from slatelib.ops.compaction import CompactionTask, ThreadTaskRunner, run_compaction
from slatelib.ops.engine import TaskOutcome
from slatelib.store.compactions_store import CompactionsStore
from slatelib.store.manifest_store import ManifestStore
from tests.compaction_fixtures import NOW_MS, flush_segmented, new_db

ROOT = "db"


@pytest.fixture
def store() -> ObjectStore:
    return open_store(f"memory://{uuid.uuid4().hex}/")


def settings(policy: str = "l0", **compaction: object) -> Settings:
    base: dict[str, object] = {"policy": policy, "min_range_bytes": 1}
    base.update(compaction)
    return Settings(sst=SstSettings(block_size=256, min_filter_keys=4),
                    compaction=CompactionSettings(**base))  # type: ignore[arg-type]


def rows(prefix: bytes, seq: int, n: int = 40, kind: int = VALUE) -> list[Row]:
    return [(prefix + b"%03d" % i, seq, kind, b"" if kind == TOMBSTONE else b"v%d" % seq,
             None, NOW_MS) for i in range(n)]


def fill(store: ObjectStore) -> dict[bytes, bytes]:
    """aaa: 3 L0s, bbb: 2 L0s, ccc: one L0 of puts and one of their tombstones."""
    new_db(store, ROOT)
    flush_segmented(store, ROOT, rows(b"aaa:", 1) + rows(b"bbb:", 1) + rows(b"ccc:", 1, 5))
    flush_segmented(store, ROOT, rows(b"aaa:", 2, 20) + rows(b"ccc:", 2, 5, TOMBSTONE))
    flush_segmented(store, ROOT, rows(b"aaa:", 3, 10) + rows(b"bbb:", 3, 30))
    return scan(store)


def scan(store: ObjectStore) -> dict[bytes, bytes]:
    with DbReader.open(ROOT, store, mode="latest") as r:
        return dict(r.scan())


def manifest(store: ObjectStore) -> Manifest:
    return ManifestStore(store, ROOT).read_latest().value


def shape(m: Manifest) -> list[tuple[bytes, int, list[tuple[int, bool]]]]:
    """Per segment: its prefix, L0 count and runs as ``(id, whether it has SSTs)``."""
    return [(s.prefix, len(s.l0), [(r.id, bool(r.views)) for r in s.compacted])
            for s in m.segments or ()]


class Counting:
    """A thread runner that records how many times it was called and with which tasks."""

    def __init__(self) -> None:
        self.inner = ThreadTaskRunner(2)
        self.calls: list[list[CompactionTask]] = []

    def __call__(self, tasks: Sequence[CompactionTask]) -> list[TaskOutcome]:
        self.calls.append(list(tasks))
        return self.inner(tasks)


def test_l0_policy_compacts_every_segment_in_one_run_and_one_commit(store: ObjectStore) -> None:
    before = fill(store)
    m0 = manifest(store)
    first = ManifestStore(store, ROOT).read_latest().id
    runner = Counting()
    report = run_compaction(ROOT, store, settings=settings("l0"), runner=runner)
    m = manifest(store)
    assert shape(m) == [(b"aaa:", 0, [(0, True)]), (b"bbb:", 0, [(1, True)]), (b"ccc:", 0, [(2, False)])]
    for old, new in zip(m0.segments or (), m.segments or (), strict=True):
        assert new.last_compacted_l0_sst_view_id == old.l0[0].id  # the newest source
    assert m.l0 == () and m.compacted == () and m.last_compacted_l0_sst_view_id is None
    assert scan(store) == before
    # one runner call for every segment's tasks, numbered across them
    assert len(runner.calls) == 1
    assert sorted(t.index for t in runner.calls[0]) == list(range(len(runner.calls[0])))
    d = report.to_dict()
    assert d["status"] == "committed" and d["compaction_id"] is None
    assert d["destination"] is None and len(d["sources"]) == 7
    assert [(c["segment"], c["destination"], c["outputs"]["count"] > 0)
            for c in d["compactions"]] == [("aaa:", 0, True), ("bbb:", 1, True),
                                           ("ccc:", 2, False)]
    # the compactions file lists each with its segment, Completed
    latest = CompactionsStore(store, ROOT).read_latest().value
    done = {ulid_to_str(c.id): c for c in latest.recent_compactions}
    for c in d["compactions"]:
        entry = done.get(c["compaction_id"])
        if entry is not None:  # 0.17's trimming keeps the last finished one
            assert entry.status == CompactionStatus.COMPLETED
            assert entry.spec.segment == c["segment"].encode()
    # one manifest version made the change (fence, then the commit)
    ms = ManifestStore(store, ROOT)
    changed = [i for i in ms.list_ids() if i > first
               and shape(ms.read(i).value) != shape(ms.read(i - 1).value)]
    assert len(changed) == 1


def test_full_policy_after_l0_merges_each_segments_runs_and_drops_bottom_tombstones(
        store: ObjectStore) -> None:
    before = fill(store)
    run_compaction(ROOT, store, settings=settings("l0"))
    flush_segmented(store, ROOT, rows(b"bbb:", 4, 10))
    report = run_compaction(ROOT, store, settings=settings("full"))
    # ccc: holds only an empty run: a full compaction would not change it
    assert [c["segment"] for c in report.to_dict()["compactions"]] == ["aaa:", "bbb:"]
    assert shape(manifest(store)) == [(b"aaa:", 0, [(0, True)]), (b"bbb:", 0, [(1, True)]),
                                      (b"ccc:", 0, [(2, False)])]
    before.update({k: b"v4" for k, *_ in rows(b"bbb:", 4, 10)})
    assert scan(store) == before


def test_size_tiered_compacts_only_segments_over_the_threshold(store: ObjectStore) -> None:
    fill(store)
    report = run_compaction(ROOT, store, settings=settings(
        "size-tiered", min_compaction_sources=3))
    assert [c["segment"] for c in report.to_dict()["compactions"]] == ["aaa:"]
    assert report.compaction_id is not None and report.destination == 0
    assert shape(manifest(store)) == [(b"aaa:", 0, [(0, True)]), (b"bbb:", 2, []),
                                      (b"ccc:", 2, [])]


def test_explicit_sources_of_two_segments_are_refused_before_any_write(
        store: ObjectStore) -> None:
    fill(store)
    m = manifest(store)
    a, b = (m.segments or ())[:2]
    ids = ManifestStore(store, ROOT).list_ids()
    with pytest.raises(InvalidArgumentError, match="one tree"):
        run_compaction(ROOT, store, settings=settings(), sources=[
            f"l0:{ulid_to_str(a.l0[-1].id)}", f"l0:{ulid_to_str(b.l0[-1].id)}"])
    assert ManifestStore(store, ROOT).list_ids() == ids
    report = run_compaction(ROOT, store, settings=settings(), sources=[
        f"l0:{ulid_to_str(b.l0[-1].id)}"])
    assert report.to_dict()["compactions"][0]["segment"] == "bbb:"
    assert shape(manifest(store))[1] == (b"bbb:", 1, [(0, True)])


def test_dry_run_lists_each_segments_compaction_and_writes_nothing(store: ObjectStore) -> None:
    fill(store)
    ids = ManifestStore(store, ROOT).list_ids()
    d = run_compaction(ROOT, store, settings=settings("l0"), dry_run=True).to_dict()
    assert d["status"] == "dry_run"
    assert [(c["segment"], c["destination"]) for c in d["compactions"]] == \
        [("aaa:", 0), ("bbb:", 1), ("ccc:", 2)]
    assert ManifestStore(store, ROOT).list_ids() == ids
