"""On a terminal a job prints its headline and a short table, the full report going to
``--report FILE``; a pipe still gets pure JSON; argument errors come before Spark starts
(issue 27, "the first hour")."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from slatelib.jobs import compact
from slatelib.objstore import open_store
from slatelib.ops.bulk_load import bulk_load
from slatelib.ops.job_summary import report_goes_to_terminal, result_words, summary_text


@pytest.fixture
def db(tmp_path: Path) -> str:
    bulk_load("db", open_store(f"file://{tmp_path}"), [(b"user:1", b"a"), (b"user:2", b"b")])
    return f"file://{tmp_path}/db"


def test_the_summary_is_a_table_of_databases_and_names_the_report_file() -> None:
    report = {"job": "compact", "databases": [
        {"db": "file:///d/a", "status": "success", "outcome": "committed", "bytes_in": 3_900_000,
         "bytes_out": 1_800_000, "outputs": {"count": 1}, "seconds": 1.25, "exit_code": 0},
        {"db": "file:///d/b", "status": "data_error", "exit_code": 5,
         "error": {"type": "X", "message": "no manifest\nat file:///d/b"}},
        {"db": "file:///d/c", "status": "success", "outcome": "nothing_to_do",
         "reason": "no L0 SSTs to compact", "exit_code": 0}]}
    lines = summary_text(report, report_path="/tmp/r.json").splitlines()
    assert lines[0].split() == ["DATABASE", "STATUS", "RESULT", "TIME"]
    assert lines[1].split()[:3] == ["file:///d/a", "success", "3.9"]
    assert "-> 1 SST(s) (1.8 MB)" in lines[1] and lines[1].endswith("1.2 s")
    assert "no manifest at file:///d/b" in lines[2]
    assert "nothing to do: no L0 SSTs to compact" in lines[3]
    assert lines[-1] == "full report: /tmp/r.json"
    assert "--report FILE" in summary_text(report, report_path=None)
    assert result_words({"rows": 1234}) == "1,234 rows"


def test_terminal_detection_tty_versus_pipe() -> None:
    primary, secondary = os.openpty()
    try:
        with open(secondary, "w", closefd=False) as tty:
            assert report_goes_to_terminal(tty)
    finally:
        os.close(primary)
        os.close(secondary)
    assert not report_goes_to_terminal(io.StringIO())


def test_table_output_of_a_job_and_json_to_a_pipe(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "report.json"
    code = compact.main(["--db", db, "--dry-run", "--no-progress", "--output-format", "table",
                         "--report", str(path)])
    out, err = capsys.readouterr()
    assert code == 0
    assert out.splitlines()[0].split() == ["DATABASE", "STATUS", "RESULT", "TIME"]
    assert db in out and f"full report: {path}" in out and "{" not in out
    assert json.loads(path.read_text())["job"] == "compact"
    assert err.rstrip().splitlines()[-1].startswith("nothing to compact")
    code = compact.main(["--db", db, "--dry-run", "--no-progress"])  # stdout is not a tty
    out, _ = capsys.readouterr()
    assert code == 0 and json.loads(out)["job"] == "compact"


@pytest.mark.parametrize("argv, message", [
    ([], "no database given"),
    (["--db", "nota-url"], "nota-url"),
    (["--db", "file:///x", "--dbs-file", "/nonexistent/dbs.txt"], "--dbs-file"),
    (["--db", "file:///x", "--max-sst-size", "-5"], "--max-sst-size"),
    (["--db", "file:///x", "--run-for", "1m"], "only apply with --worker or --service"),
])
def test_argument_errors_come_before_spark_starts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    argv: list[str], message: str,
) -> None:
    def no_spark(*args: object, **kwargs: object) -> None:
        raise AssertionError("Spark started before the arguments were checked")

    monkeypatch.setattr("slatelib.spark.session.build_spark", no_spark)
    code = compact.main(argv)
    assert code == 2 and message in capsys.readouterr().err


def test_under_spark_submit_the_jvms_terminal_counts(tmp_path: Path) -> None:
    """spark-submit's JVM pipes the driver's stdout to its own: the driver looks at its
    parent's stdout (here a shell whose stdout is a terminal, the driver's a pipe)."""
    import subprocess
    import sys

    code = ("import sys; from slatelib.ops.job_summary import report_goes_to_terminal as t; "
            "print('tty' if t() else 'pipe', sys.stdout.isatty())")
    primary, secondary = os.openpty()
    try:
        for env, want in (({"PYSPARK_GATEWAY_PORT": "1"}, "tty False"), ({}, "pipe False")):
            clean = {k: v for k, v in os.environ.items() if k != "PYSPARK_GATEWAY_PORT"}
            subprocess.run(["sh", "-c", f'"{sys.executable}" -c "{code}" | cat'],
                           stdout=secondary, env={**clean, **env}, timeout=60, check=True)
            got = os.read(primary, 1000).decode().strip()
            assert got == want
    finally:
        os.close(primary)
        os.close(secondary)


def test_make_help_lists_the_airflow_venv() -> None:
    import subprocess

    root = Path(__file__).resolve().parents[3]
    out = subprocess.run(["make", "-s", "-C", str(root), "help"], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    assert any(line.split()[:1] == [".venv-airflow"] for line in out.splitlines())


def test_a_misspelled_job_option_gets_a_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    from slatelib.jobs import rescale

    with pytest.raises(SystemExit) as exit_:
        compact.main(["--db", "file:///x", "--polcy", "l0"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: jobs/compact.py") and "did you mean --policy?" in err
    with pytest.raises(SystemExit):
        rescale.main(["split", "--db", "file:///x", "--to", "file:///y{i}", "--into", "2",
                      "--parallelizm", "2"])
    err = capsys.readouterr().err
    assert "usage: jobs/rescale.py split" in err and "unrecognized arguments" in err
