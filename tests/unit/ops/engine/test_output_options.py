"""A compaction's outputs keep the database's block size, codec and filter policies (read
from its inputs), unless ``[sst]`` sets them; a filter slatelib cannot write refuses the
run before its first write (docs/rfcs/0019-compaction-sst-options.md)."""

from __future__ import annotations

import uuid

import pytest

from slatelib.config import CompactionSettings, Settings, SstSettings
from slatelib.core.filter_policy import FilterPolicySpec, PrefixExtractorSpec
from slatelib.core.manifest import CompressionCodec
from slatelib.core.row import VALUE, Row
from slatelib.errors import UnsupportedFeatureError
from slatelib.format import bloom
from slatelib.format.sst import SstWriterOptions
from slatelib.objstore import ObjectStore, open_store
from slatelib.ops.compaction import ThreadTaskRunner, run_compaction
from slatelib.ops.engine import plan_output_options
from slatelib.store.manifest_store import ManifestStore
from slatelib.store.sst_reader import SstReader
from slatelib.store.table_store import TableStore
from tests.compaction_fixtures import NOW_MS, flush_l0, new_db

ROOT = "db"
FIXED3 = PrefixExtractorSpec("fixed3", fixed=3)
DB_OPTIONS = SstWriterOptions(
    block_size=1024, codec=CompressionCodec.ZSTD, min_filter_keys=10,
    filter_policies=(FilterPolicySpec(7, FIXED3, whole_key=False), FilterPolicySpec(12)))


@pytest.fixture
def store() -> ObjectStore:
    return open_store(f"memory://{uuid.uuid4().hex}/")


def rows(seq: int, n: int = 400) -> list[Row]:
    return [(b"t%02d:%05d" % (i % 7, i), seq, VALUE, b"v" * 20, None, NOW_MS) for i in range(n)]


def l0_db(store: ObjectStore, options: SstWriterOptions = DB_OPTIONS) -> None:
    new_db(store, ROOT)
    for seq in (1, 2, 3):
        flush_l0(store, ROOT, rows(seq), options=options)


def settings(**sst: object) -> Settings:
    return Settings(sst=SstSettings(**sst),  # type: ignore[arg-type]
                    compaction=CompactionSettings(policy="l0", min_range_bytes=1,
                                                  max_sst_size=8 * 1024))


def compact(store: ObjectStore, s: Settings) -> list[SstReader]:
    report = run_compaction(ROOT, store, settings=s, runner=ThreadTaskRunner(2), parallelism=2)
    assert report.status == "committed"
    m = ManifestStore(store, ROOT).read_latest().value
    tables = TableStore(store, ROOT)
    return [SstReader(store, tables.sst_path(v.sst_id, {}), m.sst(v.sst_id))
            for v in m.compacted[0].views]


def filters(reader: SstReader) -> dict[str, tuple[int, int]]:
    return {k: (int.from_bytes(v[:2], "big"), len(v) - 2)
            for k, v in (reader.filter_entries() or {}).items()}


@pytest.mark.parametrize("extractor", ["fixed:3", "tests.unit.format._prefixes:first3"])
@pytest.mark.parametrize("native_pipe", [True, False])
def test_outputs_keep_the_databases_codec_block_size_and_filters(
        store: ObjectStore, extractor: str, native_pipe: bool,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Fixed prefixes hashed by the block writer, or a Python extractor over each finished
    block, under the native pipeline and the row path alike."""
    from slatelib.ops.engine import _execute as execute

    if not native_pipe:
        monkeypatch.setattr(execute, "native_pipeline_for", lambda task: False)
    l0_db(store)
    outs = compact(store, settings(prefix_extractors=(("fixed3", extractor),)))
    assert len(outs) >= 2
    for r in outs:
        rows = [row for i in range(r.num_blocks) for row in r.block_rows(i)]
        prefixes = list(dict.fromkeys(row[0][:3] for row in rows))
        assert (r.filter_entries() or {})["_bf:p=fixed3:wh=0"] == (
            bloom.build_bloom_from_hashes_py([bloom.siphash13_py(p) for p in prefixes], 7))
        assert r.info.compression == CompressionCodec.ZSTD
        got = filters(r)
        assert list(got) == ["_bf:p=fixed3:wh=0", "_bf"]
        assert got["_bf"][0] == bloom.num_probes_for(12)
        assert got["_bf:p=fixed3:wh=0"][0] == bloom.num_probes_for(7)
        raws = r.raw_blocks(0, r.num_blocks - 1)
        assert all(len(b) <= 1024 for b in raws) and max(len(b) for b in raws) > 900


def test_settings_that_are_set_override_the_database(store: ObjectStore) -> None:
    l0_db(store)
    outs = compact(store, settings(block_size=2048, compression_codec="lz4",
                                   filter_policies="_bf@5"))
    for r in outs:
        assert r.info.compression == CompressionCodec.LZ4
        assert list(filters(r)) == ["_bf"] and filters(r)["_bf"][0] == bloom.num_probes_for(5)
        assert max(len(b) for b in r.raw_blocks(0, r.num_blocks)) > 1024


def test_a_prefix_filter_without_its_extractor_refuses_before_any_write(
        store: ObjectStore) -> None:
    l0_db(store)
    before = sorted(o.path for o in store.list(ROOT + "/"))
    with pytest.raises(UnsupportedFeatureError, match=r"_bf:p=fixed3:wh=0.*prefix_extractors"):
        run_compaction(ROOT, store, settings=settings(), runner=ThreadTaskRunner(1))
    assert sorted(o.path for o in store.list(ROOT + "/")) == before


def test_a_database_without_filters_gets_none(store: ObjectStore) -> None:
    l0_db(store, SstWriterOptions(block_size=4096, min_filter_keys=10, filter_policies=()))
    for r in compact(store, settings()):
        assert r.info.filter_len == 0 and r.info.compression == CompressionCodec.NONE


def test_the_plan_is_reported(store: ObjectStore) -> None:
    l0_db(store)
    s = settings(prefix_extractors=(("fixed3", "fixed:3"),))
    m = ManifestStore(store, ROOT).read_latest().value
    from slatelib.core.compaction_plan import PlanOptions, Policy, plan_compaction
    spec = plan_compaction(m, None, PlanOptions(Policy.L0))
    assert spec is not None
    opts, planned = plan_output_options(store, ROOT, m, spec, s)
    assert opts.policies == DB_OPTIONS.policies and opts.block_size == 1024
    d = planned.to_dict()
    assert d["compression_codec"] == "zstd" and d["origin"]["block_size"].startswith("database")
    report = run_compaction(ROOT, store, settings=s, runner=ThreadTaskRunner(1), dry_run=True)
    assert report.sst_options["filter_policies"][0]["name"] == "_bf:p=fixed3:wh=0"
