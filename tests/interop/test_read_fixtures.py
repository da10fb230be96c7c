"""slatelib reads every golden fixture exactly as the official 0.17.0 ``DbReader`` does.

Each test works on a copy of the fixtures (``fixture_copy``: the official reader writes
to the databases it opens). For every fixture: slatelib's full scan, range scans and gets
of every live, deleted and expired key plus absent keys equal the official reader's, and
both equal ``NAME.expected.json``. The ``slate`` CLI (``scan``, ``get``) is checked the
same way on several fixtures, in-process through :func:`slatelib.cli.main`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from slatelib import DbReader
from slatelib.cli import main as slate
from tests.conftest import FIXTURE_NAMES, GOLDEN_DIR, load_expected
from tests.interop.compare import assert_reads_match, first_difference
from tests.interop.official import Concat, FixedPrefix, OfficialReader

pytestmark = pytest.mark.interop

GOLDEN_FIXTURES = sorted(p.name.removesuffix(".expected.json")
                         for p in GOLDEN_DIR.glob("*.expected.json"))


def _official_kwargs(expected: dict[str, Any]) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    if expected.get("merge_operator"):
        kwargs["merge_operator"] = Concat()
    if expected.get("segment_extractor"):
        kwargs["segment_extractor"] = FixedPrefix(4)
    return kwargs


def _merge_operator(expected: dict[str, Any]) -> str | None:
    return "concat" if expected.get("merge_operator") else None


def _live(expected: dict[str, Any]) -> dict[bytes, bytes]:
    return {k.encode(): v.encode() for k, v in expected["live"].items()}


def _probe_keys(expected: dict[str, Any]) -> list[bytes]:
    """Live, deleted and expired keys, plus absent neighbours of each and edge keys."""
    written = [k.encode() for k in [*expected["live"], *expected["deleted"], *expected["expired"]]]
    absent = {b"\x00", b"\xff", b"key:", b"zzzz", b"a"}
    for k in written[::7]:
        absent |= {k + b"\x00", k[:-1], k + b"~"}
    return sorted(set(written) | (absent - set(written)))


def _bounds(expected: dict[str, Any]) -> list[tuple[bytes | None, bytes | None]]:
    keys = sorted(k.encode() for k in expected["live"])
    mid, q1, q3 = keys[len(keys) // 2], keys[len(keys) // 4], keys[3 * len(keys) // 4]
    return [(None, None), (None, mid), (mid, None), (q1, q3), (q1, q1 + b"\x00"),
            (keys[0], keys[-1]), (b"\x00", b"\x01"), (keys[-1] + b"\x00", None)]


def test_every_fixture_folder_is_covered() -> None:
    assert GOLDEN_FIXTURES == sorted(FIXTURE_NAMES)
    for name in GOLDEN_FIXTURES:
        assert (GOLDEN_DIR / name / "manifest").is_dir(), name


@pytest.mark.parametrize("fixture", GOLDEN_FIXTURES)
def test_fixture_scan_and_gets_equal_official_and_expected(fixture_copy: Path, fixture: str) -> None:
    expected = load_expected(fixture)
    keys = _probe_keys(expected)
    reads = assert_reads_match(
        fixture_copy, f"file://{fixture_copy}", fixture, keys, _bounds(expected),
        expected=_live(expected), merge_operator=_merge_operator(expected),
        official_kwargs=_official_kwargs(expected),
    )
    for k in [*expected["deleted"], *expected["expired"]]:
        assert reads.gets[k.encode()] is None, k


def test_ttl_fixture_returns_expired_wal_row_like_official(fixture_copy: Path) -> None:
    """0.17.0 does not apply TTL at read time: ``ttl:wal:dead`` expired in 2000 but is
    still only a WAL row, so both readers return it."""
    expected = load_expected("ttl_merge")
    assert expected["expired_but_readable"] == ["ttl:wal:dead"]
    with DbReader.open("ttl_merge", f"file://{fixture_copy}", merge_operator="concat") as r:
        assert r.get(b"ttl:wal:dead") == b"WD"
        assert r.get(b"ttl:dead:00") is None
        assert r.get(b"m:nobase") == b"xy"
    with OfficialReader.open(fixture_copy, "ttl_merge", merge_operator=Concat()) as o:
        assert o.get(b"ttl:wal:dead") == b"WD"


def _state_at_fixture_ckpt() -> dict[bytes, bytes]:
    """ckpt_src as pinned by checkpoint ``fixture-ckpt``: ckpt_clone's expected state
    without the clone's own writes (README: clone:*, key:0001 = clone-1, delete key:0002)."""
    live = _live(load_expected("ckpt_clone"))
    live = {k: v for k, v in live.items() if not k.startswith(b"clone:")}
    live[b"key:0001"], live[b"key:0002"] = b"b-1", b"b-2"
    return live


@pytest.mark.parametrize("name", ["fixture-ckpt", "fixture-ckpt-flushed"])
def test_reading_a_checkpoint_equals_official_checkpoint_reader(
    fixture_copy: Path, name: str
) -> None:
    cp = next(c for c in load_expected("ckpt_src")["checkpoints"] if c["name"] == name)
    keys = _probe_keys(load_expected("ckpt_src"))
    with OfficialReader.open(fixture_copy, "ckpt_src", checkpoint=cp["id"]) as o:
        theirs = o.scan()
        their_gets = o.get_many(keys)
    with DbReader.open("ckpt_src", f"file://{fixture_copy}", checkpoint=cp["id"]) as r:
        ours = list(r.scan())
        our_gets = {k: r.get(k) for k in keys}
        assert r.manifest_id == cp["manifest_id"]
    assert not first_difference(ours, theirs), first_difference(ours, theirs)
    assert our_gets == their_gets
    if name == "fixture-ckpt":
        assert dict(ours) == _state_at_fixture_ckpt()
    else:  # everything up to c-* was flushed; after-both (key:0070) came later
        assert b"key:0070" not in dict(ours) and dict(ours)[b"key:0060"] == b"c-60"


# ------------------------------------------------------------------ the slate CLI
def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = slate(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _scan_lines(out: str) -> list[tuple[bytes, bytes]]:
    rows = [json.loads(line) for line in out.splitlines()]
    assert all(set(r) == {"key", "value"} for r in rows)
    return [(bytes.fromhex(r["key"]), bytes.fromhex(r["value"])) for r in rows]


CLI_FIXTURES = ["basic", "codec_zstd", "ckpt_clone", "ckpt_clone_proj", "ttl_merge", "segmented"]


@pytest.mark.parametrize("fixture", CLI_FIXTURES)
def test_slate_scan_equals_official_scan(
    fixture_copy: Path, fixture: str, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = load_expected(fixture)
    with OfficialReader.open(fixture_copy, fixture, **_official_kwargs(expected)) as o:
        theirs = o.scan()
        lo, hi = b"key:0010", b"key:0040"
        their_range = o.scan(lo, hi)
    merge = ["--merge-operator", "concat"] if expected.get("merge_operator") else []
    # --db URL form for most, --store/--path for the clones (their sources resolve in the store)
    if fixture.startswith("ckpt_"):
        where = ["--store", f"file://{fixture_copy}", "--path", fixture]
    else:
        where = ["--db", f"file://{fixture_copy}/{fixture}"]
    code, out, err = _cli(capsys, *where, *merge, "scan")
    assert code == 0, err
    ours = _scan_lines(out)
    assert not first_difference(ours, theirs), first_difference(ours, theirs)
    assert dict(ours) == _live(expected)
    code, out, err = _cli(capsys, *where, *merge, "scan", "--start", lo.hex(), "--end", hi.hex())
    assert code == 0, err
    assert _scan_lines(out) == their_range


@pytest.mark.parametrize("fixture", ["basic", "ckpt_clone", "ttl_merge"])
def test_slate_get_equals_official_get(
    fixture_copy: Path, fixture: str, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = load_expected(fixture)
    keys = sorted(expected["live"])[:3] + sorted(expected["live"])[-3:] + expected["deleted"][:3]
    keys.append("no-such-key")
    merge = ["--merge-operator", "concat"] if expected.get("merge_operator") else []
    with OfficialReader.open(fixture_copy, fixture, **_official_kwargs(expected)) as o:
        theirs = {k: o.get(k.encode()) for k in keys}
    for k in keys:
        code, out, err = _cli(capsys, "--store", f"file://{fixture_copy}", "--path", fixture,
                              *merge, "get", k.encode().hex())
        assert code == 0, err
        doc = json.loads(out)
        assert doc["key"] == k.encode().hex()
        got = None if doc["value"] is None else bytes.fromhex(doc["value"])
        assert got == theirs[k], k
        assert got == (expected["live"][k].encode() if k in expected["live"] else None)
