"""Real Apache Airflow 3 for the tests (its own venv ``.venv-airflow``, which ``make test``
builds from ``tests/dags/airflow-requirements.txt``): :func:`probe` runs DAGs with
``dag.test()`` through ``airflow_probe.py`` in a fresh ``AIRFLOW_HOME``, with a Spark
connection ``spark_default`` and ``spark-submit`` on PATH (the project's venv's, as a
worker's Spark install would put it). Used by ``tests/dags`` (a ``local[2]`` connection)
and by the cluster tier (a connection to the standalone master)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SPARK_SUBMIT = ROOT / ".venv" / "bin" / "spark-submit"
LOCAL_CONNECTION = {"conn_type": "spark", "host": "local[2]"}


def airflow_python() -> str:
    path = os.environ.get("SLATELIB_AIRFLOW_PYTHON") or str(ROOT / ".venv-airflow/bin/python")
    assert Path(path).is_file(), (
        f"no Airflow interpreter at {path}: run `make test-dags` (or `make test`), which "
        "builds .venv-airflow, or point SLATELIB_AIRFLOW_PYTHON at a Python with "
        "apache-airflow 3 and apache-airflow-providers-apache-spark installed")
    return path


def probe(tmp: Path, runs: list[dict[str, Any]], *,
          connection: dict[str, Any] | None = None, env: dict[str, str] | None = None,
          timeout: float = 600, **variables: str) -> dict[str, Any]:
    """Run the probe in the Airflow venv with a fresh AIRFLOW_HOME (SQLite) under ``tmp``:
    ``connection`` is ``spark_default`` (default ``local[2]``), ``env`` more variables of
    the Airflow worker's environment, ``variables`` Airflow Variables."""
    import pyspark

    home = tmp / "airflow-home"
    home.mkdir(parents=True, exist_ok=True)
    bin_dir = tmp / "bin"  # spark-submit on PATH, as the Spark connection expects it
    bin_dir.mkdir(exist_ok=True)
    if not (bin_dir / "spark-submit").exists():
        (bin_dir / "spark-submit").symlink_to(SPARK_SUBMIT)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLATELIB_", "AIRFLOW"))}
    full = {**base, "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "airflow_dags"),
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(connection or LOCAL_CONNECTION),
            "SPARK_HOME": str(Path(pyspark.__file__).parent),
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", **(env or {})}
    for name, value in variables.items():
        full[f"AIRFLOW_VAR_{name.upper()}"] = value
    python = airflow_python()
    if not (home / "airflow.db").exists():
        done = subprocess.run([python, "-m", "airflow", "db", "migrate"], env=full,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-4000:]
    done = subprocess.run([python, str(ROOT / "tests/dags/airflow_probe.py"),
                           str(ROOT / "airflow_dags")], input=json.dumps(runs),
                          capture_output=True, text=True, env=full, timeout=timeout)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("PROBE-RESULT ")]
    assert done.returncode == 0 and lines, (done.stdout[-6000:], done.stderr[-6000:])
    result: dict[str, Any] = json.loads(lines[-1][len("PROBE-RESULT "):])
    return result
