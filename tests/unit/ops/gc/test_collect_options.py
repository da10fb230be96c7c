"""Per-directory GC options end to end (collect_garbage, gc_options; docs/rfcs/0013-gc-options.md):
the settings' mapping and precedence, a directory's dry run, min_age and enable, and GC on a
store without conditional overwrites (no ETags, no If-Match) with boundary files off."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace

import pytest

from slatelib.config import GcDirectorySettings, GcScheduleSettings, GcSettings, Settings
from slatelib.core.gc_rules import DirOptions, ObjectKind
from slatelib.errors import InvalidArgumentError, StorageError
from slatelib.objstore import ObjectMeta, ObjectStore, open_store
from slatelib.ops.gc import collect_garbage, gc_options
from tests.unit.gc_support import HOUR
from tests.unit.ops.gc.test_collect import ROOT, Basic

K = ObjectKind


@pytest.fixture
def store() -> ObjectStore:
    return open_store(f"memory://gcopt{uuid.uuid4().hex[:12]}/")


class NoIfMatchStore:
    """A store that reports no ETags and cannot overwrite conditionally (put-if-absent
    still works): an S3-compatible server or proxy without If-Match."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.if_match_calls = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def get_with_meta(self, path: str) -> tuple[bytes, ObjectMeta]:
        data, meta = self.inner.get_with_meta(path)
        return data, replace(meta, e_tag=None)

    def head(self, path: str) -> ObjectMeta:
        return replace(self.inner.head(path), e_tag=None)

    def list(self, prefix: str, *, start_after: str | None = None,
             end_before: str | None = None) -> Iterator[ObjectMeta]:
        for m in self.inner.list(prefix, start_after=start_after, end_before=end_before):
            yield replace(m, e_tag=None)

    def put_if_match(self, path: str, data: bytes, e_tag: str | None) -> str | None:
        self.if_match_calls += 1
        if e_tag is not None:
            raise StorageError(f"{path}: conditional overwrite (If-Match) is not supported")
        self.inner.put_if_absent(path, data)
        return None


def settings(**gc: object) -> Settings:
    return Settings(gc=GcSettings(**gc))  # type: ignore[arg-type]


# ----------------------------------------------------------------------- the mapping
def test_settings_map_to_each_directorys_options() -> None:
    s = settings(min_age=600, dry_run=False, boundary_files_enabled=False,
                 wal_options=GcDirectorySettings(min_age=3600, interval=60),
                 wal_fence_options=GcDirectorySettings(min_age=86400, dry_run=False),
                 compactions_options=GcDirectorySettings(enabled=False),
                 detach_options=GcScheduleSettings(enabled=False))
    o = gc_options(s)
    assert (o.min_age_s, o.dry_run, o.boundary_files_enabled, o.detach_enabled) == (
        600, False, False, False)
    p = o.policies()
    assert (p[K.WAL].min_age_s, p[K.WAL].interval_s, p[K.WAL].dry_run) == (3600, 60, False)
    assert (p[K.WAL_FENCE].min_age_s, p[K.WAL_FENCE].dry_run) == (86400, False)
    assert (p[K.MANIFEST].min_age_s, p[K.COMPACTIONS].enabled) == (600, False)


def test_a_setting_for_one_directory_wins_over_a_default_for_all() -> None:
    s = settings(min_age=600, wal_options=GcDirectorySettings(min_age=3600, dry_run=True))
    o = gc_options(s, min_age="20min", dry_run=False)
    assert o.directory(K.WAL).min_age_s == 3600 and o.directory(K.WAL).dry_run is True
    assert o.directory(K.MANIFEST).min_age_s == 1200 and o.directory(K.MANIFEST).dry_run is False
    assert gc_options(s).directory(K.MANIFEST).dry_run is False  # run_gc's dry_run decides
    flags = gc_options(s, dry_run=None, min_ages={"wal": "2h", "compacted": None},
                       dry_runs={"wal": False, "wal-fence": False}, boundary_files=False)
    assert flags.directory(K.WAL).min_age_s == 7200 and flags.directory(K.WAL).dry_run is False
    assert flags.directory(K.WAL_FENCE).dry_run is False
    assert flags.directory(K.COMPACTED).min_age_s == 600 and not flags.boundary_files_enabled
    assert flags.directory(K.MANIFEST).dry_run is True  # [gc] dry_run, true by default


def test_bad_per_directory_values_name_the_directory() -> None:
    with pytest.raises(InvalidArgumentError, match="wal_options min_age: cannot parse"):
        gc_options(Settings(), min_ages={"wal": "soon"})
    with pytest.raises(InvalidArgumentError, match="no directory 'wals'"):
        gc_options(Settings(), dry_runs={"wals": True})


# -------------------------------------------------------------------------- the runs
def test_a_dry_directory_keeps_its_garbage_while_the_others_are_collected(
    store: ObjectStore,
) -> None:
    db = Basic(store)
    o = gc_options(settings(wal_options=GcDirectorySettings(dry_run=True)), min_age=300,
                   dry_run=False)
    report = collect_garbage(ROOT, store, dry_run=False, now=db.later_s, options=o)
    p = db.w.paths
    wal_garbage = {p.wal(i) for i in (1, 2, 4, 5, 6, 7)}
    assert wal_garbage <= db.w.listing()
    assert db.w.listing() - wal_garbage == db.survivors() | {p.manifest_boundary,
                                                             p.compactions_boundary}
    assert report.kinds["wal"].deleted == 0 and report.kinds["wal"].to_delete == 0
    assert report.kinds["manifest"].deleted == 4 and not report.dry_run
    wal = [d for d in report.decisions if d.path == p.wal(1)][0]
    assert wal.reason.startswith("kept: GC of wal/ is a dry run (wal_options dry_run)")
    j = report.to_json()
    assert j["directories"]["wal"]["dry_run"] is True
    assert j["directories"]["manifest"] == {"enabled": True, "min_age_s": 300, "dry_run": False,
                                            "interval_s": None}


def test_only_one_directory_deleting_under_a_dry_default(store: ObjectStore) -> None:
    db = Basic(store)
    s = settings(dry_run=True, compacted_options=GcDirectorySettings(dry_run=False))
    report = collect_garbage(ROOT, store, dry_run=None, now=db.later_s, settings=s, min_age=300)
    p = db.w.paths
    gone = {p.compacted(db.g1), p.compacted(db.g2)}
    assert report.dry_run is False and gone.isdisjoint(db.w.listing())
    assert {p.manifest(1), p.wal(1), p.compactions(1)} <= db.w.listing()
    assert p.manifest_boundary not in db.w.listing()  # a dry directory writes nothing
    assert {k: t.deleted for k, t in report.kinds.items() if t.deleted} == {"compacted": 2}


def test_a_dry_default_with_no_directory_of_its_own_writes_nothing(store: ObjectStore) -> None:
    db = Basic(store)
    before = db.w.listing()
    report = collect_garbage(ROOT, store, dry_run=None, now=db.later_s, settings=settings(),
                             min_age=300)
    assert report.dry_run is True and db.w.listing() == before
    assert report.kinds["wal"].to_delete == 6  # a dry run says what a real run would delete


def test_disabled_directories_are_left_alone(store: ObjectStore) -> None:
    db = Basic(store)
    s = settings(manifest_options=GcDirectorySettings(enabled=False),
                 compacted_options=GcDirectorySettings(enabled=False))
    report = collect_garbage(ROOT, store, dry_run=False, now=db.later_s, settings=s, min_age=300)
    p = db.w.paths
    assert {p.manifest(i) for i in range(1, 6)} | {p.compacted(db.g1)} <= db.w.listing()
    assert p.manifest_boundary not in db.w.listing()
    assert report.kinds["wal"].deleted == 6 and report.kinds["compactions"].deleted == 2


def test_each_directory_is_aged_by_its_own_min_age(store: ObjectStore) -> None:
    db = Basic(store)  # every object is written about now; GC runs an hour later
    s = settings(min_age=300, wal_options=GcDirectorySettings(min_age=2 * HOUR / 1000))
    report = collect_garbage(ROOT, store, dry_run=False, now=db.later_s, settings=s)
    assert report.kinds["wal"].deleted == 0 and report.kinds["manifest"].deleted == 4


# ------------------------------------------------------- stores without If-Match
def test_without_if_match_gc_collects_everything_with_boundary_files_off(
    store: ObjectStore,
) -> None:
    db = Basic(store)
    p = db.w.paths
    store.put(p.manifest_boundary, b"1")  # an earlier GC on a store that had If-Match
    plain = NoIfMatchStore(store)
    s = settings(boundary_files_enabled=False)
    report = collect_garbage(ROOT, plain, dry_run=False, now=db.later_s, settings=s,  # type: ignore[arg-type]
                             min_age=300)
    assert report.errors == [] and report.boundary_files_enabled is False
    assert db.w.listing() == db.survivors() | {p.manifest_boundary}
    assert store.get(p.manifest_boundary) == b"1" and plain.if_match_calls == 0
    assert report.boundaries["manifest"] == {"before": 1, "target": 1}


def test_without_if_match_boundary_files_on_fail_that_kind_clearly_and_keep_it(
    store: ObjectStore,
) -> None:
    db = Basic(store)
    p = db.w.paths
    store.put(p.manifest_boundary, b"1")
    report = collect_garbage(ROOT, NoIfMatchStore(store), dry_run=False, now=db.later_s,  # type: ignore[arg-type]
                             settings=settings(), min_age=300)
    assert {p.manifest(i) for i in range(2, 5)} <= db.w.listing()  # nothing of manifest/
    assert report.kinds["manifest"].deleted == 0 and report.kinds["wal"].deleted == 6
    assert len(report.errors) == 1
    assert "reports no ETag" in report.errors[0]
    assert "boundary_files_enabled = false" in report.errors[0]
    assert "nothing of this kind was deleted" in report.errors[0]


def test_a_store_refusing_if_match_despite_etags_gets_the_same_advice(store: ObjectStore) -> None:
    db = Basic(store)
    store.put(db.w.paths.manifest_boundary, b"1")

    class Refusing(NoIfMatchStore):
        def get_with_meta(self, path: str) -> tuple[bytes, ObjectMeta]:
            return self.inner.get_with_meta(path)

    report = collect_garbage(ROOT, Refusing(store), dry_run=False, now=db.later_s,  # type: ignore[arg-type]
                             settings=settings(), min_age=300)
    assert "cannot overwrite the boundary conditionally" in report.errors[0]
    assert "--no-boundary-files" in report.errors[0]


def test_direct_options_replace_settings(store: ObjectStore) -> None:
    db = Basic(store)
    o = replace(gc_options(Settings(), min_age=300, dry_run=False),
                directories=((K.WAL, DirOptions(enabled=False)),))
    report = collect_garbage(ROOT, store, dry_run=False, now=db.later_s, options=o,
                             min_age=99999)
    assert report.kinds["wal"].deleted == 0 and report.kinds["manifest"].deleted == 4


def test_a_due_destroy_waits_for_a_run_in_which_every_directory_deletes(
    store: ObjectStore,
) -> None:
    from tests.unit.ops.gc.test_clone import CLONE, soft_destroyed_clone

    fam, kept = soft_destroyed_clone(store)
    before = fam.clone.listing()
    s = settings(db_delete_grace=0, compacted_options=GcDirectorySettings(dry_run=True))
    report = collect_garbage(CLONE, store, dry_run=False, now=fam.later_s, settings=s)
    assert fam.clone.listing() == before and report.dry_run is True
    assert report.refused == [
        "destroy: the database is due for deletion, but GC of compacted is a dry run or "
        "disabled in this run; it is deleted only by a run in which every directory deletes"]
    assert report.destroy is not None and report.destroy["parents"][0]["status"] == \
        "would release"
    done = collect_garbage(CLONE, store, dry_run=False, now=fam.later_s,
                           settings=settings(db_delete_grace=0))  # the fence's default aside
    assert done.destroy is not None and done.destroy["completed"] is True
    assert fam.clone.listing() == kept
