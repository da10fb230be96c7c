"""Databases and files written by slatelib, read (and written on) by official 0.17.0.

(a) ``bulk_load`` (and ``slate load``) create a database that the official ``DbReader``
    reads with every key and nothing else, and that an official ``Db`` opens, writes to,
    flushes and compacts.
(b) An L0 SST plus a new manifest written by slatelib into a database the official package
    wrote (rows in L0, sorted run and WAL): the official reader sees every old and new key,
    and an official writer continues from there.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Sequence
from pathlib import Path

import pytest

from slatelib import DbReader, InvalidDbStateError, bulk_load
from slatelib.cli import main as slate
from slatelib.config import Settings, SstSettings
from slatelib.core.manifest import Manifest, SstHandle, SstView
from slatelib.core.row import MERGE, TOMBSTONE, VALUE, Row, compacted_order_key
from slatelib.format.compression import parse_codec
from slatelib.format.sst import SstWriter, SstWriterOptions
from slatelib.ids import UlidGenerator
from slatelib.objstore import open_store
from slatelib.reader import replay_wal
from slatelib.store.manifest_store import ManifestStore
from slatelib.store.sequenced import Versioned
from slatelib.store.table_store import TableStore
from slatelib.store.wal_store import WalStore
from slatelib.txn import update_versioned
from tests.interop.compare import assert_reads_match, first_difference
from tests.interop.official import (
    CODECS,
    Concat,
    DbSettings,
    Delete,
    Merge,
    Model,
    OfficialAdmin,
    OfficialDb,
    OfficialReader,
    Put,
)
from tests.interop.workload import EDGE_KEYS, absent_keys, key_pool, random_bounds, random_ops

pytestmark = pytest.mark.interop

BLOCK = 1024


def _settings(codec: str | None, *, min_filter_keys: int = 1) -> Settings:
    return Settings(sst=SstSettings(block_size=BLOCK, compression_codec=codec or "none",
                                    min_filter_keys=min_filter_keys))


def _pairs(rng: random.Random, n: int) -> tuple[list[tuple[bytes, bytes]], dict[bytes, bytes]]:
    """Unsorted pairs with duplicates (the last one wins), empty values, values longer than
    a block and one longer than 64 KiB; and the state they describe."""
    keys = key_pool(rng, n)
    pairs: list[tuple[bytes, bytes]] = []
    for k in keys:
        r = rng.random()
        size = 0 if r < 0.15 else rng.randrange(1, 80) if r < 0.9 else rng.randrange(BLOCK, 4 * BLOCK)
        pairs.append((k, rng.randbytes(size)))
    pairs.append((keys[0], rng.randbytes(70_000)))
    dups = [(k, rng.randbytes(rng.randrange(0, 30))) for k in rng.sample(keys, n // 10)]
    pairs += dups
    rng.shuffle(pairs)
    expected: dict[bytes, bytes] = {}
    for k, v in pairs:
        expected[k] = v
    return pairs, expected


def _official_reads_exactly(root: Path, path: str, expected: dict[bytes, bytes],
                            rng: random.Random, **kwargs: object) -> None:
    """The official reader returns ``expected`` and nothing else, by scan and by get."""
    with OfficialReader.open(root, path, **kwargs) as r:  # type: ignore[arg-type]
        scan = r.scan()
        assert not first_difference(scan, sorted(expected.items())), \
            first_difference(scan, sorted(expected.items()))
        wrong = [k for k, v in expected.items() if r.get(k) != v]
        assert not wrong, f"{len(wrong)} of {len(expected)} official gets wrong, e.g. {wrong[0]!r}"
        for k in absent_keys(rng, list(expected), 50) + list(EDGE_KEYS):
            if k not in expected:
                assert r.get(k) is None, k


# ------------------------------------------------------------------ (a) bulk load
@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c or "none")
def test_bulk_loaded_db_is_read_by_official_with_every_key(tmp_path: Path, codec: str | None) -> None:
    rng = random.Random(CODECS.index(codec))
    pairs, expected = _pairs(rng, 1500)
    report = bulk_load("db", f"file://{tmp_path}", pairs, settings=_settings(codec),
                       target_sst_size=16 * 1024)
    assert report.rows == len(expected) and report.input_pairs == len(pairs)
    assert len(report.ssts) >= 4
    m = OfficialAdmin(tmp_path, "db").manifest()
    assert [len(sr.sst_views) for sr in m.compacted] == [len(report.ssts)] and not m.l0
    codecs = {v.sst.info.compression_codec for sr in m.compacted for v in sr.sst_views}
    assert {None if c is None else c.name for c in codecs} == {codec and codec.upper()}
    _official_reads_exactly(tmp_path, "db", expected, rng)


@pytest.mark.parametrize("codec", [None, "Zstd"], ids=lambda c: c or "none")
def test_official_db_writes_flushes_and_compacts_on_a_bulk_loaded_db(
    tmp_path: Path, codec: str | None
) -> None:
    rng = random.Random(77 + (codec is None))
    pairs, expected = _pairs(rng, 800)
    bulk_load("db", f"file://{tmp_path}", pairs, settings=_settings(codec),
              target_sst_size=8 * 1024)
    model = Model(expected)
    keys = list(expected)
    st = DbSettings(codec=codec, block_size=BLOCK)
    with OfficialDb.open(tmp_path, "db", st, model=model, merge_operator=Concat()) as db:
        assert db.get(keys[0]) == expected[keys[0]]
        db.write(random_ops(rng, keys + [b"\x00new", b"\xffnew"], 200, block_size=BLOCK,
                            deletes=0.3, merges=0.1))
        db.flush_memtable()
        # the compactor merges our run with the official L0 into run 0
        OfficialAdmin(tmp_path, "db").compact(runs=1)
        db.write(random_ops(rng, keys, 50, block_size=BLOCK, deletes=0.5))
        db.flush_wal()
        assert db.scan() == model.items()
    m = OfficialAdmin(tmp_path, "db").manifest()
    assert [sr.id for sr in m.compacted] == [0] and not m.l0
    probe = sorted(set(model.keys()) | set(absent_keys(rng, model.keys(), 40)))
    assert_reads_match(tmp_path, f"file://{tmp_path}", "db", probe, random_bounds(rng, probe, 10),
                       expected=model.live(), merge_operator="concat",
                       official_kwargs={"merge_operator": Concat()})


def test_bulk_load_refuses_a_db_the_official_package_created(tmp_path: Path) -> None:
    OfficialDb.open(tmp_path, "db").close()
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    with pytest.raises(InvalidDbStateError):
        bulk_load("db", f"file://{tmp_path}", [(b"k", b"v")])
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_slate_load_output_is_read_by_official(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(9)
    pairs, expected = _pairs(rng, 600)
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"key": k.hex(), "value": v.hex()}) + "\n"
                            for k, v in pairs))
    conf = tmp_path / "conf.toml"
    conf.write_text('[sst]\nblock_size = 1024\ncompression_codec = "lz4"\nmin_filter_keys = 1\n')
    store = tmp_path / "store"
    code = slate(["--db", f"file://{store}/loaded", "--conf", str(conf), "load", str(data),
                  "--sst-size", "8KiB"])
    out, err = capsys.readouterr()
    assert code == 0, err
    report = json.loads(out)
    assert report["rows"] == len(expected) and report["input_pairs"] == len(pairs)
    assert len(report["ssts"]) >= 3 and report["manifest_id"] == 1
    m = OfficialAdmin(store, "loaded").manifest()
    assert m.compacted[0].sst_views[0].sst.info.compression_codec.name == "LZ4"
    _official_reads_exactly(store, "loaded", expected, rng)


# ------------------------------------------------- (b) slatelib L0 into an official db
def _official_db_with_wal_rows(root: Path, rng: random.Random, keys: list[bytes]) -> Model:
    """Rows in a sorted run, in L0 and in the WAL (above ``replay_after_wal_id``), including
    tombstones, merge operands and a TTL row."""
    model = Model()
    st = DbSettings(codec="Zstd", block_size=BLOCK)
    with OfficialDb.open(root, "db", st, model=model, merge_operator=Concat()) as db:
        db.write(random_ops(rng, keys, 150, block_size=BLOCK, deletes=0.0))
        db.flush_memtable()
        OfficialAdmin(root, "db").compact(destination=0)
        db.write(random_ops(rng, keys, 100, block_size=BLOCK, merges=0.1))
        db.flush_memtable()
        db.write(random_ops(rng, keys, 60, block_size=BLOCK, deletes=0.3, merges=0.2)
                 + [Put(b"\x01ttl", b"t", expire_at_ms=4102444800000)])
        db.flush_wal()
        db.write(random_ops(rng, keys, 40, block_size=BLOCK, deletes=0.3))
        db.flush_wal()
    return model


def _write_l0_and_manifest(root: Path, new_ops: Sequence[Put | Delete | Merge]) -> Manifest:
    """What a slatelib writer's memtable flush does (format §5.5.4 and §11): one L0 SST with every
    WAL row above ``last_l0_seq`` plus the new rows (one batch at the next seq), uploaded
    under ``compacted/``, then manifest ``latest + 1`` with the view prepended to ``l0``,
    ``last_l0_seq`` raised and the replayed WALs marked as covered."""
    store = open_store(f"file://{root}")
    manifests = ManifestStore(store, "db")
    latest = manifests.read_latest()
    m = latest.value
    wal_table, last_wal = replay_wal(WalStore(store, "db"), m, last_wal_id=None)
    wal_rows = list(wal_table.iter_range(None, None))
    assert wal_rows, "the official database should have unflushed WAL rows"
    assert last_wal > m.replay_after_wal_id
    seq = max(m.last_l0_seq, *(r[1] for r in wal_rows)) + 1
    now_ms = max(m.last_l0_clock_tick, *(r[5] or 0 for r in wal_rows)) + 1
    kinds = {Put: VALUE, Delete: TOMBSTONE, Merge: MERGE}
    new_rows: dict[bytes, Row] = {}
    for op in new_ops:  # one batch: the last op on a key wins, as in a memtable
        value = op.value if isinstance(op, Put) else op.operand if isinstance(op, Merge) else b""
        new_rows[op.key] = (op.key, seq, kinds[type(op)], value, None, now_ms)
    rows = sorted(wal_rows + list(new_rows.values()), key=compacted_order_key)
    writer = SstWriter(SstWriterOptions(block_size=BLOCK, codec=parse_codec("zstd"),
                                        min_filter_keys=1))
    writer.add_rows(rows)
    encoded = writer.finish()
    sst_id = UlidGenerator().new(now_ms)
    TableStore(store, "db").write_sst(sst_id, encoded)
    handle = SstHandle(sst_id, encoded.info, encoded.format_version)

    def flush(cur: Versioned[Manifest]) -> Manifest:
        base = cur.value
        nxt = base.with_trees(l0=[SstView.identity(sst_id), *base.l0], new_ssts=[handle])
        return dataclasses.replace(
            nxt, last_l0_seq=seq, recent_snapshot_min_seq=seq,
            replay_after_wal_id=last_wal, wal_id_last_seen=max(base.wal_id_last_seen, last_wal),
            last_l0_clock_tick=max(base.last_l0_clock_tick, now_ms))

    written = update_versioned(manifests, flush, current=latest, max_attempts=1)
    assert written.id == latest.id + 1
    return written.value


def test_official_reader_sees_old_and_new_keys_after_slatelib_writes_an_l0(tmp_path: Path) -> None:
    rng = random.Random(2024)
    keys = key_pool(rng, 200)
    model = _official_db_with_wal_rows(tmp_path, rng, keys)
    before = OfficialAdmin(tmp_path, "db").manifest()
    assert before.next_wal_sst_id - 1 > before.replay_after_wal_id  # WAL rows to cover
    fresh = [k + b"\x00slatelib" for k in keys[:60]]
    new_ops: list[Put | Delete | Merge] = (
        [Put(k, rng.randbytes(rng.randrange(0, 3 * BLOCK))) for k in fresh]
        + [Put(k, b"overwritten by slatelib") for k in keys[60:90]]
        + [Delete(k) for k in keys[90:110]]
        + [Merge(k, b"+slatelib") for k in keys[110:120]]
    )
    model.apply(new_ops)
    written = _write_l0_and_manifest(tmp_path, new_ops)

    after = OfficialAdmin(tmp_path, "db").manifest()
    assert after.id == before.id + 1
    assert len(after.l0) == len(before.l0) + 1 and after.last_l0_seq == written.last_l0_seq
    assert after.replay_after_wal_id == written.replay_after_wal_id
    probe = sorted(set(model.keys()) | set(absent_keys(rng, model.keys(), 40)))
    assert_reads_match(tmp_path, f"file://{tmp_path}", "db", probe, random_bounds(rng, probe, 10),
                       expected=model.live(), merge_operator="concat",
                       official_kwargs={"merge_operator": Concat()})


def test_official_writer_continues_after_slatelib_l0(tmp_path: Path) -> None:
    """The official writer opens the database after our flush, gives its writes higher
    sequence numbers than ours (its put over our key wins), and compacts our L0."""
    rng = random.Random(2025)
    keys = key_pool(rng, 120)
    model = _official_db_with_wal_rows(tmp_path, rng, keys)
    ours = [Put(k, b"slatelib-" + k) for k in keys[:40]]
    model.apply(ours)
    _write_l0_and_manifest(tmp_path, ours)
    st = DbSettings(codec="Zstd", block_size=BLOCK)
    with OfficialDb.open(tmp_path, "db", st, model=model, merge_operator=Concat()) as db:
        assert db.scan() == model.items()
        db.write([Put(k, b"official-after") for k in keys[:10]] + [Delete(keys[10])])
        db.flush_memtable()
        OfficialAdmin(tmp_path, "db").compact(runs=1)
        assert db.scan() == model.items()
    assert model.get(keys[0]) == b"official-after"
    with DbReader.open("db", f"file://{tmp_path}", merge_operator="concat") as r:
        assert list(r.scan()) == model.items()
    with OfficialReader.open(tmp_path, "db", merge_operator=Concat()) as o:
        assert o.scan() == model.items()
