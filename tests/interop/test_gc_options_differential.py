"""Per-directory GC options: an official ``GarbageCollectorOptions`` carried over to our
conf, our GC and official ``Admin.run_gc_once`` (0.17.0) delete the same objects
(docs/rfcs/0013-gc-options.md).

Each case builds the official options with non-default values per directory, writes the
``[gc]`` conf that docs/guides/gc.md's mapping says carries them over
(:func:`carried_over`), and loads it with ``load_settings``: so the mapping itself is under test. One copy of an
official database family (tests/interop/test_gc_differential.py's :class:`Family`: clones,
checkpoints, WAL fences) is collected by 0.17, the other by ``collect_garbage`` with those
settings, and the two trees must be identical, file names and bytes.

On S3 as well (boundary files on, advanced by both). Expected difference, none here: 0.17 advances ``gc/<kind>.boundary`` even in a directory's
dry run and slatelib writes nothing for a dry directory; the cases keep the dry
directories free of that difference (a dry manifest directory only with boundary files
off, compactions disabled where boundaries are on).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from slatedb.uniffi import (
    AdminBuilder,
    GarbageCollectorDirectoryOptions,
    GarbageCollectorOptions,
    GarbageCollectorScheduleOptions,
)

from slatelib.config import load_settings
from slatelib.objstore import open_store
from slatelib.ops.gc import collect_garbage
from slatelib.ops.gc.report import GcReport
from tests.interop.official import as_store, run, s3_store
from tests.interop.test_gc_differential import (
    HOUR_S,
    Family,
    age_all_files,
    assert_same_trees,
    contents,
    mirror,
    twins,
)
from tests.s3_server import create_bucket

pytestmark = pytest.mark.interop

DIRS = ("manifest", "wal", "wal_fence", "compacted", "compactions")


def d(min_age_s: float, dry_run: bool, interval_s: float | None = None
      ) -> GarbageCollectorDirectoryOptions:
    return GarbageCollectorDirectoryOptions(
        interval_ms=None if interval_s is None else int(interval_s * 1000),
        min_age_ms=int(min_age_s * 1000), dry_run=dry_run)


def carried_over(o: GarbageCollectorOptions, table: str = "gc") -> str:
    """Our conf for official options, as docs/guides/gc.md's mapping table says: every
    ``<dir>_options`` becomes ``[gc.<dir>_options]`` (None: ``enabled = false``),
    ``disable_boundary_files`` becomes ``boundary_files_enabled`` negated, and ``[gc]
    dry_run = false`` (0.17 has no switch for the whole run). ``table`` may also be 0.17's
    own ``garbage_collector_options``, which our conf reads as ``[gc]``."""
    lines = ["[gc]", "dry_run = false"] + ([] if table == "gc" else [f"[{table}]"])
    lines.append(f"boundary_files_enabled = {str(not o.disable_boundary_files).lower()}")
    for name in DIRS:
        given = getattr(o, f"{name}_options")
        lines.append(f"[{table}.{name}_options]")
        if given is None:
            lines.append("enabled = false")
            continue
        lines += [f'min_age = "{given.min_age_ms}ms"', f"dry_run = {str(given.dry_run).lower()}"]
        if given.interval_ms is not None:
            lines.append(f'interval = "{given.interval_ms}ms"')
    lines.append(f"[{table}.detach_options]")
    lines.append("enabled = true" if o.detach_options is not None else "enabled = false")
    return "\n".join(lines) + "\n"


def collect_both(fam: Family, official: Path, ours: Path, opts: GarbageCollectorOptions,
                 conf: Path, table: str = "gc") -> dict[str, GcReport]:
    conf.write_text(carried_over(opts, table))
    settings = load_settings(conf, env={})
    reports = {}
    for name in fam.dbs:
        run(AdminBuilder(name, as_store(official)).build().run_gc_once(opts))
        reports[name] = collect_garbage(name, open_store(f"file://{ours}"), dry_run=None,
                                        settings=settings, force=True)
    return reports


def deleted(report: GcReport) -> dict[str, int]:
    return {k: t.deleted for k, t in sorted(report.kinds.items()) if t.deleted}


def test_per_directory_min_ages_and_a_deleting_fence_gc_are_carried_over(tmp_path: Path) -> None:
    fam = Family(tmp_path / "src_root")
    age_all_files(fam.root, 2 * HOUR_S)  # objects 2 h old; SST ULIDs are young
    official, ours = twins(fam.root, tmp_path)
    opts = GarbageCollectorOptions(
        manifest_options=d(3 * HOUR_S, False),          # older than every manifest: all kept
        wal_options=d(HOUR_S, False, interval_s=60),
        wal_fence_options=d(HOUR_S, False),            # 0.17's default is a dry run
        compacted_options=d(0, False),
        compactions_options=None,
        detach_options=None,
        disable_boundary_files=False,
    )
    reports = collect_both(fam, official, ours, opts, tmp_path / "gc.toml",
                           table="garbage_collector_options")
    assert_same_trees(official, ours, reports)
    src = reports["src"]
    assert deleted(src).keys() == {"compacted", "wal", "wal_fence"}, deleted(src)
    assert src.kinds["manifest"].kept == src.kinds["manifest"].listed > 1
    assert src.kinds["compactions"].kept == src.kinds["compactions"].listed > 1
    assert src.directories["wal"] == {"enabled": True, "min_age_s": 3600.0, "dry_run": False,
                                      "interval_s": 60.0}
    assert reports["detach"].detached == [] and not (ours / "src" / "gc").exists()
    fam.check_reads(ours)


def test_dry_directories_and_no_boundary_files_are_carried_over(tmp_path: Path) -> None:
    fam = Family(tmp_path / "src_root")
    official, ours = twins(fam.root, tmp_path)
    opts = GarbageCollectorOptions(
        manifest_options=d(0, True),
        wal_options=d(0, False),
        wal_fence_options=None,
        compacted_options=d(0, True),
        compactions_options=d(0, False),
        detach_options=GarbageCollectorScheduleOptions(interval_ms=None),
        disable_boundary_files=True,
    )
    reports = collect_both(fam, official, ours, opts, tmp_path / "gc.toml")
    assert_same_trees(official, ours, reports)
    src = reports["src"]
    assert deleted(src).keys() == {"compactions", "wal"}, deleted(src)
    assert src.kinds["manifest"].to_delete == 0 and src.kinds["compacted"].to_delete == 0
    dry = [x for x in src.decisions if x.kind.value == "manifest"
           and x.reason.startswith("kept: GC of manifest/ is a dry run")]
    assert dry, "the dry manifest directory would have deleted something"
    assert fam.expired.id in src.expired_checkpoints  # a run that deletes expires them
    assert reports["detach"].detached[0]["status"] == "detached"
    assert not any((root / db / "gc").exists() for root in (official, ours) for db in fam.dbs)
    fam.check_reads(ours)


@pytest.mark.integration
def test_on_s3_per_directory_options_with_boundary_files_collect_alike(
    moto_endpoint: str, tmp_path: Path,
) -> None:
    a, b = create_bucket(moto_endpoint), create_bucket(moto_endpoint)
    official_a = s3_store(a.name, endpoint=moto_endpoint)
    fam = Family(official_a, a.open())
    ours_a, ours_b = a.open(), b.open()
    mirror(ours_a, ours_b)
    opts = GarbageCollectorOptions(
        manifest_options=d(0, False),
        wal_options=d(0, True),                 # a dry directory without a boundary file
        wal_fence_options=d(0, False),
        compacted_options=d(HOUR_S, False),     # every SST's ULID is younger: all kept
        compactions_options=d(0, False),
        detach_options=GarbageCollectorScheduleOptions(interval_ms=None),
        disable_boundary_files=False,
    )
    conf = tmp_path / "gc.toml"
    conf.write_text(carried_over(opts))
    settings = load_settings(conf, env={})
    reports = {}
    for name in fam.dbs:
        run(AdminBuilder(name, official_a).build().run_gc_once(opts))
        reports[name] = collect_garbage(name, ours_b, dry_run=None, settings=settings,
                                        force=True)
    assert contents(ours_a) == contents(ours_b)
    src = reports["src"]
    assert deleted(src).keys() == {"compactions", "manifest", "wal_fence"}, deleted(src)
    assert src.kinds["wal"].deleted == 0 and src.kinds["compacted"].deleted == 0
    assert ours_b.get("src/gc/manifest.boundary") == ours_a.get("src/gc/manifest.boundary")
    fam.check_reads(s3_store(b.name, endpoint=moto_endpoint))
