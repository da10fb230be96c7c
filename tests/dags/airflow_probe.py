"""Runs inside the Airflow venv (``.venv-airflow``), never in the project's: loads the DAGs
folder into a DagBag, then runs ``dag.test()`` for each run read as JSON from stdin
(``[{"dag_id", "conf"}, ...]``; ``"dag_id": null`` only loads), and prints one JSON document:
the import errors, each DAG's shape, and per run the DAG run's state, each task's state
and try number, and the XComs pushed. Usage: ``python airflow_probe.py DAGS_FOLDER``."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from typing import Any


def dag_info(dag: Any) -> dict[str, Any]:
    return {
        "schedule": str(dag.schedule), "max_active_runs": dag.max_active_runs,
        "catchup": dag.catchup, "tags": sorted(dag.tags),
        "params": {k: {"value": v.value, "schema": v.schema} for k, v in dag.params.items()},
        "tasks": {t.task_id: {"operator": type(t).__name__, "retries": t.retries,
                              "timeout_s": t.execution_timeout.total_seconds()
                              if t.execution_timeout else None,
                              "downstream": sorted(t.downstream_task_ids)}
                  for t in dag.tasks},
    }


def xcoms(dag_id: str, run_id: str) -> dict[str, dict[str, Any]]:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    out: dict[str, dict[str, Any]] = {}
    with create_session() as session:
        rows = session.scalars(select(XComModel).where(XComModel.dag_id == dag_id,
                                                       XComModel.run_id == run_id)).all()
        for row in rows:
            value = row.value
            if isinstance(value, (str, bytes)):
                try:
                    value = json.loads(value)
                except ValueError:
                    pass
            out.setdefault(row.task_id, {})[row.key] = value
    return out


def main() -> None:
    folder = sys.argv[1]
    sys.path.insert(0, folder)  # as the DAG processor does for its bundle
    from airflow.models import DagBag

    bag = DagBag(dag_folder=folder)
    out: dict[str, Any] = {
        "import_errors": {k: str(v) for k, v in bag.import_errors.items()},
        "dags": {dag_id: dag_info(dag) for dag_id, dag in bag.dags.items()},
        "runs": [],
    }
    for i, run in enumerate(json.load(sys.stdin)):
        # A fresh bag per run, as each task of a deployed run parses the files anew
        # (dag.test() runs in this process, and a run's params must not leak into the next).
        dag = DagBag(dag_folder=folder).get_dag(run["dag_id"])
        when = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=i)
        dr = dag.test(run_conf=run.get("conf") or {}, logical_date=when)
        tis = {ti.task_id: {"state": str(ti.state), "try_number": ti.try_number}
               for ti in dr.get_task_instances()}
        out["runs"].append({"dag_id": dag.dag_id, "state": str(dr.state), "tasks": tis,
                            "xcom": xcoms(dag.dag_id, dr.run_id)})
    print("PROBE-RESULT " + json.dumps(out, default=str))


if __name__ == "__main__":
    main()
