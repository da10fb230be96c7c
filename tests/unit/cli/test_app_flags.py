"""``slate`` flags refuse what they cannot mean: counts below 0 (0 prints nothing), ids
below 1, sizes below 1 byte, and on/off flags or options given both ways (exit code 2,
naming the flags, before anything is read or written)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from slatelib.cli.app import EXIT_OK, EXIT_USAGE, main
from slatelib.objstore import open_store
from slatelib.ops.bulk_load import bulk_load
from tests.unit.gc_support import DbWriter, manifest

ROWS = [(bytes([i]), bytes([i]) * 3) for i in range(1, 6)]


@pytest.fixture
def db(tmp_path: Path) -> tuple[str, str]:
    report = bulk_load("db", open_store(f"file://{tmp_path}"), ROWS)
    return f"file://{tmp_path}/db", report.ssts[0]


def slate(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse refusals
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("limit, keys", [("0", 0), ("2", 2), ("5", 5), ("9", 5)])
def test_scan_limit(db: tuple[str, str], limit: str, keys: int,
                    capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = slate(["--db", db[0], "scan", "--limit", limit], capsys)
    assert code == EXIT_OK
    assert [json.loads(x)["key"] for x in out.splitlines()] == [k.hex() for k, _ in ROWS[:keys]]


@pytest.mark.parametrize("limit, rows", [("0", 0), ("2", 2), ("9", 5)])
def test_sst_limit(db: tuple[str, str], limit: str, rows: int,
                   capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = slate(["--db", db[0], "sst", db[1], "--limit", limit], capsys)
    got = json.loads(out)
    assert code == EXIT_OK and got["num_rows"] == 5 and len(got["rows"]) == rows


@pytest.mark.parametrize("argv, message", [
    (["scan", "--limit", "-1"], "argument --limit: must be at least 0, got '-1'"),
    (["scan", "--limit=-1"], "argument --limit: must be at least 0, got '-1'"),
    (["scan", "--limit", "x"], "argument --limit: expected a whole number of at least 0"),
    (["sst", "SST", "--limit=-1"], "argument --limit: must be at least 0, got '-1'"),
    (["sst", "SST", "--limit", "x"], "argument --limit: expected a whole number"),
    (["sst", "SST", "--limit", "2", "--no-rows"],
     "argument --no-rows: not allowed with argument --limit"),
    (["manifest", "--id", "0"], "argument --id: must be at least 1, got '0'"),
    (["manifest", "--id", "-1"], "argument --id: must be at least 1, got '-1'"),
    (["gc", "--dry-run", "--no-dry-run"],
     "--dry-run and --no-dry-run contradict each other: give one of them"),
    (["gc", "--no-dry-run", "--dry-run"],
     "--no-dry-run and --dry-run contradict each other: give one of them"),
    (["gc", "--min-age", "-5min"], "must not be negative: '-5min'"),
])
def test_refused_with_exit_2_naming_the_flag(
    db: tuple[str, str], argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [db[1] if a == "SST" else a for a in argv]
    code, out, err = slate(["--db", db[0], *argv], capsys)
    assert (code, out) == (EXIT_USAGE, "")
    assert message in err


@pytest.mark.parametrize("size, message", [
    ("0", "argument --sst-size: must be at least 1 bytes, got '0'"),
    ("-1", "argument --sst-size: cannot parse size '-1'"),
    ("big", "argument --sst-size: cannot parse size 'big'"),
])
def test_load_sst_size_below_one_byte_is_refused(
    tmp_path: Path, size: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"key": "01", "value": "aa"}\n')
    code, _, err = slate(["--db", f"file://{tmp_path}/new", "load", f"--sst-size={size}",
                          str(rows)], capsys)
    assert code == EXIT_USAGE and message in err
    assert not (tmp_path / "new").exists()


def test_gc_both_ways_deletes_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"memory://flags{uuid.uuid4().hex[:10]}"
    w = DbWriter(open_store(url + "/"), "db")
    w.manifests_upto(3, manifest(replay_after=2, last_seen=2))
    w.wal(1)
    before = w.listing()
    for argv in (["--dry-run", "--no-dry-run"], ["--no-dry-run", "--dry-run"]):
        code, out, _ = slate(["--db", f"{url}/db", "gc", "--min-age", "0s", "--force", *argv],
                             capsys)
        assert (code, out) == (EXIT_USAGE, "")
    assert w.listing() == before
    code, _, _ = slate(["--db", f"{url}/db", "gc", "--min-age", "0s", "--force", "--no-dry-run"],
                       capsys)
    assert code == EXIT_OK and w.listing() != before  # the one-way spelling still deletes
