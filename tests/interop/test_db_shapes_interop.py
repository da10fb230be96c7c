"""Every 0.17 option that changes what is on storage or how it is read, each on its own
database written by the official package: read, compacted, collected, exported and
rescaled by slatelib, and compared with the official reader at every step
(docs/db-options.md says what each option does and how slatelib handles it).

The steps, the same for every shape:

1. read: ``DbReader`` and ``slate scan``/``get`` equal the official ``DbReader`` (scan and
   point gets of present and absent keys);
2. compact: ``jobs/compact.py --policy full`` on the session's ``local[2]`` Spark; the
   official reader then reads what it reads after the official compactor compacted a twin
   the same way (expired rows become tombstones in both);
3. collect: the official ``run_gc_once`` on one twin and our GC on the other leave the
   same objects, and the database still reads the same;
4. export: ``jobs/export.py`` to Parquet equals the official scan;
5. rescale: a split into two databases, read by the official reader, equals the source as
   the official writer and compactor leave it after a memtable flush and a full
   compaction (the split moves the WAL tail into an L0, which applies expiry too).

Shapes whose options the tools need are given them (the merge operator, the prefix
extractor); without them every tool refuses, naming the option.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from slatelib import DbReader
from slatelib.config import CompactionSettings, Settings, SstSettings
from slatelib.core.manifest import Manifest
from slatelib.errors import InvalidArgumentError, UnsupportedFeatureError
from slatelib.jobs.compact import build_parser as compact_parser
from slatelib.jobs.compact import run as compact_job
from slatelib.jobs.export import build_parser as export_parser
from slatelib.jobs.export import run as export_job
from slatelib.objstore import open_store
from slatelib.ops.rescale import split_database
from slatelib.store.manifest_store import ManifestStore
from tests.interop.official import (
    FAR_FUTURE_MS,
    LONG_AGO_MS,
    Concat,
    DbSettings,
    Delete,
    FixedPrefix,
    Merge,
    OfficialAdmin,
    OfficialDb,
    OfficialReader,
    Put,
    bloom_policy,
    local_store,
    run,
)
from tests.interop.test_gc_differential import assert_same_trees, official_gc, our_gc

pytestmark = [pytest.mark.interop, pytest.mark.spark]

REPO = Path(__file__).resolve().parents[2]
DB = "db"
HOUR_S = 3600


@dataclass(frozen=True)
class Shape:
    """One database shape: how the official package writes it, and what every reader and
    tool of either side must be given to read it."""

    write: Callable[[Path], None]
    settings: DbSettings = field(default_factory=DbSettings)
    """The official writer's settings (also for the twins the official compactor compacts)."""
    official: Callable[[], dict[str, Any]] = dict
    """Fresh keyword arguments of the official reader and writer (merge operator, filters)."""
    merge_operator: str | None = None
    sst: SstSettings = field(default_factory=SstSettings)
    reader: dict[str, Any] = field(default_factory=dict)
    """Extra ``DbReader``/``OfficialReader`` options (``skip_wal_replay``)."""

    def slate_settings(self) -> Settings:
        return Settings(sst=self.sst, compaction=CompactionSettings(
            merge_operator=self.merge_operator, min_range_bytes=1, max_sst_size=8 * 1024))


# ------------------------------------------------------------------------- the shapes
def _puts(prefix: bytes, n: int, value: bytes = b"v", **kw: Any) -> list[Put]:
    return [Put(prefix + b"%04d" % i, value + b"%d" % i, **kw) for i in range(n)]


def _write_wal_disabled(root: Path) -> None:
    with OfficialDb.open(root, DB, SHAPES["wal_disabled"].settings) as db:
        for n in range(3):
            db.write(_puts(b"k%d:" % n, 60) + [Delete(b"k0:%04d" % n)])
            db.flush_memtable()
        OfficialAdmin(root, DB).compact(l0=2)
        db.write(_puts(b"late:", 20))
        db.close(flush="memtable")  # no WAL: unflushed writes exist only in memory


def _write_merges(root: Path) -> None:
    with OfficialDb.open(root, DB, SHAPES["merge_operator"].settings,
                         merge_operator=Concat()) as db:
        db.write(_puts(b"m", 80, b"base"))
        db.flush_memtable()
        OfficialAdmin(root, DB).compact()
        db.write([Merge(b"m%04d" % i, b"+l0") for i in range(0, 80, 3)]
                 + [Merge(b"only%02d" % i, b"o") for i in range(10)] + [Delete(b"m0001")])
        db.flush_memtable()
        db.write([Merge(b"m%04d" % i, b"+wal") for i in range(0, 80, 5)]
                 + [Merge(b"m0001", b"after-delete"), Merge(b"only00", b"+w")])
        db.flush_wal()


def _write_ttl(root: Path) -> None:
    """A default TTL of a day, rows that expired before they were written (in a run, in
    L0 and only in the WAL, where 0.17 still returns them) and rows that outlive the test."""
    with OfficialDb.open(root, DB, SHAPES["ttl"].settings) as db:
        db.write(_puts(b"t", 60))  # default TTL: a day
        db.write(_puts(b"gone-in-run", 10, expire_at_ms=LONG_AGO_MS))
        db.flush_memtable()
        OfficialAdmin(root, DB).compact()
        db.write(_puts(b"t", 30, b"w", ttl_ms=86_400_000)
                 + _puts(b"far", 10, expire_at_ms=FAR_FUTURE_MS))
        db.write(_puts(b"gone-in-l0", 10, expire_at_ms=LONG_AGO_MS))
        db.flush_memtable()
        db.write(_puts(b"gone-in-wal", 10, expire_at_ms=LONG_AGO_MS) + [Delete(b"t0002")])
        db.flush_wal()


def _write_consolidated(root: Path) -> None:
    """Five sorted runs, then a writer whose scheduler consolidates beyond two runs (0.17's
    ``sorted_run_consolidation_threshold``): runs 4..1 become run 1."""
    with OfficialDb.open(root, DB, DbSettings(block_size=1024)) as db:
        admin = OfficialAdmin(root, DB)
        for n in range(5):
            db.write(_puts(b"c%d:" % n, 40) + _puts(b"shared", 20, b"%d:" % n))
            db.flush_memtable()
            admin.compact(l0=1)
    assert OfficialAdmin(root, DB).sorted_run_ids() == [4, 3, 2, 1, 0]
    with OfficialDb.open(root, DB, SHAPES["consolidation"].settings):
        deadline = time.monotonic() + 30
        while OfficialAdmin(root, DB).sorted_run_ids() != [1, 0]:
            assert time.monotonic() < deadline, OfficialAdmin(root, DB).sorted_run_ids()
            time.sleep(0.05)


def _write_wal_tail(root: Path) -> None:
    with OfficialDb.open(root, DB, SHAPES["skip_wal_replay"].settings) as db:
        db.write(_puts(b"flushed", 50))
        db.flush_memtable()
        db.write(_puts(b"flushed", 10, b"newer") + _puts(b"wal-only", 20) + [Delete(b"flushed0003")])
        db.flush_wal()


def _write_sst_options(root: Path) -> None:
    """Prefix-only and whole-key bloom filters, Zstd, 1 KiB blocks (part 3's options)."""
    with OfficialDb.open(root, DB, SHAPES["sst_options"].settings,
                         **SHAPES["sst_options"].official()) as db:
        for _n in range(3):
            db.write([Put(b"p%03d:%04d" % (2 * (i % 15), i), b"v" * 30) for i in range(300)])
            db.flush_memtable()
        db.write(_puts(b"p990:", 30))
        db.flush_wal()


def _write_trivially_moved(root: Path) -> None:
    """0.17's ``enable_trivial_move``: compactions whose inputs do not overlap move the L0
    SSTs into the sorted run unchanged (the run's views name the former L0 SSTs)."""
    with OfficialDb.open(root, DB, SHAPES["trivial_move"].settings) as db:
        admin = OfficialAdmin(root, DB)
        ids = []
        for n in range(3):
            db.write(_puts(b"r%d:" % n, 50))
            db.flush_memtable()
            ids.append(admin.manifest().l0[0].sst.id.value)
            admin.compact(runs=1 if n else 0)
        db.write(_puts(b"r0:", 10, b"new"))
        db.flush_wal()
    [run_] = OfficialAdmin(root, DB).manifest().compacted
    assert [v.sst.id.value for v in run_.sst_views] == ids  # moved, not rewritten


def _trivial_move_settings() -> DbSettings:
    co = json.loads(DbSettings().to_official().to_json_string())["compactor_options"]
    co["enable_trivial_move"] = True
    return DbSettings(extra={"compactor_options": json.dumps(co)})


def _copy_seq_tracker(root: Path) -> None:
    from tests.conftest import GOLDEN_DIR

    shutil.copytree(GOLDEN_DIR / "seq_tracker", root / DB)


def _consolidating_settings() -> DbSettings:
    from slatedb.uniffi import Settings as OfficialSettings

    co = json.loads(OfficialSettings.default().to_json_string())["compactor_options"]
    co["poll_interval"] = "50ms"
    co["worker"]["compactions_poll_interval"] = "50ms"
    co["scheduler_options"] = {"min_compaction_sources": "1000", "max_compaction_sources": "1000",
                               "sorted_run_consolidation_threshold": "2"}
    return DbSettings(block_size=1024, compactor=False,
                      extra={"compactor_options": json.dumps(co)})


SHAPES: dict[str, Shape] = {
    "wal_disabled": Shape(_write_wal_disabled,
                          DbSettings(extra={"wal_enabled": "false"})),
    "merge_operator": Shape(_write_merges, official=lambda: {"merge_operator": Concat()},
                            merge_operator="concat"),
    "ttl": Shape(_write_ttl, DbSettings(extra={"default_ttl_millis": "86400000"})),
    "sequence_tracker": Shape(_copy_seq_tracker),
    "consolidation": Shape(_write_consolidated, _consolidating_settings()),
    "skip_wal_replay": Shape(_write_wal_tail, reader={"skip_wal_replay": True}),
    "trivial_move": Shape(_write_trivially_moved, _trivial_move_settings()),
    "sst_options": Shape(
        _write_sst_options, DbSettings(codec="Zstd", block_size=1024),
        official=lambda: {"filter_policies": [
            bloom_policy(10, prefix=FixedPrefix(4), whole_keys=False), bloom_policy(7)]},
        sst=SstSettings(prefix_extractors=(("fixed4", "fixed:4"),))),
}


# ------------------------------------------------------------------------- the steps
def official_state(root: Path, shape: Shape, probe: list[bytes],
                   path: str = DB) -> tuple[list[tuple[bytes, bytes]], dict[bytes, bytes | None]]:
    with _official_reader(root, shape, path) as r:
        return r.scan(), r.get_many(probe)


def _official_reader(root: Path, shape: Shape, path: str = DB) -> OfficialReader:
    """The official ``DbReader`` with the shape's options (``skip_wal_replay`` through the
    builder's ``ReaderOptions``, which ``OfficialReader.open`` does not take)."""
    if not shape.reader.get("skip_wal_replay"):
        return OfficialReader.open(root, path, **shape.official())
    from slatedb.uniffi import DbReaderBuilder, ReaderOptions

    builder = DbReaderBuilder(path, local_store(root))
    builder.with_options(ReaderOptions(manifest_poll_interval_ms=1000,
                                       checkpoint_lifetime_ms=600_000,
                                       max_memtable_bytes=1 << 26, skip_wal_replay=True))
    return OfficialReader(run(builder.build()))


def our_state(root: Path, shape: Shape, probe: list[bytes],
              ) -> tuple[list[tuple[bytes, bytes]], dict[bytes, bytes | None]]:
    with DbReader.open(DB, f"file://{root}", mode="latest", merge_operator=shape.merge_operator,
                       settings=shape.slate_settings(), **shape.reader) as r:
        return list(r.scan()), {k: r.get(k) for k in probe}


def slate_cli(root: Path, *argv: str, env: dict[str, str] | None = None,
              ) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SLATELIB_")}
    clean.update(PYTHONPATH=str(REPO), **(env or {}))
    return subprocess.run(
        [sys.executable, "-c", "import sys; from slatelib.cli import main; "
         "sys.exit(main(sys.argv[1:]))", "--db", f"file://{root}/{DB}", *argv],
        capture_output=True, text=True, env=clean, timeout=300, check=False)


def cli_state(root: Path, shape: Shape, probe: list[bytes],
              ) -> tuple[list[tuple[bytes, bytes]], dict[bytes, bytes | None]]:
    opts = ["--merge-operator", shape.merge_operator] if shape.merge_operator else []
    skip = ["--skip-wal-replay"] if shape.reader.get("skip_wal_replay") else []
    done = slate_cli(root, *opts, "scan", *skip)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    gets = {}
    for k in probe[:6]:
        got = slate_cli(root, *opts, "get", "--key", "hex:" + k.hex(), *skip)
        assert got.returncode == 0, got.stderr
        value = json.loads(got.stdout)["value"]
        gets[k] = None if value is None else bytes.fromhex(value)
    return [(bytes.fromhex(r["key"]), bytes.fromhex(r["value"])) for r in rows], gets


def probe_keys(scan: list[tuple[bytes, bytes]]) -> list[bytes]:
    present = [k for k, _ in scan[::7]]
    return present + [b"\x00", b"absent", b"gone-in-wal0003", b"gone-in-l00001", b"zzz",
                      b"m0001", b"t0002", b"flushed0003", b"wal-only0001"]


def twin(root: Path, name: str) -> Path:
    dst = root.parent / name
    shutil.copytree(root, dst)
    return dst


def officially_compacted(root: Path, shape: Shape, *, flush: bool) -> Path:
    """A twin compacted fully by the official compactor of a writer with the shape's
    settings (after a memtable flush when ``flush``)."""
    name = f"{root.name}-official-{'flushed' if flush else 'compacted'}"
    dst = twin(root, name)
    settings = replace(shape.settings, compactor=True, extra={
        k: v for k, v in shape.settings.extra.items() if k != "compactor_options"})
    with OfficialDb.open(dst, DB, settings, **shape.official()) as db:
        if flush:
            db.flush_memtable()
        admin = OfficialAdmin(dst, DB)
        m = admin.manifest()
        if m.l0 or len(m.compacted) > 1:
            runs = [sr.id for sr in m.compacted]
            admin.compact(runs=len(runs), destination=min(runs) if runs else None)
        db.close(flush=None)  # nothing new to flush (and no WAL to flush to without one)
    return dst


def age(root: Path, seconds: float = HOUR_S) -> None:
    then = time.time() - seconds
    for p in root.rglob("*"):
        if p.is_file():
            os.utime(p, (then, then))


def spark_compact(spark: Any, root: Path, shape: Shape) -> dict[str, Any]:
    args = compact_parser().parse_args(["--db", f"file://{root}/{DB}", "--policy", "full",
                                        "--takeover", "--parallelism", "2"])
    report, code = compact_job(spark, shape.slate_settings(), args)
    assert code == 0, report
    entry: dict[str, Any] = report["databases"][0]
    assert entry["outcome"] == "committed"
    return entry


def spark_export(spark: Any, root: Path, shape: Shape, to: Path) -> list[tuple[bytes, bytes]]:
    argv = ["--db", f"file://{root}/{DB}", "--to", f"file://{to}", "--format", "parquet",
            "--partitions", "2"]
    if shape.merge_operator:
        argv += ["--merge-operator", shape.merge_operator]
    report, code = export_job(spark, shape.slate_settings(), export_parser().parse_args(argv))
    assert code == 0, report
    table = pq.read_table(str(to))
    return sorted(zip(table.column("key").to_pylist(), table.column("value").to_pylist(),
                      strict=True))


# ------------------------------------------------------------------------- the test
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_every_tool_on_an_official_database_of_each_shape(spark: Any, tmp_path: Path,
                                                          name: str) -> None:
    shape = SHAPES[name]
    root = tmp_path / "src"
    root.mkdir()
    shape.write(root)
    before_scan, _ = official_state(root, shape, [])
    probe = probe_keys(before_scan)
    before = official_state(root, shape, probe)
    assert before[0], "an empty database tests nothing"
    store = open_store(f"file://{tmp_path}")
    first = ManifestStore(store, f"src/{DB}").read_latest().value

    # 1. read
    assert our_state(root, shape, probe) == before
    scan, gets = cli_state(root, shape, probe)
    assert scan == before[0] and gets == {k: before[1][k] for k in gets}

    # 2. compact (Spark), against the official compactor on a twin
    expected = official_state(officially_compacted(root, shape, flush=False), shape, probe)
    entry = spark_compact(spark, root, shape)
    assert entry["rows_out"] > 0
    assert official_state(root, shape, probe) == expected
    assert our_state(root, shape, probe) == expected

    # 3. GC: the official collector and ours leave the same objects
    age(root)
    official, ours = twin(root, "gc-official"), twin(root, "gc-ours")
    official_gc(official, DB, 0)
    report = our_gc(ours, DB, 0)
    assert_same_trees(official, ours, {DB: report})
    our_gc(root, DB, 0)
    assert official_state(root, shape, probe) == expected

    # 4. export (of everything: reader options such as skip_wal_replay do not apply)
    plain = replace(shape, reader={})
    assert spark_export(spark, root, shape, tmp_path / "export") == official_state(
        root, plain, [])[0]

    # 5. rescale: split in two, against the official flush and compaction of a twin
    whole = officially_compacted(root, shape, flush=True)
    want = official_state(whole, plain, probe)
    age(root)  # no live writer: nothing was written within the rescale's window
    split = split_database(f"src/{DB}", store, ["a", "b"],
                           settings=shape.slate_settings()).to_dict()
    assert split["status"] == "done" and split["validation"]["ok"], split
    shards = [official_state(tmp_path, plain, probe, path) for path in ("a", "b")]
    assert shards[0][0] and shards[1][0]
    assert shards[0][0] + shards[1][0] == want[0]
    for got in shards:  # each shard answers the probes of its range as the whole
        assert {k: v for k, v in got[1].items() if v is not None}.items() <= want[1].items()
    SHAPE_CHECKS.get(name, lambda _: None)(Outcome(
        tmp_path, shape, before, expected, want, first,
        ManifestStore(store, f"src/{DB}").read_latest().value))


# ------------------------------------------------------------------ shape-specific checks
@dataclass(frozen=True)
class Outcome:
    """What the steps saw: official reads at the start, after our compaction, and of the
    source flushed and compacted officially; the source's first and last manifests."""

    tmp_path: Path
    shape: Shape
    before: tuple[list[tuple[bytes, bytes]], dict[bytes, bytes | None]]
    compacted: tuple[list[tuple[bytes, bytes]], dict[bytes, bytes | None]]
    flushed: tuple[list[tuple[bytes, bytes]], dict[bytes, bytes | None]]
    first: Manifest
    last: Manifest


def _check_wal_disabled(o: Outcome) -> None:
    """No WAL data was ever written (only the writers' zero-byte fences)."""
    wal = o.tmp_path / "src" / DB / "wal"
    assert all(p.stat().st_size == 0 for p in wal.iterdir())
    assert dict(o.before[0])[b"late:0003"] == b"v3"  # flushed by the close, not by a WAL


def _check_merges(o: Outcome) -> None:
    got = dict(o.before[0])
    assert got[b"m0000"] == b"base0+l0+wal" and got[b"only00"] == b"o+w"
    assert got[b"m0001"] == b"after-delete"
    assert dict(o.compacted[0]) == got


def _check_ttl(o: Outcome) -> None:
    """0.17 returns expired rows still in the WAL, until a flush writes them out."""
    assert b"gone-in-wal0003" in dict(o.before[0]) and b"gone-in-l00003" not in dict(o.before[0])
    assert b"gone-in-wal0003" not in dict(o.flushed[0])
    for path in ("a", "b"):
        assert all(not k.startswith(b"gone") for k, _ in _scan(o, path))


def _check_sequence_tracker(o: Outcome) -> None:
    """The tracker is carried through compaction, GC, export and the split (as 0.17's
    clones carry it), so official ``Admin`` answers the same timestamps."""
    assert o.first.sequence_tracker == o.last.sequence_tracker
    for path in ("a", "b"):
        m = ManifestStore(open_store(f"file://{o.tmp_path}"), path).read_latest().value
        assert m.sequence_tracker == o.first.sequence_tracker
        for seq in (1, 2, 40, 115):
            assert run(OfficialAdmin(o.tmp_path, path).admin.get_timestamp_for_sequence(
                seq, False)) == run(OfficialAdmin(o.tmp_path / "src", DB).admin
                                    .get_timestamp_for_sequence(seq, False))


def _check_consolidated(o: Outcome) -> None:
    assert [r.id for r in o.first.compacted] == [1, 0]


def _check_consolidated_trivially(o: Outcome) -> None:
    """Our compaction rewrote the moved SSTs into new ones; the source's run is new."""
    [run_] = o.first.compacted
    assert len(run_.views) == 3 and all(v.sst_id not in {w.sst_id for r in o.last.compacted
                                                         for w in r.views} for v in run_.views)


def _check_skip_wal_replay(o: Outcome) -> None:
    keys = dict(o.before[0])
    assert b"wal-only0001" not in keys and keys[b"flushed0001"] == b"v1"
    assert dict(o.flushed[0])[b"wal-only0001"] == b"v1"


def _check_sst_options(o: Outcome) -> None:
    """The shards keep the source's codec and filters: the split's flush of the WAL tail
    writes its L0 with them, and the shards' compactions keep them."""
    from tests.interop.test_compact_sst_options_interop import shape as sst_shape

    for path in ("a", "b"):
        m = OfficialAdmin(o.tmp_path, path).manifest()
        ssts = [o.tmp_path / path / "compacted" / f"{v.sst.id.value}.sst"
                for sr in m.compacted for v in sr.sst_views]
        assert ssts and not m.l0
        for sst in ssts:
            got = sst_shape(sst)
            assert got["codec"].name == "ZSTD", sst
            assert list(got["filters"] or {}) == ["_bf:p=fixed4:wh=0", "_bf"], sst


def _scan(o: Outcome, path: str) -> list[tuple[bytes, bytes]]:
    with _official_reader(o.tmp_path, replace(o.shape, reader={}), path) as r:
        return r.scan()


SHAPE_CHECKS: dict[str, Callable[[Outcome], None]] = {
    "wal_disabled": _check_wal_disabled,
    "merge_operator": _check_merges,
    "ttl": _check_ttl,
    "sequence_tracker": _check_sequence_tracker,
    "consolidation": _check_consolidated,
    "skip_wal_replay": _check_skip_wal_replay,
    "sst_options": _check_sst_options,
    "trivial_move": _check_consolidated_trivially,
}


def test_every_shape_is_checked() -> None:
    assert set(SHAPE_CHECKS) == set(SHAPES)


# ------------------------------------------------------------------------- refusals
def test_without_the_merge_operator_every_tool_refuses_naming_it(spark: Any,
                                                                 tmp_path: Path) -> None:
    shape = SHAPES["merge_operator"]
    root = tmp_path / "src"
    root.mkdir()
    shape.write(root)
    before = official_state(root, shape, [])[0]
    bare = replace(shape, merge_operator=None)
    done = slate_cli(root, "scan")
    assert done.returncode == 2 and "--merge-operator" in done.stderr, done.stderr
    report, code = export_job(spark, Settings(), export_parser().parse_args(
        ["--db", f"file://{root}/{DB}", "--to", f"file://{tmp_path}/x", "--format",
         "parquet"]))
    assert code == 2 and "--merge-operator" in report["databases"][0]["error"]["message"], report["databases"][0]["error"]
    age(root)
    store = open_store(f"file://{tmp_path}")
    with pytest.raises(InvalidArgumentError, match="merge_operator; nothing was written"):
        split_database(f"src/{DB}", store, ["a", "b"], settings=bare.slate_settings())
    assert not (tmp_path / "a").exists()
    # compaction keeps the operands unfolded without an operator: reads stay the same
    spark_compact(spark, root, bare)
    assert official_state(root, shape, [])[0] == before


def test_a_prefix_filter_without_its_extractor_refuses_compaction_and_rescale(
        spark: Any, tmp_path: Path) -> None:
    shape = SHAPES["sst_options"]
    root = tmp_path / "src"
    root.mkdir()
    shape.write(root)
    bare = replace(shape, sst=SstSettings())
    files = sorted(p for p in root.rglob("*") if p.is_file())
    args = compact_parser().parse_args(["--db", f"file://{root}/{DB}", "--policy", "full",
                                        "--takeover"])
    report, code = compact_job(spark, bare.slate_settings(), args)
    assert code == 5, report
    message = report["databases"][0]["error"]["message"]
    assert "_bf:p=fixed4:wh=0" in message and "[sst.prefix_extractors]" in message
    age(root)
    with pytest.raises(UnsupportedFeatureError, match="prefix_extractors"):
        split_database(f"src/{DB}", open_store(f"file://{tmp_path}"), ["a", "b"],
                       settings=bare.slate_settings())
    assert sorted(p for p in root.rglob("*") if p.is_file()) == files  # nothing written
    assert not (tmp_path / "a").exists()
