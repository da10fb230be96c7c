"""Human output: ``--format table|json``, ``--key-format`` and key prefixes, ISO times,
``ls`` totals, the ``sst`` summary and headlines on stderr."""

from __future__ import annotations

import json
import re
import time
import uuid
from pathlib import Path

import pytest

from slatelib.cli import output
from slatelib.cli.app import EXIT_OK, EXIT_USAGE, main
from slatelib.errors import InvalidArgumentError
from slatelib.objstore import open_store
from slatelib.ops.bulk_load import bulk_load
from tests.unit.gc_support import DbWriter, manifest

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def slate(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def db(tmp_path: Path) -> str:
    bulk_load("db", open_store(f"file://{tmp_path}"),
              [(b"user:00000042", b"alice"), (b"\x00\xff", b"\x01\x02"), (b"hex:x", b"v")])
    return f"file://{tmp_path}/db"


@pytest.mark.parametrize("text, default, key", [
    ("user:00000042", "utf8", b"user:00000042"),
    ("hex:757365", "utf8", b"use"),
    ("b64:dXNl", "utf8", b"use"),
    ("base64:dXNl", "hex", b"use"),
    ("utf8:hex:x", "utf8", b"hex:x"),
    ("757365", "hex", b"use"),
    ("dXNl", "base64", b"use"),
    ("", "utf8", b""),
])
def test_parse_key_prefix_wins_then_default(text: str, default: str, key: bytes) -> None:
    assert output.parse_key(text, default=default) == key


@pytest.mark.parametrize("text, default, message", [
    ("hex:zz", "utf8", "not hex digits after 'hex:'"),
    ("zz", "hex", "not hex digits"),
    ("b64:!!", "utf8", "not base64"),
    ("hex:", "utf8", "is empty"),
])
def test_parse_key_refuses_bad_keys(text: str, default: str, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        output.parse_key(text, default=default)


def test_show_bytes_is_text_when_printable_else_hex_and_round_trips() -> None:
    for key in (b"user:1", b"\x00\xff", b"hex:x", "ключ".encode()):
        shown = output.show_bytes(key)
        assert output.parse_key(shown) == key
    assert output.show_bytes(b"user:1") == "user:1"
    assert output.show_bytes(b"\x00\xff") == "hex:00ff"
    assert output.show_bytes(b"hex:x") == "utf8:hex:x"
    assert output.show_bytes(b"ab", "hex") == "6162"
    assert output.show_bytes(b"ab", "base64") == "YWI="
    assert output.show_bytes(b"abcdef", limit=4) == "abc…"


def test_sizes_times_and_format_default() -> None:
    assert [output.fmt_bytes(n) for n in (None, 999, 1000, 1_840_000)] == [
        "-", "999 B", "1.0 kB", "1.8 MB"]
    assert output.iso_s(0) == "1970-01-01T00:00:00Z" and output.iso_s(None) is None
    assert output.iso_ms(1_500) == "1970-01-01T00:00:01Z"
    assert output.resolve_format(None, isatty=True) == "table"
    assert output.resolve_format(None, isatty=False) == "json"
    assert output.resolve_format("json", isatty=True) == "json"


def test_get_key_is_text_by_default_and_positional_stays_hex(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    want = {"key": b"user:00000042".hex(), "value": b"alice".hex()}
    for argv in (["get", "--key", "user:00000042"], ["get", b"user:00000042".hex()],
                 ["get", "--key", "hex:" + b"user:00000042".hex()],
                 ["get", "--key", "dXNlcjowMDAwMDA0Mg==", "--key-format", "base64"]):
        code, out, _ = slate(capsys, "--db", db, *argv)
        got = json.loads(out)
        got.pop("key_base64", None)
        assert code == EXIT_OK and got == want, argv
    code, out, _ = slate(capsys, "--db", db, "get", "--key", "user:00000042",
                         "--key-format", "utf8")
    assert json.loads(out)["key_utf8"] == "user:00000042"
    code, _, err = slate(capsys, "--db", db, "get")
    assert code == EXIT_USAGE and "needs one key" in err


def test_table_format_before_or_after_the_command(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = slate(capsys, "--db", db, "get", "--key", "user:00000042", "--format", "table")
    assert code == EXIT_OK and out == "key:   user:00000042\nvalue: alice\n"
    code, out, _ = slate(capsys, "--format", "table", "--db", db, "scan")
    assert code == EXIT_OK
    assert out.splitlines() == [f"{'hex:00ff':<24}  hex:0102", f"{'utf8:hex:x':<24}  v",
                                f"{'user:00000042':<24}  alice", "(3 key(s))"]
    code, out, _ = slate(capsys, "--db", db, "scan", "--start", "utf8:user", "--key-format",
                         "utf8")
    assert [json.loads(x)["key_utf8"] for x in out.splitlines()] == ["user:00000042"]


def test_checkpoints_show_iso_times(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = slate(capsys, "--db", db, "create-checkpoint", "--lifetime", "1h")
    cp = json.loads(out)
    assert code == EXIT_OK and ISO.match(cp["create_time"]) and ISO.match(cp["expire_time"])
    assert cp["expire_time"] == output.iso_s(cp["expire_time_s"])
    code, out, _ = slate(capsys, "--db", db, "list-checkpoints", "--format", "table")
    header, row, count = out.splitlines()
    assert header.split()[:5] == ["ID", "NAME", "MANIFEST", "CREATED", "EXPIRES"]
    assert cp["id"] in row and cp["expire_time"] in row and "_s" not in out
    assert count == "1 checkpoint(s)"


def test_ls_ends_with_totals_per_kind(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = slate(capsys, "--db", db, "ls")
    lines = [json.loads(x) for x in out.splitlines()]
    rows, tot = lines[:-1], lines[-1]["totals"]
    assert code == EXIT_OK and all(ISO.match(r["last_modified"]) for r in rows)
    assert tot["count"] == len(rows) and tot["bytes"] == sum(r["size"] for r in rows)
    for kind, t in tot["kinds"].items():
        mine = [r for r in rows if r["kind"] == kind]
        assert (t["count"], t["bytes"]) == (len(mine), sum(r["size"] for r in mine))
    assert {"manifest", "compacted"} <= set(tot["kinds"])
    code, out, _ = slate(capsys, "--db", db, "ls", "--format", "table")
    assert code == EXIT_OK
    totals = out.split("\n\n")[1].splitlines()
    assert totals[0].split()[:3] == ["KIND", "OBJECTS", "SIZE"]
    assert totals[-1].split()[:2] == ["total", str(tot["count"])]


def test_sst_is_summarised_unless_detail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = open_store(f"file://{tmp_path}")
    bulk_load("db", store, [(b"k%05d" % i, b"v" * 50) for i in range(2000)])
    sst = next(m.path for m in store.list("db/compacted"))
    base = ["--store", f"file://{tmp_path}", "sst", sst]
    _, out, _ = slate(capsys, *base)
    summary = json.loads(out)
    assert "index" not in summary and summary["index_blocks"] > 1
    assert "block_stats" not in summary["stats"] and summary["detail"] is False
    assert len(summary["rows"]) == 10 and summary["num_rows"] == 2000
    _, out, _ = slate(capsys, *base, "--detail")
    detail = json.loads(out)
    assert len(detail["index"]) == summary["index_blocks"] and len(detail["rows"]) == 2000
    assert "block_stats" in detail["stats"] and len(out) > 10 * len(json.dumps(summary))
    _, out, _ = slate(capsys, *base, "--limit", "2")
    assert len(json.loads(out)["rows"]) == 2
    _, out, _ = slate(capsys, *base, "--limit", "2", "--format", "table")
    assert "rows (2 of 2000):" in out and "k00000" in out and "index_blocks:" in out


def test_gc_and_compact_end_with_a_headline_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"memory://out{uuid.uuid4().hex[:10]}"
    w = DbWriter(open_store(url + "/"), "db")
    w.manifests_upto(3, manifest(replay_after=2, last_seen=2))
    w.wal(1)
    w.wal(2)
    code, out, err = slate(capsys, "--db", f"{url}/db", "gc", "--min-age", "0s", "--force")
    report = json.loads(out.splitlines()[-1])
    assert code == EXIT_OK and (report["job"], report["status"]) == ("gc", "success")
    assert re.fullmatch(r"slate gc: dry run: would delete 3 objects \(.*\): manifest 2 \(.*\), "
                        r"wal 1 \(.*\); 2 kept; nothing deleted; \d+ store requests; [\d.]+ s\n",
                        err), err
    assert err == f"slate gc: {report['headline']}\n"
    code, out, err = slate(capsys, "--db", f"{url}/db", "gc", "--min-age", "0s", "--force",
                           "--no-dry-run", "--format", "table")
    assert code == EXIT_OK and out.startswith("ACTION")
    assert "KIND" in out and "DELETED" in out
    assert err.startswith("slate gc: deleted 3 objects")
    started = time.time()
    bulk_load("c", open_store(f"file://{tmp_path}"), [(b"k", b"v")])
    code, out, err = slate(capsys, "--db", f"file://{tmp_path}/c", "compact")
    report = json.loads(out)
    assert code == EXIT_OK and report["status"] == "success"
    assert report["databases"][0]["outcome"] == "nothing_to_do"
    assert err.startswith("slate compact: nothing to compact: fewer than 4 sources of "
                          "similar size") and time.time() - started < 60  # size-tiered
    assert "0 L0 SSTs, 1 sorted run, 1 SST" in report["databases"][0]["reason"]
    code, out, err = slate(capsys, "--db", f"file://{tmp_path}/c", "compact", "--policy", "l0")
    assert code == EXIT_OK
    assert "nothing to compact: no L0 SSTs to compact (1 sorted run, 1 SST)" in err


def test_config_show_takes_the_global_json_format(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = slate(capsys, "--format", "json", "config", "show")
    assert code == EXIT_OK and "settings" in json.loads(out)
    code, out, _ = slate(capsys, "config", "show", "--format", "json")
    assert code == EXIT_OK and "settings" in json.loads(out)
    code, out, _ = slate(capsys, "config", "show")
    assert code == EXIT_OK and not out.startswith("{")
