"""jobs/gc.py and jobs/compact.py on database paths that are not database roots (a file,
a path below a file, a directory without manifest), and their flag checks, without Spark:
every failure here happens before a Spark task would run, so a stand-in session that only
answers ``sparkContext.defaultParallelism``, what the report's ``spark`` section reads, and
``stop()`` is enough."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import slatelib.spark.session
from slatelib.config import load_settings
from slatelib.exit_codes import EXIT_DATA, EXIT_USAGE
from slatelib.jobs import compact as compact_job
from slatelib.jobs import gc as gc_job


class FakeSpark:
    """Fails the test (AttributeError -> exit code 1) if anything but the session's
    parallelism, its master and application id, and ``stop`` is used."""

    def __init__(self) -> None:
        self.sparkContext = SimpleNamespace(
            defaultParallelism=2, master="local[2]", applicationId="local-fake",
            getConf=lambda: {"spark.submit.deployMode": "client"})
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    (tmp_path / "afile").write_bytes(b"not a database")
    (tmp_path / "empty").mkdir()
    return tmp_path


@pytest.fixture
def fake_spark(monkeypatch: pytest.MonkeyPatch) -> FakeSpark:
    spark = FakeSpark()
    monkeypatch.setattr(slatelib.spark.session, "build_spark", lambda *a, **k: spark)
    return spark


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def expected(tmp: Path) -> list[tuple[str, str]]:
    t = str(tmp).lstrip("/")
    return [
        ("afile", f"'{t}/afile' is a file, not a database root"),
        ("afile/db", f"'{t}/afile/db' is not a database root: '{t}/afile' is a file, "
                     "not a directory"),
        ("empty", f"no manifest under '{t}/empty': not a database root"),
        ("missing", f"no manifest under '{t}/missing': not a database root"),
    ]


def check_report(report: dict[str, Any], code: int, tmp: Path) -> None:
    assert code == EXIT_DATA
    got = {r["db"].rsplit(str(tmp) + "/", 1)[1]: r for r in report["databases"]}
    for path, message in expected(tmp):
        assert got[path]["status"] == "data_error"
        assert got[path]["exit_code"] == EXIT_DATA
        assert got[path]["error"]["type"] == "NotADatabaseRootError"
        assert message in got[path]["error"]["message"]


def db_args(tmp: Path) -> list[str]:
    return [a for path, _ in expected(tmp) for a in ("--db", f"file://{tmp}/{path}")]


@pytest.mark.parametrize("dry", ["--dry-run", "--no-dry-run"])
def test_gc_job_run(tmp: Path, dry: str) -> None:
    args = gc_job.build_parser().parse_args([*db_args(tmp), dry])
    before = tree(tmp)
    report, code = gc_job.run(FakeSpark(), load_settings(args.conf), args)  # type: ignore[arg-type]
    check_report(report, code, tmp)
    assert tree(tmp) == before


@pytest.mark.parametrize("dry", ["--dry-run", "--no-dry-run"])
def test_gc_job_main(tmp: Path, dry: str, fake_spark: FakeSpark,
                     capsys: pytest.CaptureFixture[str]) -> None:
    before = tree(tmp)
    assert gc_job.main([*db_args(tmp), dry]) == EXIT_DATA
    check_report(json.loads(capsys.readouterr().out), EXIT_DATA, tmp)
    assert fake_spark.stopped and tree(tmp) == before


@pytest.mark.parametrize("dry", [True, False])
def test_compact_job_run(tmp: Path, dry: bool) -> None:
    args = compact_job.build_parser().parse_args([*db_args(tmp), *(["--dry-run"] if dry else [])])
    before = tree(tmp)
    report, code = compact_job.run(None if dry else FakeSpark(),  # type: ignore[arg-type]
                                   load_settings(args.conf), args)
    check_report(report, code, tmp)
    assert tree(tmp) == before


@pytest.mark.parametrize("dry", [True, False])
def test_compact_job_main(tmp: Path, dry: bool, fake_spark: FakeSpark,
                          capsys: pytest.CaptureFixture[str]) -> None:
    before = tree(tmp)
    assert compact_job.main([*db_args(tmp), *(["--dry-run"] if dry else [])]) == EXIT_DATA
    check_report(json.loads(capsys.readouterr().out), EXIT_DATA, tmp)
    assert fake_spark.stopped is not dry and tree(tmp) == before


@pytest.mark.parametrize("job", [gc_job, compact_job])
def test_a_discover_prefix_below_a_file_is_invalid_input(
    tmp: Path, job: Any, fake_spark: FakeSpark, capsys: pytest.CaptureFixture[str]
) -> None:
    assert job.main(["--discover", f"file://{tmp}/afile/dbs/", "--dry-run"]) == EXIT_USAGE
    t = str(tmp).lstrip("/")
    assert f"lies below '{t}/afile', a file, not a directory" in capsys.readouterr().err


# ------------------------------------------------------------------ flags


@pytest.mark.parametrize("argv", [["--dry-run", "--no-dry-run"], ["--no-dry-run", "--dry-run"]])
def test_gc_job_refuses_dry_run_and_no_dry_run_together(
    tmp: Path, argv: list[str], fake_spark: FakeSpark, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        gc_job.main(["--db", f"file://{tmp}/db", *argv])
    assert info.value.code == EXIT_USAGE
    assert f"{argv[0]} and {argv[1]} contradict each other" in capsys.readouterr().err
    assert not fake_spark.stopped  # refused before Spark started


def test_gc_job_takes_a_negative_min_age_to_its_own_check(
    tmp: Path, fake_spark: FakeSpark, capsys: pytest.CaptureFixture[str]
) -> None:
    assert gc_job.main(["--db", f"file://{tmp}/db", "--min-age", "-5min"]) == EXIT_USAGE
    assert "must not be negative: '-5min'" in capsys.readouterr().err


@pytest.mark.parametrize("argv, dry_run", [([], None), (["--dry-run"], True),
                                           (["--no-dry-run"], False),
                                           (["--dry-run", "--dry-run"], True)])
def test_gc_job_dry_run_spellings(argv: list[str], dry_run: bool | None) -> None:
    assert gc_job.build_parser().parse_args(["--db", "file:///x", *argv]).dry_run is dry_run
