"""Every job on the standalone cluster, submitted three ways: plain ``spark-submit``,
``slate-spark ... --master spark://...``, and the Airflow DAG's ``SparkSubmitOperator``
runner on real Airflow 3 with a ``spark_default`` connection to the master.

Each run must have executed its tasks on the workers' executors (the report's
``spark.tasks_by_executor`` names the workers' hosts and executor ids, never ``driver``,
and the workers made executor directories for the application), and the official 0.17
reader must read exactly what was written.

Executors get slatelib the two supported ways: the packed env (``--archives ...#env``,
``slate-spark --executor-env``, the DAG's ``executor_env``) in the runs of :data:`PACKED`,
and the node install (slatelib installed from the wheel on every node,
``spark.pyspark.python``) in the others.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.cluster.cases import CASES, Case, Ctx, new_ctx
from tests.cluster.harness import (
    NODE_ENV,
    PACKED_ENV,
    ROOT,
    WORKERS,
    Cluster,
    RunResult,
)
from tests.dags.airflow_env import probe

pytestmark = pytest.mark.cluster

PACKED = {("spark-submit", "compact-l0"), ("spark-submit", "rescale-split"),
          ("spark-submit", "export-delta"), ("slate-spark", "compact-full"),
          ("airflow", "compact-size-tiered"), ("airflow", "rescale-merge")}
"""The runs whose executors get the packed env (``--archives``, ``--executor-env``, the DAG's
``executor_env``); the others use the node install. Every executor unpacks the archive for
every application, so the tier ships it only where it tests something."""


def ship(way: str, case: Case) -> str:
    return "packed" if (way, case.name) in PACKED else "node"


def job_args(cluster: Cluster, ctx: Ctx, case: Case) -> list[str]:
    return [*case.args(ctx), "--conf", str(ctx.conf), "--env-file", str(cluster.env_file())]


def submit(cluster: Cluster, ctx: Ctx, case: Case, way: str) -> RunResult:
    args = job_args(cluster, ctx, case)
    if way == "spark-submit":
        return cluster.run(cluster.spark_submit_argv(case.job, args, ship=ship(way, case),
                                                     submit=case.submit(ctx)))
    return cluster.run(cluster.slate_spark_argv(case.job, args, ship=ship(way, case)))


def assert_ran_on_the_workers(cluster: Cluster, report: dict[str, Any]) -> None:
    spark = report["spark"]
    assert spark["master"] == cluster.master_url, spark
    where = spark["tasks_by_executor"]
    assert where and sum(where.values()) > 0, spark
    hosts = {key.split("/")[0] for key in where}
    executors = {key.split("/")[1] for key in where}
    assert "driver" not in executors, where
    if cluster.net is not None:  # each worker is its own host
        assert hosts <= set(WORKERS), where
    made = cluster.app_dirs(spark["app_id"])
    assert made and all(made.values()), f"no executor directory for {spark['app_id']}: {made}"


def check_run(cluster: Cluster, ctx: Ctx, case: Case, report: dict[str, Any]) -> None:
    assert_ran_on_the_workers(cluster, report)
    case.check(ctx, report)


@pytest.mark.parametrize("way", ["spark-submit", "slate-spark"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_job_runs_on_the_cluster(cluster: Cluster, cluster_conf: Path, case: Case,
                                     way: str, tmp_path: Path) -> None:
    ctx = new_ctx(cluster, cluster_conf, case, way, tmp_path)
    try:
        result = submit(cluster, ctx, case, way)
    finally:
        case.finish(ctx)
    assert result.returncode == 0, result.explain()
    check_run(cluster, ctx, case, result.report)


# -- the Airflow DAGs ----------------------------------------------------------------------
def dag_ship(cluster: Cluster, case: Case) -> dict[str, Any]:
    """The DAG params for the executors' code: the packed env (``executor_env``, the
    default) or the node install (no archive, ``spark.pyspark.python``)."""
    if ship("airflow", case) == "packed":
        return {"executor_env": str(PACKED_ENV), "spark_conf": cluster.job_conf}
    return {"executor_env": "", "spark_conf": {
        **cluster.job_conf, "spark.pyspark.python": str(NODE_ENV / "bin" / "python")}}


@pytest.fixture(scope="module")
def dag_runs(cluster: Cluster, cluster_conf: Path,
             tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Ctx, dict[str, Any]]]:
    """Every case as a DAG run, all in one Airflow process (the worker mode first, while its
    official writer is busy), through SparkSubmitOperator and the spark_default connection."""
    tmp = tmp_path_factory.mktemp("airflow-cluster")
    ordered = sorted(CASES, key=lambda c: c.name != "worker")
    ctxs: dict[str, Ctx] = {}
    runs = []
    host, port = cluster.master_url.removeprefix("spark://").rsplit(":", 1)
    for case in ordered:
        work = tmp / case.name
        work.mkdir()
        ctx = new_ctx(cluster, cluster_conf, case, "airflow", work)
        ctxs[case.name] = ctx
        dag_id, conf = case.dag(ctx)
        runs.append({"dag_id": dag_id, "conf": {
            **conf, "runner": "spark_submit_operator", "spark_conn_id": "spark_default",
            **dag_ship(cluster, case), "conf_files": [str(cluster_conf)],
            "env_files": [str(cluster.env_file())]}})
    try:
        result = probe(tmp, runs, connection={"conn_type": "spark", "host": f"spark://{host}",
                                              "port": int(port)},
                       env={"SPARK_LOCAL_IP": cluster.driver_host}, timeout=1200,
                       slatelib_project_dir=str(ROOT))
    finally:
        for case in ordered:
            case.finish(ctxs[case.name])
    return {case.name: (ctxs[case.name], run) for case, run in zip(ordered, result["runs"],
                                                                   strict=True)}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_dag_runs_the_job_on_the_cluster(cluster: Cluster, case: Case,
                                             dag_runs: dict[str, tuple[Ctx, dict[str, Any]]],
                                             ) -> None:
    ctx, run = dag_runs[case.name]
    task = {"compact": "compact", "gc": "gc", "rescale": "rescale",
            "export": "export"}[case.job] + "_spark"
    assert run["state"] == "success", run["tasks"]
    assert run["tasks"][task]["state"] == "success", run["tasks"]
    check_run(cluster, ctx, case, run["xcom"][task]["return_value"])
