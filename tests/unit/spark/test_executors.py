"""The executor guard (:mod:`slatelib.spark.guard`) and the driver's reading of executor
failures (:mod:`slatelib.spark.executors`), without Spark. That the guard really runs on a
cluster executor before anything of slatelib is imported is the cluster tier's
(``tests/cluster/test_submit.py``)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from slatelib.errors import ExecutorEnvironmentError, InvalidArgumentError
from slatelib.spark import guard
from slatelib.spark.executors import translate


def test_the_build_names_the_version_and_a_fingerprint_of_the_sources() -> None:
    mine = guard.build()
    assert mine["version"] == "0.1.0" and len(mine["fingerprint"]) == 16
    assert mine["location"].endswith("slatelib") and mine["python"] == sys.executable
    assert guard.build() == mine  # computed once per process


def test_the_same_build_passes_and_another_is_refused_naming_both() -> None:
    mine = guard.build()
    guard.check(mine)
    other = {**mine, "version": "0.0.9"}
    with pytest.raises(guard.ExecutorMismatch) as err:
        guard.check(other)
    text = str(err.value)
    assert text.startswith(guard.MISMATCH_MARK)
    assert f"runs slatelib {mine['version']} (build {mine['fingerprint']}" in text
    assert "the driver slatelib 0.0.9" in text and "make package-executor-env" in text
    # the same version from other sources is another build too
    with pytest.raises(guard.ExecutorMismatch, match="build 0123456789abcdef"):
        guard.check({**mine, "fingerprint": "0123456789abcdef"})


def test_a_changed_source_file_changes_the_fingerprint(tmp_path: Path) -> None:
    """The fingerprint is computed from the files a Python finds, in a fresh process."""
    pkg = tmp_path / "slatelib"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("x = 1\n")
    code = ("import sys; sys.path.insert(0, sys.argv[1]); "
            "from importlib.util import spec_from_file_location, module_from_spec; "
            f"s = spec_from_file_location('g', {guard.__file__!r}); g = module_from_spec(s); "
            "s.loader.exec_module(g); print(g.build()['fingerprint'])")

    def fingerprint() -> str:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        return subprocess.run([sys.executable, "-S", "-c", code, str(tmp_path)], check=True,
                              capture_output=True, text=True, env=env).stdout.strip()

    first = fingerprint()
    assert first and first == fingerprint()
    (pkg / "__init__.py").write_text("x = 2\n")
    assert fingerprint() != first


@pytest.mark.parametrize(("env", "cwd", "expected"), [
    ({"SPARK_LOG_URL_STDERR": "http://w1:8081/logPage/?appId=app-1&executorId=3&logType=stderr"},
     None, "3"),
    ({"SPARK_EXECUTOR_ID": "7"}, None, "7"),
    ({"SPARK_EXECUTOR_DIRS": "/x"}, "work/app-20260101000000-0001/2", "2"),
    ({"CONTAINER_ID": "container_1_0001_01_000002"}, None, "container_1_0001_01_000002"),
    ({}, None, "driver"),
])
def test_the_executor_id_comes_from_what_the_cluster_manager_sets(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env: dict[str, str], cwd: str | None,
        expected: str) -> None:
    for name in ("SPARK_LOG_URL_STDERR", "SPARK_EXECUTOR_ID", "SPARK_EXECUTOR_DIRS",
                 "CONTAINER_ID"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    where = tmp_path / (cwd or "plain")
    where.mkdir(parents=True)
    monkeypatch.chdir(where)
    assert guard.executor_id() == expected


def test_a_guarded_function_checks_once_then_counts_its_task() -> None:
    class Tally:
        def __init__(self) -> None:
            self.added: list[dict[str, int]] = []

        def add(self, value: dict[str, int]) -> None:
            self.added.append(value)

    tally = Tally()
    fn = guard.Guarded(guard.build(), pickle.dumps(len), tally)
    assert fn([1, 2]) == 2 and fn([1]) == 1
    assert tally.added == [{guard.placement(): 1}]  # one task, however many calls
    it = guard.GuardedIterator(guard.build(), pickle.dumps(sorted), None)
    assert list(it(iter([3, 1, 2]))) == [1, 2, 3]
    refused = guard.Guarded({**guard.build(), "version": "9"}, pickle.dumps(len), tally)
    with pytest.raises(guard.ExecutorMismatch):
        refused([1])
    counts = guard.Counts()
    assert counts.addInPlace(counts.zero({}), {"a/1": 2}) == {"a/1": 2}
    assert counts.addInPlace({"a/1": 2}, {"a/1": 1, "b/2": 1}) == {"a/1": 3, "b/2": 1}


def py4j_like(text: str) -> Exception:
    error: Any = type("Py4JJavaError", (Exception,), {"__module__": "py4j.protocol"})
    return error(text)  # type: ignore[no-any-return]


def test_the_driver_reads_a_refusal_out_of_spark_s_error() -> None:
    spark_text = ("An error occurred while calling o123.collectAndServe.\n: org.apache.spark."
                  "SparkException: Job aborted ... File \"guard.py\", line 1\nslatelib.spark."
                  f"guard.ExecutorMismatch: {guard.MISMATCH_MARK} executor w2/1 (python "
                  "/x/bin/python) runs slatelib 0.0.9 (build aa), the driver slatelib 0.1.0 "
                  "(build bb). Executors must run ...\n\tat org.apache.spark...")
    err = translate(py4j_like(spark_text))
    assert isinstance(err, ExecutorEnvironmentError) and isinstance(err, InvalidArgumentError)
    assert str(err).startswith("executor w2/1 (python /x/bin/python) runs slatelib 0.0.9")
    assert "\tat org.apache" not in str(err)
    assert translate(py4j_like("a plain task failure")) is None


def test_an_executor_that_cannot_start_its_python_is_explained() -> None:
    packed = translate(py4j_like('java.io.IOException: Cannot run program "./env/bin/python": '
                                 "error=2, No such file or directory\n\tat java.base"))
    assert packed is not None
    text = str(packed)
    assert 'Cannot run program "./env/bin/python"' in text and "'#env'" in text
    assert "same path on every node" in text and "--archives" in text
    node = translate(py4j_like('Cannot run program "/opt/venv/bin/python": error=2'))
    assert node is not None and "spark.pyspark.python must name a Python" in str(node)
