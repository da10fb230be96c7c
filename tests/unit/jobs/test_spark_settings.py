"""``[spark]`` settings, ``--env-file`` and ``slate-spark``, without starting Spark."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from jobs import launcher
from jobs._common import add_common_args, settings_from
from jobs._spark import DEFAULTS, session_conf
from slatelib.config import SparkSettings
from slatelib.objstore.url import set_store_defaults, store_defaults


def test_session_conf_layers_and_spark_submit_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_MASTER", raising=False)
    st = SparkSettings(master="local[3]", app_name="nightly", log_level="INFO",
                       conf=(("spark.executor.memory", "4g"), ("spark.ui.enabled", "true")))
    got = session_conf("slatelib-gc", settings=st, environ={})
    assert got["spark.master"] == "local[3]" and got["spark.app.name"] == "nightly"
    assert got["spark.executor.memory"] == "4g" and got["spark.ui.enabled"] == "true"
    assert got["spark.task.maxFailures"] == DEFAULTS["spark.task.maxFailures"]
    assert session_conf("j", settings=st, environ={"SLATELIB_SPARK_MASTER": "local[1]"})[
        "spark.master"] == "local[1]"
    assert session_conf("j", environ={})["spark.master"] == "local[*]"
    assert session_conf("j", master="local[2]", settings=st, environ={})[
        "spark.master"] == "local[2]"
    # under spark-submit, whatever it set wins (its default app name, the script's, not)
    monkeypatch.setattr("sys.argv", ["/x/jobs/gc.py"])
    submitted = {"spark.master": "yarn", "spark.executor.memory": "8g", "spark.app.name": "gc.py"}
    got = session_conf("slatelib-gc", settings=st, submitted=submitted, environ={})
    assert "spark.master" not in got and "spark.executor.memory" not in got
    assert got["spark.app.name"] == "nightly"
    submitted["spark.app.name"] = "given-by-name"
    assert "spark.app.name" not in session_conf("slatelib-gc", settings=st,
                                                submitted=submitted, environ={})


def test_jobs_load_env_files_before_settings_and_register_store_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_file = tmp_path / "job.env"
    env_file.write_text("SLATELIB_GC__MIN_AGE=10min\n")
    conf = tmp_path / "c.toml"
    conf.write_text('[object_store]\nregion = "eu-west-1"\n')
    p = argparse.ArgumentParser()
    add_common_args(p)
    args = p.parse_args(["--db", "file:///tmp/x", "--env-file", str(env_file),
                         "--conf", str(conf)])
    monkeypatch.delenv("SLATELIB_GC__MIN_AGE", raising=False)
    try:
        settings = settings_from(args)
        assert settings.gc.min_age == 600.0
        assert store_defaults("s3") == {"region": "eu-west-1"}
    finally:
        set_store_defaults(None)
        os.environ.pop("SLATELIB_GC__MIN_AGE", None)


def test_slate_spark_dispatches_to_the_job_module(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[list[str]] = []

    class Fake:
        @staticmethod
        def main(argv: list[str]) -> int:
            seen.append(list(argv))
            return 3

    monkeypatch.setattr(launcher.importlib, "import_module", lambda name: Fake)
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.delenv("PYSPARK_DRIVER_PYTHON", raising=False)
    assert launcher.main(["gc", "--db", "file:///x"]) == 3
    assert seen == [["--db", "file:///x"]]
    import sys

    assert os.environ["PYSPARK_PYTHON"] == sys.executable
    assert launcher.main(["vacuum"]) == 2
    assert "unknown job 'vacuum'" in capsys.readouterr().err
    assert launcher.main(["--help"]) == 0
    assert "slate-spark {compact,gc,rescale,export}" in capsys.readouterr().out
