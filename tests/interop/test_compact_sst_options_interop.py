"""Our compaction keeps an official database's SST options (docs/rfcs/0019-compaction-sst-options.md).

Databases written by official 0.17.0 with prefix bloom filters, without filters, with each
codec and with 1 KiB and 64 KiB blocks are compacted by slatelib with nothing set in
``[sst]`` but the prefix extractor. Each output SST must carry what the official
compactor's outputs carry for the same database (filter names in order, probes, codec,
block size), and the official reader must still use the filters: its metrics count a
prefix scan of an absent prefix as a filter negative (with the filters dropped, the same
scan counts none). Both SST writing paths run: the native one in this process, the
pure-Python one in a ``slate compact`` child with ``SLATELIB_NO_NATIVE=1`` (there also with
the extractor given as Python code).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from slatelib.config import CompactionSettings, Settings, SstSettings
from slatelib.core.manifest import CompressionCodec
from slatelib.format import bloom
from slatelib.format.block import decode_block
from slatelib.format.block_size import block_size_bounds, block_size_candidates
from slatelib.format.sst import decode_region, parse_sst
from slatelib.objstore import open_store
from slatelib.ops.compaction import CompactionReport, ThreadTaskRunner, run_compaction
from tests.interop.official import (
    DbSettings,
    FilterPolicy,
    FixedPrefix,
    Model,
    OfficialAdmin,
    OfficialDb,
    OfficialReader,
    Put,
    bloom_policy,
    key_range,
    local_store,
    run,
)
from tests.interop.official import _drain as drain

pytestmark = pytest.mark.interop

REPO = Path(__file__).resolve().parents[2]
PREFIX_POLICIES = ("_bf:p=fixed4:wh=0", "_bf")
EXTRACTOR_ENV = {"SLATELIB_SST__PREFIX_EXTRACTORS": json.dumps({"fixed4": "fixed:4"})}


def prefix_policies() -> list[FilterPolicy]:
    """A prefix-only filter at 10 bits and a whole-key one at 7 (named as PREFIX_POLICIES)."""
    return [bloom_policy(10, prefix=FixedPrefix(4), whole_keys=False), bloom_policy(7)]


def write_db(root: Path, *, codec: str | None, block_size: int,
             policies: list[FilterPolicy] | None, l0s: int = 3, rows: int = 700,
             value_len: int = 40) -> Model:
    """``l0s`` official L0 SSTs of keys ``p<even 3 digits>:<5 digits>``: the odd prefixes
    lie inside the key range and are never written (a filter can rule them out)."""
    root.mkdir(parents=True, exist_ok=True)
    model = Model()
    settings = DbSettings(codec=codec, block_size=block_size, compactor=False,
                          min_filter_keys=1)
    with OfficialDb.open(root, "db", settings, model=model, filter_policies=policies) as db:
        for n in range(l0s):
            for start in range(0, rows, 100):
                db.write([Put(b"p%03d:%05d" % (2 * (i % 20), i), b"%d:" % n + b"v" * value_len)
                          for i in range(start + n, min(rows, start + 100) + n)])
            db.flush_memtable()
    return model


def copy_db(root: Path, name: str) -> Path:
    dst = root.parent / name
    shutil.copytree(root, dst)
    return dst


def compact_here(root: Path, **sst: Any) -> CompactionReport:
    settings = Settings(sst=SstSettings(prefix_extractors=(("fixed4", "fixed:4"),), **sst),
                        compaction=CompactionSettings(policy="full", min_range_bytes=1))
    report = run_compaction("db", open_store(f"file://{root}"), settings=settings,
                            parallelism=2, runner=ThreadTaskRunner(2))
    assert report.status == "committed", report
    return report


def compact_in_pure_python_child(root: Path, extractor: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLATELIB_")}
    env.update(SLATELIB_NO_NATIVE="1", PYTHONPATH=str(REPO),
               SLATELIB_COMPACTION__MIN_RANGE_BYTES="1",
               SLATELIB_SST__PREFIX_EXTRACTORS=json.dumps({"fixed4": extractor}))
    code = ("import sys; from slatelib.format import native; "
            "assert native.speedups is None and native.sstwrite is None; "
            "from slatelib.cli import main; sys.exit(main(sys.argv[1:]))")
    done = subprocess.run(
        [sys.executable, "-c", code, "--db", f"file://{root}/db", "--format", "json",
         "compact", "--policy", "full", "--parallelism", "2"],
        capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def compact_officially(root: Path, policies: list[FilterPolicy] | None, codec: str | None,
                       block_size: int) -> None:
    """The official compactor embedded in a writer with the database's configuration."""
    settings = DbSettings(codec=codec, block_size=block_size, min_filter_keys=1)
    with OfficialDb.open(root, "db", settings, filter_policies=policies):
        OfficialAdmin(root, "db").compact(destination=0)


def run_ssts(root: Path) -> list[Path]:
    m = OfficialAdmin(root, "db").manifest()
    assert not m.l0 and len(m.compacted) == 1
    return [root / "db" / "compacted" / f"{v.sst.id.value}.sst" for v in m.compacted[0].sst_views]


def shape(path: Path) -> dict[str, Any]:
    """What an SST carries of the database's options: codec, filters (name -> probes) and
    the 0.17 block sizes its first blocks allow."""
    data = path.read_bytes()
    p = parse_sst(data)
    info = p.info
    filters: dict[str, int] | None = None
    if info.filter_len:
        region = data[info.filter_offset:info.filter_offset + info.filter_len]
        raw = decode_region(region, info.compression, path=str(path), what="filter")
        filters = {k: int.from_bytes(v[:2], "big") for k, v in bloom.decode_composite(raw).items()}
    n = min(len(p.index.offsets), 8)
    raws = [decode_region(p.block_region(i), info.compression, path=str(path), what="block",
                          block=i) for i in range(n)]
    sizes = block_size_candidates(*block_size_bounds([decode_block(r, 2) for r in raws],
                                                     [len(r) for r in raws]))
    return {"codec": info.compression, "filters": filters,
            "block_sizes": sizes if n > 1 else None}


def assert_shapes(ssts: list[Path], want: dict[str, Any]) -> None:
    """Every SST carries ``want``; an SST of one data block shows no block size (any size
    fits it), but at least one SST of the run shows exactly ``want``'s."""
    shapes = [shape(p) for p in ssts]
    assert [{**s, "block_sizes": None} for s in shapes] == [
        {**want, "block_sizes": None}] * len(shapes)
    sizes = [s["block_sizes"] for s in shapes if s["block_sizes"] is not None]
    assert sizes and all(got == want["block_sizes"] for got in sizes), sizes


def filter_metrics(recorder: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for m in recorder.snapshot():
        if m.name.startswith("slatedb.db.sst_filter_"):
            kind = ",".join(f"{lab.value}" for lab in m.labels)
            out[f"{m.name.rsplit('.', 1)[1]}[{kind}]"] = int(m.value[0])
    return out


def prefix_scan_with_metrics(root: Path, prefix: bytes) -> tuple[list[tuple[bytes, bytes]],
                                                                 dict[str, int]]:
    from slatedb.uniffi import DbReaderBuilder, DefaultMetricsRecorder

    recorder = DefaultMetricsRecorder()
    builder = DbReaderBuilder("db", local_store(root))
    builder.with_filter_policies(prefix_policies())
    builder.with_metrics_recorder(recorder)
    reader = run(builder.build())
    try:
        rows = drain(run(reader.scan_prefix(prefix, key_range())))
        return rows, filter_metrics(recorder)
    finally:
        run(reader.shutdown())


NEGATIVE = "sst_filter_negative_count[prefix]"


@pytest.mark.parametrize("path", ["native", "pure-python"])
def test_prefix_filters_survive_our_compaction_and_the_official_reader_uses_them(
    tmp_path: Path, path: str
) -> None:
    root = tmp_path / "ours"
    model = write_db(root, codec="Zstd", block_size=1024, policies=prefix_policies())
    official = copy_db(root, "official")
    dropped = copy_db(root, "dropped")
    if path == "native":
        report = compact_here(root).to_dict()
    else:  # the extractor as Python code, on keys decoded from each finished block
        [report] = compact_in_pure_python_child(root, "tests.interop.prefixes:fixed4")[
            "databases"]
    opts = report["sst_options"]
    assert [(p["name"], p["bits_per_key"]) for p in opts["filter_policies"]] == [
        ("_bf:p=fixed4:wh=0", 10), ("_bf", 7)]
    assert (opts["compression_codec"], opts["block_size"]) == ("zstd", 1024)
    compact_officially(official, prefix_policies(), "Zstd", 1024)
    compact_here(dropped, filter_policies="_bf@7")  # the negative control: no prefix filter

    ours, theirs = run_ssts(root), run_ssts(official)
    assert len(ours) >= 2
    want = {"codec": CompressionCodec.ZSTD,
            "filters": {"_bf:p=fixed4:wh=0": bloom.num_probes_for(10),
                        "_bf": bloom.num_probes_for(7)},
            "block_sizes": (1024,)}
    assert_shapes(theirs, want)
    assert_shapes(ours, want)
    assert list(shape(ours[0])["filters"]) == list(PREFIX_POLICIES)  # in the policies' order

    with OfficialReader.open(root, "db", filter_policies=prefix_policies()) as r:
        assert r.scan() == model.items()
        assert r.get(b"p004:00004") == model.get(b"p004:00004")
    present, seen = prefix_scan_with_metrics(root, b"p004")
    assert present == model.items(b"p004", b"p005") and len(present) > 20
    absent, seen = prefix_scan_with_metrics(root, b"p005")
    assert absent == [] and seen[NEGATIVE] >= 1, seen
    _, seen = prefix_scan_with_metrics(official, b"p005")
    assert seen[NEGATIVE] >= 1, seen  # the official compactor's run: the same
    absent, seen = prefix_scan_with_metrics(dropped, b"p005")
    assert absent == [] and seen[NEGATIVE] == 0, seen


def test_a_database_without_filters_stays_without(tmp_path: Path) -> None:
    root = tmp_path / "db_root"
    model = write_db(root, codec=None, block_size=4096, policies=[], rows=1500)
    report = compact_here(root)
    assert report.sst_options["filter_policies"] == []
    assert_shapes(run_ssts(root), {"codec": CompressionCodec.NONE, "filters": None,
                                   "block_sizes": (4096,)})
    with OfficialReader.open(root, "db", filter_policies=[]) as r:
        assert r.scan() == model.items()


CODEC_CASES = [(None, 1024), ("Snappy", 65536), ("Zlib", 1024), ("Lz4", 65536),
               ("Zstd", 65536), ("Snappy", 1024)]


@pytest.mark.parametrize(("codec", "block_size"), CODEC_CASES)
def test_outputs_keep_each_codec_and_block_size(tmp_path: Path, codec: str | None,
                                                block_size: int) -> None:
    root = tmp_path / "db_root"
    model = write_db(root, codec=codec, block_size=block_size, policies=None,
                     rows=2000 if block_size > 4096 else 600,
                     value_len=120 if block_size > 4096 else 40)
    official = copy_db(root, "official")
    report = compact_here(root)
    compact_officially(official, None, codec, block_size)
    codec_enum = CompressionCodec[(codec or "none").upper()]
    want = {"codec": codec_enum, "filters": {"_bf": bloom.num_probes_for(10)},
            "block_sizes": (block_size,)}
    assert_shapes(run_ssts(root), want)
    assert_shapes(run_ssts(official), want)
    assert report.sst_options["origin"]["block_size"].startswith("database")
    with OfficialReader.open(root, "db") as r:
        assert r.scan() == model.items()
        probe = [k for k, _ in model.items()[::97]] + [b"p001:00000", b"zz"]
        assert r.get_many(probe) == {k: model.get(k) for k in probe}


def test_set_settings_win_over_the_database(tmp_path: Path) -> None:
    root = tmp_path / "db_root"
    model = write_db(root, codec="Zstd", block_size=1024, policies=None, rows=1500)
    env_set = Settings(sst=SstSettings(compression_codec="lz4", block_size=4096),
                       compaction=CompactionSettings(policy="full", min_range_bytes=1))
    report = run_compaction("db", open_store(f"file://{root}"), settings=env_set,
                            runner=ThreadTaskRunner(1))
    assert report.sst_options["origin"]["compression_codec"] == "set"
    for p in run_ssts(root):
        got = shape(p)
        assert got["codec"] == CompressionCodec.LZ4 and 4096 in (got["block_sizes"] or ())
    with OfficialReader.open(root, "db") as r:
        assert r.scan() == model.items()


def test_a_prefix_filter_whose_extractor_is_not_configured_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "db_root"
    write_db(root, codec=None, block_size=1024, policies=prefix_policies(), l0s=2)
    before = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLATELIB_")}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from slatelib.cli import main; "
         "sys.exit(main(sys.argv[1:]))", "--db", f"file://{root}/db", "compact",
         "--policy", "full"], capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 5, done.stderr
    assert "_bf:p=fixed4:wh=0" in done.stderr and "[sst.prefix_extractors]" in done.stderr
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) == before
    assert EXTRACTOR_ENV  # the fix the message names: see the tests above
