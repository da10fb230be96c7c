"""slate-spark's global job options (``--wal-store``) before or after the job's name."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from jobs import launcher


def test_global_job_options_are_taken_from_anywhere_and_may_be_empty() -> None:
    assert launcher.hoist_global_options(
        ["--wal-store", "s3://w", "gc", "--db", "s3://b/a"]) == (
        ["--wal-store", "s3://w"], ["gc", "--db", "s3://b/a"])
    assert launcher.hoist_global_options(["gc", "--wal-store=", "--db", "x"]) == (
        ["--wal-store", ""], ["gc", "--db", "x"])
    assert launcher.hoist_global_options(
        ["--wal-store", "s3://w", "gc", "--wal-store=s3://w"])[0] == ["--wal-store", "s3://w"]
    for bad, why in ((["gc", "--wal-store"], "needs a value"),
                     (["--wal-store", "--db", "x"], "needs a value"),
                     (["--wal-store", "a", "gc", "--wal-store", "b"], "different values")):
        with pytest.raises(ValueError, match=why):
            launcher.hoist_global_options(bad)


def test_the_wal_store_before_the_job_reaches_the_job(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    fake_job: Callable[[int], list[list[str]]],
) -> None:
    seen = fake_job(0)
    monkeypatch.setenv("PYSPARK_PYTHON", "python")
    monkeypatch.setenv("PYSPARK_DRIVER_PYTHON", "python")
    monkeypatch.delenv(launcher._spark.SUBMIT_ARGS_ENV, raising=False)  # restored after
    assert launcher.main(["--wal-store", "file:///w", "--master", "local[1]", "gc",
                          "--db", "file:///x"]) == 0
    assert seen == [["--db", "file:///x", "--wal-store", "file:///w"]]
    assert launcher.main(["--wal-store", "a", "gc", "--wal-store", "b"]) == 2
    assert "different values" in capsys.readouterr().err
