"""The read path on damaged or hostile input: typed errors that name what is broken.

- a flipped byte in a data block (L0, sorted run, compressed or not, WAL) gives a
  ``ChecksumMismatchError`` naming the object and the block, through ``DbReader.get``,
  ``DbReader.scan`` and ``slate scan`` (exit code 5, message on stderr);
- a flipped byte in an SST index names the index;
- a truncated latest manifest gives ``CorruptObjectError``, and the reader does NOT fall
  back to the older valid manifest that is still there;
- an SST referenced by the manifest but missing gives ``SstMissingError`` with its path;
- ``..``, ``//`` and other hostile database paths are refused (``InvalidArgumentError``,
  CLI exit code 2) before anything is read or written; a hostile ``external_dbs`` path in a
  manifest is a ``DataError``;
- transient storage failures under a ``RetryingObjectStore`` are retried transparently.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from slatelib import (
    ChecksumMismatchError,
    CorruptObjectError,
    DataError,
    DbReader,
    InvalidArgumentError,
    SstMissingError,
    UnavailableError,
    bulk_load,
)
from slatelib.cli import main as slate
from slatelib.core.manifest import SstHandle
from slatelib.core.row import Row
from slatelib.format.manifest_codec import decode_manifest, encode_manifest
from slatelib.format.sst import block_range, parse_sst
from slatelib.objstore import RetryingObjectStore, open_raw_store, open_store
from slatelib.paths import DbPaths
from slatelib.store.manifest_store import ManifestStore
from slatelib.store.wal_store import WalStore
from slatelib.testing.faulty import FlakyObjectStore
from tests.conftest import load_expected

pytestmark = pytest.mark.integration

EXIT_USAGE = 2
EXIT_DATA = 5


def _url(root: Path) -> str:
    return f"file://{root}"


def _live(name: str) -> dict[bytes, bytes]:
    return {k.encode(): v.encode() for k, v in load_expected(name)["live"].items()}


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = slate(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _tree(root: Path) -> dict[str, int]:
    """Every file under ``root`` with its size (to prove nothing was touched)."""
    return {str(p.relative_to(root)): p.stat().st_size for p in sorted(root.rglob("*"))
            if p.is_file()}


def _sst(root: Path, db: str, where: str) -> tuple[str, SstHandle]:
    """(object path, handle) of the newest L0 SST or of the first sorted-run SST."""
    m = ManifestStore(open_store(_url(root)), db).read_latest().value
    view = m.l0[0] if where == "l0" else m.compacted[0].views[0]
    handle = m.sst(view.sst_id)
    return DbPaths(db).compacted(handle.id), handle


def _visible_key_in_block(
    root: Path, db: str, path: str, handle: SstHandle, live: dict[bytes, bytes]
) -> tuple[int, bytes]:
    """A block of the SST and a key in it whose visible value comes from that block (so a
    point read has to decode it)."""
    parsed = parse_sst((root / path).read_bytes(), info=handle.info,
                       format_version=handle.format_version)
    for block in reversed(range(len(parsed.index.offsets))):
        rows: list[Row] = parsed.block_rows(block)
        for row in rows:
            if row[2] == 0 and live.get(row[0]) == row[3]:
                return block, row[0]
    raise AssertionError(f"no visible key in {path}")


def _flip(file: Path, offset: int) -> None:
    data = bytearray(file.read_bytes())
    data[offset] ^= 0x5A
    file.write_bytes(bytes(data))


# ------------------------------------------------------------------ flipped bytes
@pytest.mark.parametrize(("db", "where"), [("basic", "sorted_run"), ("basic", "l0"),
                                           ("codec_zstd", "sorted_run"), ("codec_snappy", "l0")])
def test_flipped_byte_in_a_data_block_names_object_and_block(
    fixture_copy: Path, capsys: pytest.CaptureFixture[str], db: str, where: str
) -> None:
    path, handle = _sst(fixture_copy, db, where)
    block, key = _visible_key_in_block(fixture_copy, db, path, handle, _live(db))
    parsed = parse_sst((fixture_copy / path).read_bytes(), info=handle.info,
                       format_version=handle.format_version)
    start, end = block_range(parsed.index, handle.info, block)
    _flip(fixture_copy / path, (start + end) // 2)

    with DbReader.open(db, _url(fixture_copy)) as r:
        with pytest.raises(ChecksumMismatchError) as info:
            r.get(key)
        assert (info.value.path, info.value.block, info.value.region) == (path, block, "block")
        assert path in str(info.value) and f"block {block}" in str(info.value)
    with DbReader.open(db, _url(fixture_copy)) as r, pytest.raises(ChecksumMismatchError) as info:
        list(r.scan())
    assert path in str(info.value) and f"block {block}" in str(info.value)

    code, out, err = _cli(capsys, "--db", f"{_url(fixture_copy)}/{db}", "scan")
    assert code == EXIT_DATA
    assert path in err and f"block {block}" in err and "checksum" in err
    # the blocks before the damaged one were still streamed out
    assert all(line.startswith('{"key": ') for line in out.splitlines())


def test_slate_console_script_exits_non_zero_with_the_checksum_error_on_stderr(
    fixture_copy: Path,
) -> None:
    """The installed ``slate`` entry point, as a separate process."""
    path, handle = _sst(fixture_copy, "basic", "sorted_run")
    block, _ = _visible_key_in_block(fixture_copy, "basic", path, handle, _live("basic"))
    parsed = parse_sst((fixture_copy / path).read_bytes(), info=handle.info,
                       format_version=handle.format_version)
    start, end = block_range(parsed.index, handle.info, block)
    _flip(fixture_copy / path, start + 1)
    slate_bin = Path(sys.executable).parent / "slate"
    proc = subprocess.run([str(slate_bin), "--db", f"{_url(fixture_copy)}/basic", "scan"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == EXIT_DATA
    assert path in proc.stderr and f"block {block}" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("region", ["index", "filter"])
def test_flipped_byte_in_an_index_or_filter_names_that_region(
    fixture_copy: Path, capsys: pytest.CaptureFixture[str], region: str
) -> None:
    path, handle = _sst(fixture_copy, "basic", "sorted_run")
    _, key = _visible_key_in_block(fixture_copy, "basic", path, handle, _live("basic"))
    info = handle.info
    offset, length = ((info.index_offset, info.index_len) if region == "index"
                      else (info.filter_offset, info.filter_len))
    assert length > 0
    _flip(fixture_copy / path, offset + length // 2)
    with DbReader.open("basic", _url(fixture_copy)) as r:
        with pytest.raises(ChecksumMismatchError) as err_info:
            r.get(key)
    assert err_info.value.region == region and err_info.value.path == path
    assert re.search(rf"{re.escape(path)}.*{region}", str(err_info.value))
    code, _, err = _cli(capsys, "--db", f"{_url(fixture_copy)}/basic", "get", key.hex())
    assert code == EXIT_DATA and path in err and region in err


def test_flipped_byte_in_a_wal_sst_names_the_wal_object(fixture_copy: Path) -> None:
    store = open_store(_url(fixture_copy))
    m = ManifestStore(store, "basic").read_latest().value
    wal = WalStore(store, "basic")
    last = wal.last_wal_id(m.replay_after_wal_id)
    data_wal = next(i for i in range(last, m.replay_after_wal_id, -1)
                    if (fixture_copy / wal.path(i)).stat().st_size > 0)
    _flip(fixture_copy / wal.path(data_wal), 20)
    with pytest.raises(ChecksumMismatchError) as info:
        DbReader.open("basic", _url(fixture_copy))
    assert info.value.path == wal.path(data_wal) and wal.path(data_wal) in str(info.value)
    assert "block 0" in str(info.value)


# ------------------------------------------------------------------ manifests
@pytest.mark.parametrize("keep", [0, 1, 4, 8, 0.5, -1], ids=lambda k: f"keep{k}")
def test_truncated_latest_manifest_is_a_typed_error_without_fallback(
    fixture_copy: Path, capsys: pytest.CaptureFixture[str], keep: float
) -> None:
    mdir = fixture_copy / "basic" / "manifest"
    latest, older = sorted(mdir.iterdir())[-1], sorted(mdir.iterdir())[-2]
    data = latest.read_bytes()
    n = int(len(data) * keep) if isinstance(keep, float) else (keep % len(data))
    latest.write_bytes(data[:n])
    # an older, valid manifest is right there: a reader that fell back would succeed
    assert decode_manifest(older.read_bytes()).l0
    with pytest.raises(CorruptObjectError) as info:
        DbReader.open("basic", _url(fixture_copy))
    assert f"basic/manifest/{latest.name}" in str(info.value)
    assert info.value.path == f"basic/manifest/{latest.name}"
    code, out, err = _cli(capsys, "--db", f"{_url(fixture_copy)}/basic", "scan")
    assert code == EXIT_DATA and out == "" and latest.name in err
    assert latest.stat().st_size == n  # the reader did not rewrite anything


def test_missing_sst_is_a_typed_error_naming_its_path(fixture_copy: Path) -> None:
    path, handle = _sst(fixture_copy, "basic", "sorted_run")
    _, key = _visible_key_in_block(fixture_copy, "basic", path, handle, _live("basic"))
    os.remove(fixture_copy / path)
    with DbReader.open("basic", _url(fixture_copy)) as r:
        with pytest.raises(SstMissingError) as info:
            r.get(key)
        assert info.value.path == path and path in str(info.value)
        with pytest.raises(SstMissingError):
            list(r.scan())


def test_missing_external_sst_of_a_clone_names_the_source_path(fixture_copy: Path) -> None:
    store = open_store(_url(fixture_copy))
    m = ManifestStore(store, "ckpt_clone").read_latest().value
    ext = m.external_dbs[0]
    assert ext.path == "ckpt_src"
    for sid in ext.sst_ids:
        os.remove(fixture_copy / DbPaths("ckpt_src").compacted(sid))
    with DbReader.open("ckpt_clone", store) as r, pytest.raises(SstMissingError) as info:
        list(r.scan())
    assert info.value.path is not None and info.value.path.startswith("ckpt_src/compacted/")
    assert "source database 'ckpt_src'" in str(info.value) and store.url in str(info.value)


# ------------------------------------------------------------------ hostile paths
HOSTILE_PATHS = ["..", "../basic", "basic/..", "a/../../basic", "a//basic", "./basic",
                 "basic/.", "a\\..\\basic", "ba\x00sic", "a/b\nc"]


@pytest.mark.parametrize("path", HOSTILE_PATHS)
def test_hostile_db_path_is_refused_before_touching_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], path: str
) -> None:
    store_dir = tmp_path / "store"
    (store_dir / "basic").mkdir(parents=True)
    (store_dir / "basic" / "canary").write_bytes(b"x")
    before = _tree(tmp_path)
    with pytest.raises(InvalidArgumentError):
        DbReader.open(path, _url(store_dir))
    with pytest.raises(InvalidArgumentError):
        bulk_load(path, _url(store_dir), [(b"k", b"v")])
    # refused before the store is even opened (a file:// store creates its root folder)
    with pytest.raises(InvalidArgumentError):
        DbReader.open(path, _url(tmp_path / "never-created"))
    with pytest.raises(InvalidArgumentError):
        bulk_load(path, _url(tmp_path / "never-created"), [(b"k", b"v")])
    for argv in (["--store", _url(store_dir), "--path", path, "scan"],
                 ["--store", _url(store_dir), "--path", path, "load", "-"]):
        code, _, err = _cli(capsys, *argv)
        assert code == EXIT_USAGE and "error" in err
    code, _, err = _cli(capsys, "--store", _url(tmp_path / "never-created"), "--path", path,
                        "scan")
    assert code == EXIT_USAGE
    if "\x00" not in path and "\n" not in path:
        code, _, err = _cli(capsys, "--db", f"{_url(store_dir)}/{path}", "scan")
        assert code == EXIT_USAGE, err
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("url", ["file:///tmp/../etc", "file:///a//b", "s3://bucket/../x",
                                 "s3://bucket/a//db", "memory:///..", "file://host/db",
                                 "file:///tmp/x/./db", "s3://bucket/db/.."])
def test_hostile_db_url_is_refused(capsys: pytest.CaptureFixture[str], url: str) -> None:
    code, out, err = _cli(capsys, "--db", url, "scan")
    assert code == EXIT_USAGE and out == "" and "error" in err


@pytest.mark.parametrize("ext_path", ["..", "../ckpt_src", "ckpt_src/../../etc", "a//ckpt_src",
                                      "ckpt_src/."])
def test_hostile_external_db_path_in_a_manifest_is_a_data_error(
    fixture_copy: Path, capsys: pytest.CaptureFixture[str], ext_path: str
) -> None:
    import dataclasses

    store = open_store(_url(fixture_copy))
    ms = ManifestStore(store, "ckpt_clone")
    latest = ms.read_latest()
    m = latest.value
    hostile = dataclasses.replace(
        m, external_dbs=tuple(dataclasses.replace(e, path=ext_path) for e in m.external_dbs))
    try:
        data = encode_manifest(hostile)
    except InvalidArgumentError:
        pytest.fail("the encoder should write any string; the reader must judge it")
    (fixture_copy / ms.path(latest.id + 1)).write_bytes(data)
    with pytest.raises(DataError) as info:
        with DbReader.open("ckpt_clone", store) as r:
            list(r.scan())
    assert "external" in str(info.value) and repr(ext_path)[1:-1] in str(info.value)
    code, _, err = _cli(capsys, "--store", _url(fixture_copy), "--path", "ckpt_clone", "scan")
    assert code == EXIT_DATA and "external" in err


# ------------------------------------------------------------------ transient faults
def _flaky_fixture_store(root: Path) -> FlakyObjectStore:
    flaky = FlakyObjectStore(open_raw_store(_url(root)))
    flaky.fail_before("list", path="manifest", times=2)
    flaky.fail_before("get", path=".manifest", times=2)
    flaky.fail_after("get", path="wal/", times=2)
    flaky.fail_before("head", path="wal/", times=2)
    flaky.fail_before("get_range", path="compacted/", times=3)
    flaky.fail_after("get_range", path="compacted/", times=2, skip=4)
    return flaky


@pytest.mark.parametrize("db", ["basic", "ckpt_clone", "codec_lz4"])
def test_transient_failures_are_retried_transparently_during_reads(
    fixture_copy: Path, db: str
) -> None:
    flaky = _flaky_fixture_store(fixture_copy)
    sleeps: list[float] = []
    store = RetryingObjectStore(flaky, max_attempts=4, sleep=sleeps.append)
    live = _live(db)
    with DbReader.open(db, store) as r:
        assert list(r.scan()) == sorted(live.items())
        assert all(r.get(k) == v for k, v in live.items())
    fired = {(rule.op, rule.when): rule.fired for rule in flaky.rules}
    assert fired[("list", "before")] == 2 and fired[("get", "before")] == 2
    assert fired[("get_range", "before")] == 3
    assert len(sleeps) == sum(rule.fired for rule in flaky.rules) >= 9


def test_transient_failures_surface_as_unavailable_without_retries(fixture_copy: Path) -> None:
    flaky = _flaky_fixture_store(fixture_copy)
    with pytest.raises(UnavailableError):
        DbReader.open("basic", flaky)
