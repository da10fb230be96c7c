"""``slate compact``: the same plan run with threads in this process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from slatelib.cli import main as slate
from slatelib.core.row import VALUE
from slatelib.objstore import open_store
from slatelib.store.manifest_store import ManifestStore
from tests.compaction_fixtures import NOW_MS, flush_l0, new_db


@pytest.fixture
def db(tmp_path: Path) -> str:
    store = open_store(f"file://{tmp_path}")
    new_db(store, "db")
    for s in range(1, 4):
        flush_l0(store, "db", [(b"k%03d" % i, s, VALUE, b"v%d" % s, None, NOW_MS)
                               for i in range(0, 300, s)])
    conf = tmp_path / "c.toml"
    conf.write_text("[compaction]\nmin_range_bytes = 1\n")
    return f"file://{tmp_path}/db"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any] | str]:
    """The exit code and the one database's entry of the report (stderr without one)."""
    code = slate(list(argv))
    out, err = capsys.readouterr()
    if not out.strip():
        return code, err
    report = json.loads(out)
    assert (report["job"], report["status"]) == ("compact", "success")
    assert report["headline"] in err
    [db] = report["databases"]
    assert (db["status"], db["exit_code"]) == ("success", 0)
    return code, db


def test_compact_prints_the_report(db: str, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    code, report = run(capsys, "--db", db, "--conf", str(tmp_path / "c.toml"), "compact",
                       "--policy", "l0", "--parallelism", "2", "--max-sst-size", "2KiB")
    assert code == 0 and isinstance(report, dict)
    assert (report["outcome"], report["tasks"], report["policy"]) == ("committed", 2, "l0")
    assert report["rows_in"] == 300 + 150 + 100 and report["rows_out"] == 300
    assert len(report["outputs"]["ssts"]) > 2
    m = ManifestStore(open_store(f"file://{tmp_path}"), "db").read_latest().value
    assert m.l0 == () and len(m.compacted[0].views) == len(report["outputs"]["ssts"])


def test_the_default_policy_is_size_tiered(db: str, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Three L0s are below 0.17's min_compaction_sources (4): nothing to do, no new run."""
    code, report = run(capsys, "--db", db, "--conf", str(tmp_path / "c.toml"), "compact")
    assert code == 0 and isinstance(report, dict)
    assert (report["outcome"], report["policy"]) == ("nothing_to_do", "size-tiered")
    new_l0 = [(b"k%03d" % i, 9, VALUE, b"v9", None, NOW_MS) for i in range(0, 300, 7)]
    flush_l0(open_store(f"file://{tmp_path}"), "db", new_l0)
    code, report = run(capsys, "--db", db, "--conf", str(tmp_path / "c.toml"), "compact")
    assert code == 0 and isinstance(report, dict)
    assert (report["outcome"], report["policy"], report["destination"]) == \
        ("committed", "size-tiered", 0)
    assert report["inputs"]["l0_views"] == 4


def test_compact_dry_run_and_explicit_sources(db: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    m = ManifestStore(open_store(f"file://{tmp_path}"), "db").read_latest().value
    from slatelib.core.compaction_source import SourceId

    oldest = str(SourceId.l0(m.l0[-1].id))
    code, report = run(capsys, "--db", db, "compact", "--sources", oldest, "--dry-run")
    assert code == 0 and isinstance(report, dict)
    assert (report["outcome"], report["sources"], report["destination"]) == \
        ("dry_run", [oldest], 0)


@pytest.mark.parametrize(("argv", "code", "message"), [
    (["--policy", "tiered"], 2, "unknown compaction policy"),
    (["--sources", "l0:xyz"], 2, "bad compaction source"),
    (["--sources", "sr:3"], 2, "not in the latest manifest"),
    (["--parallelism", "0"], 2, "must be positive"),
    (["--max-sst-size", "huge"], 2, "cannot parse size"),
])
def test_compact_rejects_bad_arguments(db: str, capsys: pytest.CaptureFixture[str],
                                       argv: list[str], code: int, message: str) -> None:
    got, err = run(capsys, "--db", db, "compact", *argv)
    assert got == code and message in str(err)


def test_compact_of_a_missing_database_is_a_data_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    got, err = run(capsys, "--db", f"file://{tmp_path}/nothing", "compact")
    assert got == 5 and "no manifest" in str(err)
