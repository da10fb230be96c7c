"""The read path and bulk load against S3 (the tests' moto server on 127.0.0.1).

slatelib reaches the server through ``s3://bucket`` URLs with the endpoint and the
credentials in ``SLATELIB_S3_*`` environment variables (as a deployment would), both
through the Python API and through the ``slate`` CLI (``--store s3://bucket --path ...``
and ``--db s3://bucket/...``). The official 0.17.0 package is pointed at the same server
(its ObjectStoreBuilder takes ``endpoint`` and ``allow_http``) and must read what slatelib
wrote there, and agree with slatelib on an uploaded copy of the golden fixtures.
"""

from __future__ import annotations

import json
import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from slatedb.uniffi import ObjectStore as OfficialObjectStore

from slatelib import DbReader, bulk_load
from slatelib.cli import main as slate
from slatelib.config import Settings, SstSettings
from slatelib.objstore import ObjectStore, open_store
from tests.conftest import FIXTURE_NAMES, GOLDEN_DIR, load_expected
from tests.interop.compare import assert_reads_match
from tests.interop.official import Concat, FixedPrefix, OfficialReader, s3_store
from tests.s3_server import ACCESS_KEY, REGION, SECRET_KEY, S3Bucket

pytestmark = pytest.mark.integration


@pytest.fixture
def s3_env(monkeypatch: pytest.MonkeyPatch, s3_bucket: S3Bucket) -> S3Bucket:
    """``s3://<bucket>`` URLs work without options: endpoint and credentials come from the
    environment (slatelib.objstore.backends)."""
    monkeypatch.setenv("SLATELIB_S3_ENDPOINT", s3_bucket.endpoint)
    monkeypatch.setenv("SLATELIB_S3_REGION", REGION)
    monkeypatch.setenv("SLATELIB_S3_ALLOW_HTTP", "true")
    monkeypatch.setenv("SLATELIB_S3_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("SLATELIB_S3_SECRET_ACCESS_KEY", SECRET_KEY)
    return s3_bucket


def _official(bucket: S3Bucket) -> OfficialObjectStore:
    return s3_store(bucket.name, endpoint=bucket.endpoint, region=REGION,
                    access_key_id=ACCESS_KEY, secret_access_key=SECRET_KEY)


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = slate(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _pairs(seed: int, n: int) -> dict[bytes, bytes]:
    rng = random.Random(seed)
    out: dict[bytes, bytes] = {b"\x00": b"", b"\xff": rng.randbytes(70_000)}
    while len(out) < n:
        k = rng.randbytes(rng.randrange(1, 24))
        out[k] = rng.randbytes(rng.choice((0, 3, 40, 1500)))
    return out


def upload_tree(store: ObjectStore, local_root: Path, names: list[str], prefix: str = "") -> int:
    """Copy the databases ``names`` under ``local_root`` to ``store`` (keys relative to
    ``local_root``, under ``prefix``). Returns the number of objects."""
    files = [p for n in names for p in sorted((local_root / n).rglob("*")) if p.is_file()]

    def put(p: Path) -> None:
        rel = p.relative_to(local_root).as_posix()
        store.put(f"{prefix}/{rel}" if prefix else rel, p.read_bytes())

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, files))
    return len(files)


# ------------------------------------------------------------------ bulk load into S3
def test_bulk_load_into_s3_is_read_by_db_reader_cli_and_official(
    s3_env: S3Bucket, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = _pairs(1, 800)
    items = list(expected.items())
    random.Random(2).shuffle(items)
    settings = Settings(sst=SstSettings(block_size=1024, compression_codec="zstd",
                                        min_filter_keys=1))
    report = bulk_load("data/db", "s3://" + s3_env.name, items, settings=settings,
                       target_sst_size=16 * 1024)
    assert report.rows == len(expected) and len(report.ssts) >= 4

    with DbReader.open("data/db", f"s3://{s3_env.name}") as r:
        assert list(r.scan()) == sorted(expected.items())
        assert all(r.get(k) == v for k, v in expected.items())
        assert r.get(b"\x00absent") is None

    code, out, err = _cli(capsys, "--store", f"s3://{s3_env.name}", "--path", "data/db", "scan")
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(bytes.fromhex(r["key"]), bytes.fromhex(r["value"])) for r in rows] == sorted(
        expected.items())
    key = sorted(expected)[5]
    code, out, err = _cli(capsys, "--db", f"s3://{s3_env.name}/data/db", "get", key.hex())
    assert code == 0, err
    assert json.loads(out) == {"key": key.hex(), "value": expected[key].hex()}

    # the official package, pointed at the same moto server, reads every key
    with OfficialReader.open(_official(s3_env), "data/db") as o:
        assert o.scan() == sorted(expected.items())
        assert all(o.get(k) == v for k, v in list(expected.items())[::13])


def test_slate_load_into_s3_then_read_back(
    s3_env: S3Bucket, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = _pairs(3, 300)
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps({"key": k.hex(), "value": v.hex()}) + "\n"
                           for k, v in expected.items()))
    code, out, err = _cli(capsys, "--db", f"s3://{s3_env.name}/loaded", "load", str(src),
                          "--sst-size", "4KiB")
    assert code == 0, err
    assert json.loads(out)["rows"] == len(expected)
    code, out, err = _cli(capsys, "--db", f"s3://{s3_env.name}/loaded", "scan")
    assert code == 0, err
    assert [bytes.fromhex(json.loads(line)["key"]) for line in out.splitlines()] == sorted(expected)


# ------------------------------------------------------------------ fixtures on S3
@pytest.fixture
def s3_fixtures(s3_env: S3Bucket) -> S3Bucket:
    """Every golden fixture uploaded to the bucket root (clones next to their source)."""
    n = upload_tree(s3_env.open(), GOLDEN_DIR, FIXTURE_NAMES)
    assert n > 100
    return s3_env


@pytest.mark.parametrize("fixture", ["basic", "codec_lz4", "ckpt_clone", "ckpt_clone_proj",
                                     "ttl_merge", "segmented", "gc_collected"])
def test_fixture_on_s3_reads_like_official_and_expected(s3_fixtures: S3Bucket, fixture: str) -> None:
    expected = load_expected(fixture)
    live = {k.encode(): v.encode() for k, v in expected["live"].items()}
    keys = sorted(set(live) | {k.encode() for k in expected["deleted"]} | {b"zz", b"\x00"})
    official_kwargs: dict[str, object] = {}
    merge = None
    if expected.get("merge_operator"):
        official_kwargs["merge_operator"], merge = Concat(), "concat"
    if expected.get("segment_extractor"):
        official_kwargs["segment_extractor"] = FixedPrefix(4)
    mid = sorted(live)[len(live) // 2]
    assert_reads_match(
        _official(s3_fixtures), f"s3://{s3_fixtures.name}", fixture, keys,
        [(None, None), (None, mid), (mid, None)], expected=live, merge_operator=merge,
        official_kwargs=official_kwargs,
    )


def test_fixtures_under_a_bucket_prefix_resolve_clone_sources_in_that_prefix(
    s3_env: S3Bucket, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store rooted at ``s3://bucket/golden``: ckpt_clone's external SSTs live at
    ``golden/ckpt_src/compacted/...`` and must be found there."""
    upload_tree(s3_env.open(), GOLDEN_DIR, ["ckpt_src", "ckpt_clone", "ckpt_clone_proj"],
                prefix="golden")
    store = open_store(f"s3://{s3_env.name}/golden")
    for name in ("ckpt_clone", "ckpt_clone_proj"):
        live = {k.encode(): v.encode() for k, v in load_expected(name)["live"].items()}
        with DbReader.open(name, store) as r:
            assert list(r.scan()) == sorted(live.items())
        code, out, err = _cli(capsys, "--store", f"s3://{s3_env.name}/golden", "--path", name,
                              "scan")
        assert code == 0, err
        assert len(out.splitlines()) == len(live)
