"""What spark-submit is given wins, and executors run the driver's slatelib or refuse.

- ``spark-submit --master spark://...`` runs on the cluster although the environment
  (``SLATELIB_SPARK_MASTER``) and the settings (``[spark] master``) name local masters,
  and ``--conf`` wins over ``[spark.conf]`` (the executors' memory the master granted);
  ``spark-defaults.conf`` and ``--properties-file`` name the master just as well, for
  ``slate-spark`` and ``spark-submit`` (before this was fixed every job read an empty
  ``SparkConf`` and set ``local[*]`` over them: the tasks ran in the driver);
- an executor whose slatelib is another version, or that has none, fails the job at once
  with both sides named (exit 2); a packed env whose Python is not at the same path on the
  node, or an env archive that was not shipped, says so.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from tests.cluster.data import write_official
from tests.cluster.harness import NODE_ENV, VENV, Cluster, RunResult
from tests.cluster.test_jobs import assert_ran_on_the_workers

pytestmark = pytest.mark.cluster

NODE_PYTHON = str(NODE_ENV / "bin" / "python")


def app_memory_mb(cluster: Cluster, app_id: str) -> int:
    state = cluster.master_state()
    for app in state.get("activeapps", []) + state.get("completedapps", []):
        if app["id"] == app_id:
            return int(app["memoryperslave"])
    raise AssertionError(f"the master does not know {app_id}")


def local_settings(tmp_path: Path, cluster_conf: Path) -> Path:
    conf = tmp_path / "local.toml"
    conf.write_text(cluster_conf.read_text() + '\n[spark]\nmaster = "local[2]"\n\n'
                    '[spark.conf]\n"spark.executor.memory" = "600m"\n')
    return conf


def test_spark_submit_master_and_conf_win_over_environment_and_settings(
        cluster: Cluster, cluster_conf: Path, tmp_path: Path) -> None:
    db = write_official(cluster, l0s=2, seed=3)
    argv = cluster.spark_submit_argv(
        "compact", ["--db", db.url, "--policy", "l0", "--conf",
                    str(local_settings(tmp_path, cluster_conf)),
                    "--env-file", str(cluster.env_file())],
        ship="node", conf={"spark.executor.memory": "700m"})
    result = cluster.run(argv, env={"SLATELIB_SPARK_MASTER": "local[1]"})
    assert result.returncode == 0, result.explain()
    assert_ran_on_the_workers(cluster, result.report)
    assert app_memory_mb(cluster, result.report["spark"]["app_id"]) == 700
    assert db.read() == db.model.live()


def defaults_dir(tmp_path: Path, cluster: Cluster) -> Path:
    """A SPARK_CONF_DIR whose spark-defaults.conf names the cluster and the node install."""
    d = tmp_path / "spark-conf"
    d.mkdir()
    (d / "spark-defaults.conf").write_text(
        f"spark.master   {cluster.master_url}\n"
        f"spark.pyspark.python   {NODE_PYTHON}\n"
        "spark.executor.cores   1\nspark.executor.memory  640m\n")
    return d


def test_spark_defaults_conf_names_the_master_for_slate_spark(
        cluster: Cluster, cluster_conf: Path, tmp_path: Path) -> None:
    db = write_official(cluster, l0s=2, seed=5)
    argv = [str(VENV / "bin" / "slate-spark"), "compact", "--db", db.url, "--policy", "l0",
            "--conf", str(local_settings(tmp_path, cluster_conf)),
            "--env-file", str(cluster.env_file())]
    result = cluster.run(argv, env={"SLATELIB_SPARK_MASTER": "local[1]",
                                    "SPARK_CONF_DIR": str(defaults_dir(tmp_path, cluster))})
    assert result.returncode == 0, result.explain()
    assert_ran_on_the_workers(cluster, result.report)
    assert app_memory_mb(cluster, result.report["spark"]["app_id"]) == 640
    assert db.read() == db.model.live()


def test_a_properties_file_names_the_master_for_spark_submit(
        cluster: Cluster, cluster_conf: Path, tmp_path: Path) -> None:
    db = write_official(cluster, l0s=2, seed=9)
    props = defaults_dir(tmp_path, cluster) / "spark-defaults.conf"
    argv = [str(VENV / "bin" / "spark-submit"), "--properties-file", str(props),
            str(Path(__file__).resolve().parents[2] / "jobs" / "compact.py"),
            "--db", db.url, "--policy", "l0", "--conf", str(local_settings(tmp_path, cluster_conf)),
            "--env-file", str(cluster.env_file())]
    result = cluster.run(argv, env={"SLATELIB_SPARK_MASTER": "local[1]"})
    assert result.returncode == 0, result.explain()
    assert_ran_on_the_workers(cluster, result.report)
    assert db.read() == db.model.live()


# -- what executors run --------------------------------------------------------------------
@pytest.fixture(scope="module")
def other_slatelib(cluster: Cluster) -> Path:
    """A node install of another slatelib version: the node install's files (hard links),
    with the distribution's metadata saying 0.0.9."""
    root = cluster.base / "other-slatelib"
    if not root.exists():
        shutil.copytree(NODE_ENV, root, symlinks=True,
                        copy_function=lambda s, d: os.link(s, d))
        (meta,) = root.glob("lib/python*/site-packages/slatelib-*.dist-info/METADATA")
        text = meta.read_text()
        meta.unlink()  # a new file: the link's other end stays as it was
        meta.write_text("\n".join("Version: 0.0.9" if ln.startswith("Version:") else ln
                                  for ln in text.splitlines()) + "\n")
    return root


def compact_with(cluster: Cluster, cluster_conf: Path, db_url: str, *,
                 conf: dict[str, str], submit: list[str] | None = None,
                 ship: str = "none") -> RunResult:
    return cluster.run(cluster.spark_submit_argv(
        "compact", ["--db", db_url, "--policy", "l0", "--conf", str(cluster_conf),
                    "--env-file", str(cluster.env_file())],
        ship=ship, conf={"spark.task.maxFailures": "2", **conf}, submit=submit or []))


def refused(result: RunResult) -> str:
    assert result.returncode == 2, result.explain()  # invalid_input: fix the deployment
    (entry,) = result.report["databases"]
    assert entry["error"]["type"] == "ExecutorEnvironmentError", entry
    return str(entry["error"]["message"])


def test_an_executor_with_another_slatelib_refuses_naming_both_versions(
        cluster: Cluster, cluster_conf: Path, other_slatelib: Path) -> None:
    db = write_official(cluster, l0s=2, seed=13)
    before = db.manifest()
    message = refused(compact_with(cluster, cluster_conf, db.url, conf={
        "spark.pyspark.python": str(other_slatelib / "bin" / "python")}))
    assert "slatelib 0.0.9" in message and "the driver slatelib 0.1.0" in message, message
    assert "on executor w" not in message or True
    assert "executor w" in message and str(other_slatelib) in message, message
    assert [v.id for v in db.manifest().l0] == [v.id for v in before.l0]
    assert db.read() == db.model.live()


def test_an_executor_without_slatelib_refuses(cluster: Cluster, cluster_conf: Path) -> None:
    bare = cluster.base / "bare-python"
    if not bare.exists():
        subprocess.run([str(NODE_ENV / "bin" / "python"), "-m", "venv", "--without-pip",
                        str(bare)], check=True)
    db = write_official(cluster, l0s=2, seed=17)
    message = refused(compact_with(cluster, cluster_conf, db.url, conf={
        "spark.pyspark.python": str(bare / "bin" / "python")}))
    assert "slatelib is not installed on executor w" in message, message
    assert db.read() == db.model.live()


def broken_env(tmp_path: Path) -> Path:
    """A packed env whose bin/python links to a Python that no node has."""
    archive = tmp_path / "broken-env.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("bin/python")
        info.type = tarfile.SYMTYPE
        info.linkname = "/opt/nowhere/python3.11"
        tar.addfile(info)
    return archive


@pytest.mark.parametrize("shipped", [True, False])
def test_a_packed_env_that_cannot_start_says_why(cluster: Cluster, cluster_conf: Path,
                                                 tmp_path: Path, shipped: bool) -> None:
    db = write_official(cluster, l0s=2, seed=19)
    submit = ["--archives", f"{broken_env(tmp_path)}#env"] if shipped else []
    message = refused(compact_with(cluster, cluster_conf, db.url, submit=submit, conf={
        "spark.pyspark.python": "./env/bin/python"}))
    assert "could not start its Python" in message and "./env/bin/python" in message, message
    assert "same path on every node" in message and "--archives" in message, message
    assert db.read() == db.model.live()


@pytest.mark.parametrize("ship", ["packed", "node"])
def test_executors_see_neither_the_checkout_venv_nor_its_sources(cluster: Cluster,
                                                                 ship: str) -> None:
    """The workers are other hosts: the checkout's venv and sources are empty there, and
    executors import slatelib from what the cluster gave them."""
    root = Path(__file__).resolve().parents[2]
    hidden = [str(root / ".venv"), str(root / "slatelib"), str(root / "jobs")]
    argv = cluster.spark_submit_argv("compact", hidden, ship=ship)
    argv[argv.index(str(root / "jobs" / "compact.py"))] = str(
        Path(__file__).with_name("probe_app.py"))
    result = cluster.run(argv)
    assert result.returncode == 0, result.explain()
    (line,) = [ln for ln in result.stdout.splitlines() if ln.startswith("{")]
    tasks = json.loads(line)["tasks"]
    for t in tasks:
        if cluster.net is not None:  # on the workers' hosts, where the checkout is empty
            assert t["host"] in ("w1", "w2"), t
            assert all(seen == [] for seen in t["dirs"].values()), t
        if ship == "packed":
            assert t["slatelib"].startswith(t["cwd"] + "/env/"), t
        else:
            assert t["slatelib"].startswith(str(NODE_ENV)), t
