"""Large-database benchmark: what a manifest of 100k (``--ssts``) SSTs costs. Not a test.

    .venv/bin/python benchmarks/bench_large.py [--ssts 100000] [--runs 10] [--repeat 3]
        [--planner-ssts 1000000] [--no-official] [--no-python]

A real small database is written with the slatelib writer (one flushed L0), then its latest
manifest is rewritten at the next id with ``--runs`` sorted runs holding ``--ssts``
synthetic SSTs in all (the SST objects do not exist: every figure here reads manifests
only). On copies of it, side by side with official 0.17 where it has an equivalent, it
times (medians of ``--repeat``):

- the codec: ``encode_manifest`` / ``decode_manifest`` of the big manifest, native and
  (``--no-python`` skips it) the pure-Python reference; the official package's
  ``Admin.read_manifest`` (read + decode + conversion to Python objects);
- compaction planning (size-tiered and full: the pure planners) and the range split's
  manifest part (input views, sizes and effective ranges; the index reads it may add are
  SST reads, not manifest work), and the GC plan's pure part (referenced SSTs and rules),
  also on an in-memory manifest of ``--planner-ssts`` SSTs;
- ``slate summary`` and ``slate ls`` (in process), the listing of every object of the
  database that ``ls`` (and GC) starts from (through ``ObjectStore.list``, and obstore's
  own ``list`` alone: the floor under it), ``slate ls`` on a store whose listing is made
  already (``ls`` minus the listing: its manifest, matching and output work), a
  ``DbReader`` open (managed mode: it creates its checkpoint) and its close, a writer open / one put and a memtable flush /
  close, a checkpoint create, a GC dry run (``collect_garbage``; official: ``run_gc_once``
  with every directory in dry run) and a full clone, and one put-if-absent of the big
  manifest (a clone writes four by protocol: its I/O floor). These are timed cold:
  ``manifest_codec.clear_caches()`` before each repetition, so no tree is reused from the
  previous one. The codec is also timed on a version that differs from the last one
  written only outside the tree (what a checkpoint writes).

Each figure is printed with its ratio to the codec's time (encode + decode; the target is
at most 2x) and to official. The machine load (``uptime``) is printed first: run it on a
quiet machine.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any
from unittest import mock

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import obstore  # noqa: E402
from obstore.store import LocalStore  # noqa: E402

from slatelib.cli import app as cli_app  # noqa: E402
from slatelib.cli.app import main as slate_main  # noqa: E402
from slatelib.config import Settings  # noqa: E402
from slatelib.core.compaction_plan import PlanOptions, Policy, plan_compaction  # noqa: E402
from slatelib.core.compactions import (  # noqa: E402
    CompactedSsTable,
    Compaction,
    Compactions,
    CompactionStatus,
    TieredCompactionSpec,
)
from slatelib.core.gc_plan import (  # noqa: E402
    CompactionsState,  # noqa: E402
    LiveSet,
    build_rules,
    referenced_ssts,
)
from slatelib.core.manifest import (  # noqa: E402
    Manifest,
    SortedRun,
    SsTableInfo,
    SstHandle,
    SstView,
)
from slatelib.core.range_split import split_by_weight  # noqa: E402
from slatelib.format import manifest_codec, manifest_native  # noqa: E402
from slatelib.format.compactions_codec import decode_compactions, encode_compactions  # noqa: E402
from slatelib.format.sst import SstWriterOptions  # noqa: E402
from slatelib.ids import Ulid  # noqa: E402
from slatelib.objstore import ObjectMeta, ObjectStore, open_store, split_db_url  # noqa: E402
from slatelib.ops.checkpoint import create_checkpoint  # noqa: E402
from slatelib.ops.clone import create_clone  # noqa: E402
from slatelib.ops.engine import TaskOptions, build_tasks, input_views  # noqa: E402
from slatelib.ops.engine._split import coarse_anchors  # noqa: E402
from slatelib.ops.gc.collect import collect_garbage, gc_options  # noqa: E402
from slatelib.paths import DbPaths  # noqa: E402
from slatelib.reader import DbReader  # noqa: E402
from slatelib.store.manifest_store import ManifestStore  # noqa: E402
from slatelib.store.table_store import TableStore  # noqa: E402
from slatelib.writer import Db  # noqa: E402

DB = "big"
SST_BYTES = 64 << 20


def synthetic_manifest(base: Manifest, n: int, runs: int, now_ms: int) -> Manifest:
    """``base`` plus ``runs`` sorted runs of ``n`` SSTs in all (64 MiB each, disjoint keys
    within a run, every run covering the same key space)."""
    per = max(1, n // runs)
    handles: list[SstHandle] = []
    run_list = []
    t0 = now_ms - 3 * 86_400_000
    for r in range(runs):
        views = []
        for j in range(per):
            i = len(handles)
            sid = Ulid(((t0 + i) << 80) | (r << 40) | j)
            info = SsTableInfo(b"user%010d" % (j * 1000), b"user%010d" % (j * 1000 + 999),
                               index_offset=SST_BYTES - 65536, index_len=60000,
                               filter_offset=SST_BYTES - 200_000, filter_len=130_000,
                               stats_offset=SST_BYTES - 5536, stats_len=90)
            handles.append(SstHandle(sid, info, 2))
            views.append(SstView.identity(sid))
        run_list.append(SortedRun(runs - r, tuple(views)))
    return base.with_trees(compacted=(*run_list, *base.compacted), new_ssts=handles)


def build_db(folder: Path, n: int, runs: int, *, touch: bool) -> None:
    """A slatelib database under ``folder/DB`` whose latest manifest holds ``n`` SSTs;
    ``touch``: create each synthetic SST as an empty object (listings then see them, as in
    a real database: ``slate ls`` and GC list ``compacted/``)."""
    store = open_store(f"file://{folder}")
    with Db.open(DB, store) as db:
        for i in range(1000):
            db.put(b"key%05d" % i, b"v" * 100)
        db.flush()
    ms = ManifestStore(store, DB)
    latest = ms.read_latest()
    big = synthetic_manifest(latest.value, n, runs, int(time.time() * 1000))
    if touch:
        paths = DbPaths.of(DB)
        own = {h.id for h in latest.value.ssts}
        for h in big.ssts:
            if h.id not in own:
                (folder / paths.compacted(h.id)).touch()
    ms.write(latest.id + 1, big)


class PreListed:
    """``store`` whose listing of ``prefix`` (and only that one) is made once, up front:
    ``ls`` on it times everything but the listing."""

    def __init__(self, store: ObjectStore, prefix: str) -> None:
        self._store = store
        self._prefix = prefix
        self._listing = list(store.list(prefix))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def list(self, prefix: str, **bounds: Any) -> Iterator[ObjectMeta]:
        if prefix == self._prefix and not bounds:
            return iter(self._listing)
        return self._store.list(prefix, **bounds)


def median_of(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def quiet_cli(*argv: str) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = slate_main(list(argv))
    assert code == 0, f"slate {' '.join(argv)} exited {code}"


# ---------------------------------------------------------------------------- slatelib
def timed_cold(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        manifest_codec.clear_caches()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def codec_figures(m: Manifest, repeat: int, python: bool) -> dict[str, float]:
    data = manifest_codec.encode_manifest(m)
    out = {
        "manifest MB": len(data) / 1e6,
        "encode": timed_cold(lambda: manifest_codec.encode_manifest(m), repeat),
        "decode": timed_cold(lambda: manifest_codec.decode_manifest(data), repeat),
    }
    # A version that differs from the last one written only outside the tree (a checkpoint):
    # the encoder resumes after the tree it kept and the decoder returns that tree.
    bumped = replace(m, writer_epoch=m.writer_epoch + 1)
    manifest_codec.clear_caches()
    manifest_codec.encode_manifest(m)
    out["encode, tree unchanged"] = median_of(lambda: manifest_codec.encode_manifest(bumped),
                                              repeat)
    bumped_data = manifest_codec.encode_manifest(bumped)

    def decode_unchanged() -> None:
        manifest_codec._RECENT.clear()  # the tree is reused, the bytes are not recognized
        manifest_codec.decode_manifest(bumped_data)

    out["decode, tree unchanged"] = median_of(decode_unchanged, repeat)
    for n in (1_000, 10_000, 100_000):  # a compactions file: n outputs + n L0 ids (RFC 0010)
        few = m.ssts[:n]
        comp = Compactions(1, (Compaction(Ulid(1), TieredCompactionSpec(tuple(h.id for h in few)),
                                          CompactionStatus.COMPACTED,
                                          tuple(CompactedSsTable(h.id, h.info) for h in few)),))
        blob = encode_compactions(comp)
        name = f"compactions file, {len(few)} outputs"
        out[f"{name}: encode"] = median_of(partial(encode_compactions, comp), repeat)
        out[f"{name}: decode"] = median_of(partial(decode_compactions, blob), repeat)
    if python:
        assert manifest_codec.encode_manifest_py(m) == data
        out["encode (pure Python)"] = median_of(lambda: manifest_codec.encode_manifest_py(m), 1)
        out["decode (pure Python)"] = median_of(lambda: manifest_codec.decode_manifest_py(data), 1)
    return out


def planner_figures(m: Manifest, repeat: int, suffix: str = "") -> dict[str, float]:
    full = plan_compaction(m, None, PlanOptions(policy=Policy.FULL))
    tables = TableStore(open_store("memory:///"), "big")

    def split_part() -> None:
        # The range split's manifest work: every input view's handle, object path,
        # effective range and size, then the coarse anchors and the split (no index reads:
        # the fine anchors it adds for large views are SST reads).
        assert full is not None
        views = input_views(full, m, tables)
        split_by_weight(coarse_anchors(views), 16)

    opts = TaskOptions(tables.store.spec, "big", Ulid(1), SstWriterOptions(), 256 << 20, None,
                       4, 1 << 20, 0)

    def split_and_tasks() -> None:
        # The same, then the 16 tasks with the input views each range overlaps.
        assert full is not None
        views = input_views(full, m, tables)
        ranges = split_by_weight(coarse_anchors(views), 16)
        build_tasks(full, views, ranges, opts)

    live = LiveSet(1, m)

    def gc_plan() -> None:
        referenced_ssts(live)
        build_rules("big", live, CompactionsState(), now_ms=int(time.time() * 1000),
                    options=gc_options(Settings()))

    return {
        f"plan size-tiered{suffix}": median_of(
            lambda: plan_compaction(m, None, PlanOptions(policy=Policy.SIZE_TIERED)), repeat),
        f"plan full{suffix}": median_of(
            lambda: plan_compaction(m, None, PlanOptions(policy=Policy.FULL)), repeat),
        f"range split, manifest part{suffix}": median_of(split_part, repeat),
        f"range split + 16 tasks, manifest part{suffix}": median_of(split_and_tasks, repeat),
        f"GC plan (pure){suffix}": median_of(gc_plan, repeat),
    }


def io_figures(folder: Path, repeat: int) -> dict[str, float]:
    url = f"file://{folder}"
    store = open_store(url)
    out: dict[str, float] = {}
    out["read latest manifest"] = timed_cold(lambda: ManifestStore(store, DB).read_latest(), repeat)
    out["slate summary"] = timed_cold(lambda: quiet_cli("summary", "--db", f"{url}/{DB}"),
                                     repeat)
    out["slate ls"] = timed_cold(lambda: quiet_cli("ls", "--db", f"{url}/{DB}"), repeat)
    # What any listing-based view pays first (ls and GC list every object of the database),
    # through our ObjectStore.list (ObjectMeta, sorted, checked) and obstore's alone.
    out["list the database's objects (ls floor)"] = timed_cold(lambda: list(store.list(DB)),
                                                               repeat)
    raw = LocalStore(str(folder))
    out["obstore.list of the same objects, alone"] = timed_cold(
        lambda: [m for chunk in obstore.list(raw, DB, chunk_size=1000) for m in chunk], repeat)
    # ls's own work (manifests, references, matching, 100k output lines) without the
    # listing: the same command on a store whose listing of the database is made already.
    db_store_url, db_path = split_db_url(f"{url}/{DB}")  # what the CLI opens for --db
    pre = PreListed(open_store(db_store_url), db_path)
    with mock.patch.object(cli_app, "open_store", lambda _url: pre):
        out["slate ls on a pre-listed store (ls minus the listing)"] = timed_cold(
            lambda: quiet_cli("ls", "--db", f"{url}/{DB}"), repeat)

    opened: list[DbReader] = []
    out["reader open"] = timed_cold(
        lambda: opened.append(DbReader.open(DB, store, auto_refresh=False)), repeat)
    out["reader close"] = timed_cold(lambda: opened.pop().close(), repeat)

    phases: dict[str, list[float]] = {"writer open": [], "writer put + memtable flush": [],
                                      "writer close": []}
    for _ in range(repeat):
        manifest_codec.clear_caches()
        t0 = time.perf_counter()
        db = Db.open(DB, store)
        t1 = time.perf_counter()
        db.put(b"key-new", b"x")
        db.flush()
        t2 = time.perf_counter()
        db.close()
        t3 = time.perf_counter()
        for name, t in zip(phases, (t1 - t0, t2 - t1, t3 - t2), strict=True):
            phases[name].append(t)
    out.update({name: statistics.median(ts) for name, ts in phases.items()})
    out["checkpoint create"] = timed_cold(lambda: create_checkpoint(DB, store, lifetime=3600),
                                         repeat)
    out["GC dry run"] = timed_cold(
        lambda: collect_garbage(DB, store, dry_run=True, min_age=300), repeat)
    clones = iter(f"clone{i}" for i in range(repeat))
    out["clone"] = timed_cold(lambda: create_clone(next(clones), DB, store), repeat)
    # The I/O floor of a clone: its protocol writes four manifests of this size (pin, the
    # clone's manifest 1, final checkpoint, initialized), each one put-if-absent.
    data = manifest_codec.encode_manifest(ManifestStore(store, DB).read_latest().value)
    puts = iter(f"scratch/put{i}" for i in range(repeat))
    out["put-if-absent of one such manifest (I/O)"] = median_of(
        lambda: store.put_if_absent(next(puts), data), repeat)
    return out


# ---------------------------------------------------------------------------- official
def official_figures(folder: Path, repeat: int) -> dict[str, float]:
    from slatedb.uniffi import (
        AdminBuilder,
        GarbageCollectorDirectoryOptions,
        GarbageCollectorOptions,
        GarbageCollectorScheduleOptions,
    )

    from tests.interop.official import OfficialAdmin, OfficialReader, as_store, run

    out: dict[str, float] = {}
    admin = OfficialAdmin(folder, DB)
    out["read latest manifest"] = median_of(lambda: admin.manifest(), repeat)

    opened: list[OfficialReader] = []
    out["reader open"] = median_of(lambda: opened.append(OfficialReader.open(folder, DB)),
                                   repeat)
    out["reader close"] = median_of(lambda: opened.pop().close(), repeat)
    out["checkpoint create"] = median_of(lambda: admin.checkpoint(lifetime_ms=3_600_000), repeat)
    dry = GarbageCollectorDirectoryOptions(interval_ms=None, min_age_ms=300_000, dry_run=True)
    gc_admin = AdminBuilder(DB, as_store(folder)).build()
    opts = GarbageCollectorOptions(
        manifest_options=dry, wal_options=dry, wal_fence_options=dry, compacted_options=dry,
        compactions_options=dry, detach_options=GarbageCollectorScheduleOptions(interval_ms=None))
    out["GC dry run"] = median_of(lambda: run(gc_admin.run_gc_once(opts)), repeat)
    return out


# ---------------------------------------------------------------------------- report
def print_table(title: str, codec_s: float, ours: dict[str, float],
                official: dict[str, float]) -> None:
    print(f"\n{title}")
    print(f"{'operation':44} {'slatelib':>10} {'x codec':>8} {'official':>10} {'ours/off':>9}")
    for name, t in ours.items():
        if name.endswith("MB"):
            print(f"{name:44} {t:10.1f}")
            continue
        off = official.get(name)
        ratio = f"{t / off:9.2f}" if off else ""
        offs = f"{off * 1000:8.0f}ms" if off else ""
        print(f"{name:44} {t * 1000:8.0f}ms {t / codec_s:8.2f} {offs:>10} {ratio}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ssts", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--planner-ssts", type=int, default=1_000_000)
    ap.add_argument("--no-official", action="store_true")
    ap.add_argument("--no-python", action="store_true", help="skip the pure-Python codec")
    ap.add_argument("--no-touch", action="store_true",
                    help="do not create the synthetic SSTs as empty objects")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    print(f"load: {os.getloadavg()}, cpus: {os.cpu_count()}, "
          f"native codec: {manifest_native.HAVE_NATIVE}")
    work = Path(tempfile.mkdtemp(prefix="bench_large_"))
    try:
        t = time.perf_counter()
        build_db(work / "ours", args.ssts, args.runs, touch=not args.no_touch)
        print(f"built a {args.ssts}-SST database in {time.perf_counter() - t:.1f}s ({work})")
        shutil.copytree(work / "ours", work / "official")
        store = open_store(f"file://{work / 'ours'}")
        m = ManifestStore(store, DB).read_latest().value
        assert len(m.ssts) >= args.ssts
        codec = codec_figures(m, args.repeat, not args.no_python)
        codec_s = codec["encode"] + codec["decode"]
        ours = {**codec, **planner_figures(m, args.repeat), **io_figures(work / "ours", args.repeat)}
        official = {} if args.no_official else official_figures(work / "official", args.repeat)
        print_table(f"{args.ssts} SSTs in {args.runs} sorted runs "
                    f"(codec encode + decode = {codec_s * 1000:.0f} ms)", codec_s, ours, official)
        big: dict[str, float] = {}
        if args.planner_ssts:
            del m
            t = time.perf_counter()
            data = manifest_codec.encode_manifest(
                synthetic_manifest(Manifest(), args.planner_ssts, args.runs,
                                   int(time.time() * 1000)))
            manifest_codec.clear_caches()
            mm = manifest_codec.decode_manifest(data)  # as every caller gets it
            print(f"\nbuilt an in-memory {args.planner_ssts}-SST manifest in "
                  f"{time.perf_counter() - t:.1f}s")
            enc = timed_cold(lambda: manifest_codec.encode_manifest(mm), 1)
            dec = timed_cold(lambda: manifest_codec.decode_manifest(data), 1)
            del data
            big = {"encode": enc, "decode": dec, **planner_figures(mm, args.repeat)}
            print_table(f"pure planners, {args.planner_ssts} SSTs (codec {1000 * (enc + dec):.0f} ms)",
                        enc + dec, big, {})
        if args.json:
            args.json.write_text(json.dumps({"ssts": args.ssts, "ours": ours,
                                             "official": official, "planners": big}, indent=1))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
