"""What the slatelib DAGs share. Airflow puts the DAGs folder on ``sys.path``, so the DAG
files import this module by name; it holds no DAG and imports nothing from slatelib.

Every DAG is ``plan >> [<job>, <job>_spark]``:

- ``plan`` (a branch) reads the params and the Airflow Variables, and either skips the run
  (no database configured: a clean skip, not a failure and a retry), fails it without retry
  with a message that says what to set (a project directory without ``jobs/``, no slatelib
  installed, a missing executor environment, a runner whose spark-submit cannot start:
  :func:`check_runner`), or pushes the job's arguments (XCom ``plan``) and picks the
  runner;
- ``<job>`` runs ``spark-submit`` in a shell (``BashOperator``; no provider needed);
- ``<job>_spark`` runs it through ``SparkSubmitOperator`` with a Spark connection
  (``spark_conn_id``, default ``spark_default``); present only when
  ``apache-airflow-providers-apache-spark`` is installed.

The job's JSON report (``--report``) is read back by the task that ran it and pushed to
XCom: ``return_value`` is the report, ``headline`` its one-line summary. A job that fails
with a permanent exit code (invalid_input, fenced, data_error) or a spark-submit that
cannot start fails its task without retry (:func:`fail_if_permanent`).

Variables (all optional, a param set for the run wins):

- ``slatelib_project_dir``: a slatelib checkout on the workers (``jobs/``, ``conf/`` and,
  if present, ``.venv`` are found there). Optional: without it (and without the
  ``project_dir`` param) the run uses the slatelib installed in the ``python`` param's
  interpreter (default: Airflow's own), spark-submit runs that package's job module
  (``slatelib/jobs/<job>.py``), the spark-submit next to that interpreter (else the one on
  ``PATH``), the code defaults of the settings (no ``conf/base.toml``; absolute
  ``conf_files`` still apply), executors run the driver's Python unless ``executor_env``
  names a packed env by absolute path, and the export's jars come as ``--packages`` of the
  installed ``slatelib/spark/jars.lock``. Relative paths then fail the run, as nothing
  anchors them;
- ``slatelib_databases``: the databases, a JSON list or one per line;
- ``slatelib_dbs_file``: a file with one database per line.

A database is its URL, or a JSON object ``{"db": URL, "wal_store": URL}`` for one that keeps
its WAL in its own object store (SlateDB's ``with_wal_object_store``; ``"wal_store": ""``:
in the database's store, whatever the run's ``wal_store`` param says). Such an entry
reaches the job as ``--db '{"db": ..., "wal_store": ...}'``, which the jobs (and
``--dbs-file`` lines) take as it is. The ``wal_store`` param (``--wal-store``) names the
WAL store of every database without one of its own.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

try:  # Airflow 3
    from airflow.sdk import DAG, Param, Variable
except ImportError:  # Airflow 2
    from airflow import DAG
    from airflow.models import Variable
    from airflow.models.param import Param
try:  # Airflow 3 (and 2.x with the standard provider)
    from airflow.providers.standard.operators.bash import BashOperator
    from airflow.providers.standard.operators.python import BranchPythonOperator
except ImportError:  # Airflow 2
    from airflow.operators.bash import BashOperator
    from airflow.operators.python import BranchPythonOperator
try:  # Airflow 3
    from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException
except ImportError:  # Airflow 2
    from airflow.exceptions import AirflowFailException, AirflowSkipException

try:
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
except ImportError:  # the provider is optional: the BashOperator runner needs none
    SparkSubmitOperator = None

EXECUTOR_ENV = "dist/slatelib-executor-env.tar.gz"
"""What ``make package-executor-env`` builds (a packed venv: slatelib, obstore, pyarrow,
pandas), relative to the project directory; shipped with ``--archives ...#env``."""

BASH, SPARK_OPERATOR = "bash", "spark_submit_operator"
RUNNERS = [SPARK_OPERATOR, BASH] if SparkSubmitOperator is not None else [BASH]

VAR_PROJECT_DIR = "slatelib_project_dir"
VAR_DATABASES = "slatelib_databases"
VAR_DBS_FILE = "slatelib_dbs_file"

ArgsFn = Callable[[dict[str, Any]], list[str]]


def get_variable(name: str) -> str | None:
    """An Airflow Variable, or None when it is not set (Airflow 3 and 2 spell the default
    differently)."""
    try:
        value = Variable.get(name, default=None)
    except TypeError:  # Airflow 2
        value = Variable.get(name, default_var=None)
    return None if value is None else str(value)


DATABASE_ENTRY_SCHEMA: dict[str, Any] = {"anyOf": [
    {"type": "string"},
    {"type": "object", "required": ["db"], "additionalProperties": False,
     "properties": {"db": {"type": "string"}, "wal_store": {"type": "string"}}},
]}
"""One database of a list: its URL, or ``{"db": URL, "wal_store": URL}``."""


def database_entry(entry: Any, where: str) -> str:
    """One database as the jobs' ``--db`` takes it: a URL, or the entry's JSON object
    (``{"db", "wal_store"}``).

    Raises:
        AirflowFailException: anything else (naming ``where``).
    """
    if isinstance(entry, str):
        text = entry.strip()
        if text.startswith("{"):
            try:
                entry = json.loads(text)
            except ValueError as exc:
                raise AirflowFailException(f"{where}: {text!r} is not JSON: {exc}") from None
        else:
            return text
    if (not isinstance(entry, dict) or not isinstance(entry.get("db"), str)
            or not entry["db"].strip() or set(entry) - {"db", "wal_store"}
            or not isinstance(entry.get("wal_store", ""), str)):
        raise AirflowFailException(
            f'{where}: a database is a URL or {{"db": URL, "wal_store": URL}}, got {entry!r}')
    out = {"db": entry["db"].strip()}
    if "wal_store" in entry:
        out["wal_store"] = entry["wal_store"].strip()
    return out["db"] if "wal_store" not in out else json.dumps(out, sort_keys=True)


def parse_databases(text: str | None) -> list[str]:
    """A ``slatelib_databases`` Variable: a JSON list (of URLs and ``{"db", "wal_store"}``
    objects), or one per line (``#`` comments and blank lines ignored), each as
    :func:`database_entry` gives it."""
    text = (text or "").strip()
    if not text:
        return []
    if text.startswith("["):
        entries = json.loads(text)
        if not isinstance(entries, list):
            raise AirflowFailException(f"Variable {VAR_DATABASES} must be a JSON list")
        return [database_entry(e, f"Variable {VAR_DATABASES}") for e in entries
                if not isinstance(e, str) or e.strip()]
    return [database_entry(ln, f"Variable {VAR_DATABASES}") for ln in text.splitlines()
            if ln.strip() and not ln.lstrip().startswith("#")]


def common_params(*, selection: bool, **own: Any) -> dict[str, Any]:
    """The typed params every slatelib DAG takes (override per run with ``dag_run.conf``),
    plus the job's ``own``; ``selection``: also the database selection."""
    params: dict[str, Any] = {
        "project_dir": Param("", type="string", description=(
            f"slatelib checkout on the worker; empty: Variable {VAR_PROJECT_DIR}, and "
            "without it the installed slatelib (of the python param's interpreter)")),
        "runner": Param(RUNNERS[0], type="string", enum=RUNNERS, description=(
            "spark_submit_operator (SparkSubmitOperator, Spark connection) or bash "
            "(spark-submit in a shell)")),
        "spark_conn_id": Param("spark_default", type="string",
                               description="spark_submit_operator: the Spark connection"),
        "spark_submit": Param("", type="string", description=(
            "bash: the spark-submit to run; empty: <project_dir>/.venv/bin/spark-submit "
            "(without project_dir: the one next to the driver's Python) if present, else "
            "spark-submit on PATH")),
        "spark_submit_args": Param("", type="string", description=(
            "bash: extra spark-submit options, e.g. --master yarn --deploy-mode client")),
        "spark_conf": Param({}, type="object", description="extra Spark properties"),
        "python": Param("", type="string", description=(
            "the driver's Python; empty: <project_dir>/.venv/bin/python if present, and "
            "without project_dir Airflow's own Python (where slatelib must be installed)")),
        "jars": Param(JARS_AUTO, type="string", description=(
            "jars for spark-submit's --jars: auto (the export's: the checkout's fetched "
            "Delta jars from make jars, and the S3A ones for an s3:// target), a comma-"
            "separated list of paths, or empty for none (spark_submit_args --packages ...)")),
        "executor_env": Param(EXECUTOR_ENV, type="string", description=(
            "packed venv for the executors (make package-executor-env), relative to "
            "project_dir (without project_dir: an absolute path, else none); empty: "
            "executors use the driver's Python (local masters, or nodes with slatelib "
            "installed)")),
    }
    if selection:
        params.update({
            "databases": Param([], type="array", items=DATABASE_ENTRY_SCHEMA, description=(
                'database URLs, or {"db": URL, "wal_store": URL} for one whose WAL is in '
                f"its own object store; empty: Variable {VAR_DATABASES}")),
            "dbs_file": Param("", type="string", description=(
                f"file of database URLs; empty: Variable {VAR_DBS_FILE}")),
            "discover": Param("", type="string",
                              description="every database under this prefix URL"),
        })
    params.update({
        "store_root": Param("", type="string",
                            description="root the databases were created in (clones)"),
        "wal_store": Param("", type="string", description=(
            "object store that keeps the WAL of every database without its own (--wal-store, "
            "SlateDB's with_wal_object_store); empty: the conf files' [object_store] "
            "wal_store")),
        "conf_files": Param(["conf/base.toml"], type="array", items={"type": "string"},
                            description=("settings TOML files, relative to project_dir "
                                         "(without it: absolute; the default is then "
                                         "skipped and the code defaults apply)")),
        "env_files": Param([], type="array", items={"type": "string"}, description=(
            "env files (--env-file: SLATELIB_*/AWS_* variables such as the store's "
            "credentials), relative to project_dir; the job passes them on to the "
            "executors as spark.executorEnv.*")),
        **own,
        "report_dir": Param("", type="string", description=(
            "keep the JSON reports here; empty: a temporary file (the report is in XCom)")),
    })
    return params


DEFAULT_CONF_FILES = ("conf/base.toml",)
"""The checkout's default settings files (skipped without a checkout: the code defaults
are the same)."""

JARS_AUTO = "auto"
JARS_LOCK = "slatelib/spark/jars.lock"
JOB_JAR_FEATURES = {"export": ("delta",)}
"""Per job, the jar features (slatelib/spark/jars.lock) spark-submit needs; s3a is added for
an S3 target."""


def locked_coordinates(lock: Path, job: str, argv: list[str]) -> list[str]:
    """The Maven coordinates (``group:artifact:version``) of the job's jar features in the
    lock file ``lock`` (none if it is absent), with the S3A ones when ``--to`` is on S3."""
    features = set(JOB_JAR_FEATURES.get(job, ()))
    if not features or not lock.is_file():
        return []
    to = argv[argv.index("--to") + 1] if "--to" in argv[:-1] else ""
    if to.startswith(("s3://", "s3a://")):
        features.add("s3a")
    out: list[str] = []
    for line in lock.read_text(encoding="utf-8").splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) == 3 and fields[2] in features:
            out.append(fields[0])
    return out


def job_jars(project: Path, job: str, argv: list[str], given: str) -> list[str]:
    """The ``--jars`` of a run: ``given`` (a comma list), none when it is empty, else
    (``auto``) the checkout's fetched jars of the job's features (``build/jars``, from
    ``make jars``), with the S3A ones when ``--to`` is on S3. A missing jar is an error that
    says to run ``make jars``."""
    if given != JARS_AUTO:
        return [j.strip() for j in given.split(",") if j.strip()]
    out: list[str] = []
    for coordinates in locked_coordinates(project / JARS_LOCK, job, argv):
        _, artifact, version = coordinates.split(":")
        path = project / "build" / "jars" / f"{artifact}-{version}.jar"
        if not path.is_file():
            raise AirflowFailException(
                f"{path} is missing: run `make jars` in {project}, or trigger with "
                '"jars": "" and pass --packages in spark_submit_args')
        out.append(str(path))
    return out


def _under(project: Path | None, path: str, what: str = "path") -> str:
    """``path`` under ``project`` when it is relative; without a project, a relative path
    fails the run (nothing anchors it)."""
    if not path or os.path.isabs(path):
        return path
    if project is None:
        raise AirflowFailException(
            f"{what} {path!r} is relative, and no slatelib project directory is set "
            f"(Variable {VAR_PROJECT_DIR} or the project_dir param): give an absolute path")
    return str(project / path)


def selection_args(params: dict[str, Any], project: Path | None = None, *,
                   resolve: bool = False) -> list[str]:
    """``--db``/``--dbs-file``/``--discover`` from the params, else the Variables; empty
    when nothing names a database. ``resolve``: a relative ``dbs_file`` is taken under
    ``project`` (an error without one)."""
    databases = [database_entry(d, "param databases") for d in params.get("databases") or []]
    dbs_file = params.get("dbs_file") or ""
    discover = params.get("discover") or ""
    if not (databases or dbs_file or discover):
        databases = parse_databases(get_variable(VAR_DATABASES))
        dbs_file = get_variable(VAR_DBS_FILE) or ""
    argv = [a for db in databases for a in ("--db", db)]
    if dbs_file:
        argv += ["--dbs-file", _under(project, dbs_file, "dbs_file") if resolve else dbs_file]
    if discover:
        argv += ["--discover", discover]
    return argv


def project_dir(params: dict[str, Any]) -> Path | None:
    """The slatelib checkout: the param, else the Variable, else None (the installed
    package runs); fails (no retry) if it holds no ``jobs/``."""
    where = params.get("project_dir") or get_variable(VAR_PROJECT_DIR)
    if not where:
        return None
    project = Path(where)
    if not (project / "jobs").is_dir():
        raise AirflowFailException(
            f"{project} has no jobs/ directory: {VAR_PROJECT_DIR} / project_dir must name "
            "the slatelib checkout")
    return project


FIND_SLATELIB = ("import importlib.util as u; s = u.find_spec('slatelib'); "
                 "print((s.submodule_search_locations or [''])[0] if s else '')")
"""Prints the directory of the installed slatelib package (without importing it)."""


def installed_slatelib(python: str) -> Path:
    """The directory of the slatelib package installed for ``python`` (this interpreter
    when it is empty or this one): found without importing it; fails (no retry) when
    slatelib is not installed there."""
    if python and python != sys.executable:
        try:
            proc = subprocess.run([python, "-c", FIND_SLATELIB], capture_output=True,
                                  text=True, timeout=120, check=False)
            where = proc.stdout.strip() if proc.returncode == 0 else ""
        except OSError as exc:
            raise AirflowFailException(f"the python param {python!r} cannot start: {exc}") \
                from exc
    else:
        spec = importlib.util.find_spec("slatelib")
        where = (spec.submodule_search_locations or [""])[0] if spec else ""
    package = Path(where) if where else None
    if package is None or not (package / "jobs").is_dir():
        raise AirflowFailException(
            f"slatelib is not installed for {python or sys.executable} (pip install "
            "'slatelib[spark]' there, or trigger with the python param naming an interpreter "
            f"that has it), and no project directory is set (Variable {VAR_PROJECT_DIR} or "
            "the project_dir param: a slatelib checkout on the workers)")
    return package


def job_plan(job: str, params: dict[str, Any], own_args: ArgsFn, *, selection: bool,
             ) -> dict[str, Any]:
    """What the run task needs: ``project_dir`` (``""``: the installed package),
    ``application``, ``argv`` (without ``--report``), ``python``, ``executor_env``,
    ``jars`` and ``packages``. Raises AirflowSkipException when the DAG selects databases
    and none is configured."""
    argv: list[str] = []
    if selection:
        argv = selection_args(params)
        if not argv:
            raise AirflowSkipException(
                f"no database configured: set the Airflow Variable {VAR_DATABASES} (a JSON "
                f"list or one URL per line) or {VAR_DBS_FILE}, or trigger with "
                '{"databases": [...]} / "dbs_file" / "discover"')
    project = project_dir(params)
    python = params.get("python") or ""
    if project is not None:
        application = project / "jobs" / f"{job}.py"
        if not application.is_file():
            raise AirflowFailException(
                f"{application} is missing: is {project} a slatelib checkout?")
        if not python and (project / ".venv/bin/python").is_file():
            python = str(project / ".venv/bin/python")
    else:
        python = python or sys.executable
        package = installed_slatelib(python)
        application = package / "jobs" / f"{job}.py"
        if not application.is_file():
            raise AirflowFailException(f"{application} is missing: the installed slatelib "
                                       f"at {package} has no job {job!r}")
    # The job's own first: rescale's subcommand precedes every option.
    argv = own_args(params) + (selection_args(params, project, resolve=True)
                               if selection else [])
    if params.get("store_root"):
        argv += ["--store-root", params["store_root"]]
    if params.get("wal_store"):
        argv += ["--wal-store", params["wal_store"]]
    for conf in params.get("conf_files") or []:
        if project is None and conf in DEFAULT_CONF_FILES:
            continue  # the checkout's defaults; the installed package has the same in code
        argv += ["--conf", _under(project, conf, "conf file")]
    for env_file in params.get("env_files") or []:
        argv += ["--env-file", _under(project, env_file, "env file")]
    env = params.get("executor_env") or ""
    if env and not (project is None and env == EXECUTOR_ENV):
        env = _under(project, env, "executor_env")
        if not os.path.isfile(env):
            where = f"in {project}" if project is not None else "(docs/cluster.md)"
            raise AirflowFailException(
                f"executor environment {env} is missing: run `make package-executor-env` "
                f"{where}, or trigger with executor_env \"\" for a local master")
    else:
        env = "" if project is None else env
    given_jars = str(params.get("jars", JARS_AUTO) or "")
    packages: list[str] = []
    if project is not None or given_jars != JARS_AUTO:
        jars = job_jars(project or Path("/"), job, argv, given_jars)
    else:  # no fetched jars without a checkout: spark-submit resolves the pinned ones
        jars = []
        packages = locked_coordinates(application.parent.parent / "spark" / "jars.lock",
                                      job, argv)
    return {"project_dir": "" if project is None else str(project),
            "application": str(application), "argv": argv, "python": python,
            "executor_env": env, "jars": jars, "packages": packages}


def _plan_callable(job: str, own_args: ArgsFn, selection: bool, task_id: str,
                   ) -> Callable[..., str]:
    def plan(**context: Any) -> str:
        params = dict(context["params"])
        planned = job_plan(job, params, own_args, selection=selection)
        context["ti"].xcom_push(key="plan", value=planned)
        runner = params.get("runner") or RUNNERS[0]
        if runner == SPARK_OPERATOR and SparkSubmitOperator is None:
            raise AirflowFailException("runner spark_submit_operator needs "
                                       "apache-airflow-providers-apache-spark")
        check_runner(runner, params, planned)
        return f"{task_id}_spark" if runner == SPARK_OPERATOR else task_id
    return plan


def _report_path(context: Any, name: str) -> tuple[str, bool]:
    """Where the job writes its report, and whether to keep it."""
    report_dir = context["params"].get("report_dir") or ""
    ts = context.get("ts_nodash") or datetime.now().strftime("%Y%m%dT%H%M%S")
    if report_dir:
        os.makedirs(report_dir, exist_ok=True)
        return os.path.join(report_dir, f"{name}-{ts}.json"), True
    return os.path.join(tempfile.mkdtemp(prefix="slatelib-report-"), f"{name}.json"), False


def _publish(task: Any, context: Any, path: str, keep: bool) -> dict[str, Any] | None:
    """Read the job's report; push its headline to XCom; return it (the return_value)."""
    try:
        with open(path, encoding="utf-8") as f:
            report: dict[str, Any] = json.load(f)
    except (OSError, ValueError):
        task.log.warning("the job wrote no report at %s", path)
        return None
    finally:
        if not keep:
            shutil.rmtree(os.path.dirname(path), ignore_errors=True)
    headline = report.get("headline")
    if headline:
        task.log.info("%s", headline)
        context["ti"].xcom_push(key="headline", value=headline)
    return report


class _JobTask:
    """The run tasks' shared part: the plan from XCom, the report back to XCom."""

    report_name: str | Callable[[dict[str, Any]], str]

    def _plan(self, context: Any) -> dict[str, Any]:
        plan: dict[str, Any] = context["ti"].xcom_pull(task_ids="plan", key="plan")
        return plan

    def _name(self, context: Any) -> str:
        name = self.report_name
        return name if isinstance(name, str) else name(dict(context["params"]))


class SlatelibBashOperator(_JobTask, BashOperator):
    """``spark-submit`` of the planned job in a shell, from the project directory (if
    any)."""

    def __init__(self, *, report_name: Any, **kwargs: Any) -> None:
        super().__init__(bash_command="true", **kwargs)
        self.report_name = report_name

    def execute(self, context: Any) -> Any:
        plan = self._plan(context)
        params = context["params"]
        project = Path(plan["project_dir"]) if plan["project_dir"] else None
        submit = bash_spark_submit(plan, params)
        path, keep = _report_path(context, self._name(context))
        cmd = [submit, *shlex.split(params.get("spark_submit_args") or "")]
        for key, value in _spark_conf(plan, params).items():
            cmd += ["--conf", f"{key}={value}"]
        if plan["executor_env"]:
            cmd += ["--archives", plan["executor_env"] + "#env"]
        if plan.get("jars"):
            cmd += ["--jars", ",".join(plan["jars"])]
        if plan.get("packages"):
            cmd += ["--packages", ",".join(plan["packages"])]
        cmd += [plan["application"], *plan["argv"], "--report", path]
        self.bash_command = shlex.join(cmd)
        if project is not None:
            self.cwd = str(project)
        self.env = {**(self.env or {}), **_driver_env(plan)}
        self.append_env = True
        try:
            super().execute(context)
        except Exception as exc:
            fail_if_permanent(exc, path)
            raise
        finally:
            report = _publish(self, context, path, keep)
        return report


def _spark_conf(plan: dict[str, Any], params: dict[str, Any]) -> dict[str, str]:
    conf: dict[str, str] = {}
    if plan["python"]:
        conf["spark.pyspark.driver.python"] = plan["python"]
    if plan["executor_env"]:
        conf["spark.pyspark.python"] = "./env/bin/python"
    elif plan["python"]:
        conf["spark.pyspark.python"] = plan["python"]
    conf.update({str(k): str(v) for k, v in (params.get("spark_conf") or {}).items()})
    return conf


def _driver_env(plan: dict[str, Any]) -> dict[str, str]:
    env = {"PYTHONUNBUFFERED": "1"}
    if plan["python"]:
        env["PYSPARK_DRIVER_PYTHON"] = plan["python"]
        if not plan["executor_env"]:
            env["PYSPARK_PYTHON"] = plan["python"]
    return env


if SparkSubmitOperator is not None:
    class SlatelibSparkSubmitOperator(_JobTask, SparkSubmitOperator):  # type: ignore[misc, valid-type]
        """``SparkSubmitOperator`` of the planned job, with the run's Spark connection."""

        def __init__(self, *, report_name: Any, **kwargs: Any) -> None:
            super().__init__(application="", **kwargs)
            self.report_name = report_name

        def execute(self, context: Any) -> Any:
            plan = self._plan(context)
            params = context["params"]
            path, keep = _report_path(context, self._name(context))
            self.application = plan["application"]
            if getattr(self, "name", None) in (None, "", "arrow-spark"):  # the provider's default
                self.name = "slatelib-" + Path(plan["application"]).stem  # named for its job
            self.application_args = [*plan["argv"], "--report", path]
            self.conf = {**(self.conf or {}), **_spark_conf(plan, params)}
            if plan["executor_env"]:
                self._archives = plan["executor_env"] + "#env"
            if plan.get("jars"):
                self.jars = ",".join(plan["jars"])
            if plan.get("packages"):
                self._packages = ",".join(plan["packages"])
            self._conn_id = params.get("spark_conn_id") or "spark_default"
            self.env_vars = {**(self.env_vars or {}), **_driver_env(plan)}
            self._hook = None
            try:
                super().execute(context)
            except Exception as exc:
                fail_if_permanent(exc, path)
                raise
            finally:
                report = _publish(self, context, path, keep)
            return report
else:
    SlatelibSparkSubmitOperator = None


def job_dag(dag_id: str, *, job: str, task_id: str, own_args: ArgsFn, params: dict[str, Any],
            report_name: str | Callable[[dict[str, Any]], str], timeout: timedelta,
            selection: bool = True, **dag_kwargs: Any) -> DAG:
    """One slatelib DAG: ``plan`` then the job through the runner the run chose."""
    with DAG(dag_id=dag_id, start_date=datetime(2026, 1, 1), catchup=False,
             max_active_runs=1, params=params, **dag_kwargs) as dag:
        plan = BranchPythonOperator(
            task_id="plan", python_callable=_plan_callable(job, own_args, selection, task_id),
            retries=0)
        bash = SlatelibBashOperator(task_id=task_id, report_name=report_name,
                                    execution_timeout=timeout)
        plan >> bash
        if SlatelibSparkSubmitOperator is not None:
            spark = SlatelibSparkSubmitOperator(task_id=f"{task_id}_spark",
                                                report_name=report_name,
                                                execution_timeout=timeout)
            plan >> spark
    return dag


# --- the runner can start; permanent failures are not retried --------------------------

PERMANENT_STATUSES = {"invalid_input": 2, "fenced": 3, "data_error": 5}
"""The job exit codes (slatelib.exit_codes) that a retry cannot fix: a wrong command line,
path or configuration, a newer writer or compactor, damaged data or not a database."""

_EXIT_CODE = re.compile(r"(?:exit code|error code is:?|returncode)\s*(-?\d+)", re.IGNORECASE)


def bash_spark_submit(plan: dict[str, Any], params: dict[str, Any]) -> str:
    """The spark-submit the bash runner runs: the ``spark_submit`` param, else the one in
    the project's ``.venv`` (without a project: next to the driver's Python), else
    ``spark-submit`` on ``PATH``."""
    given = str(params.get("spark_submit") or "")
    if given:
        return given
    project = plan.get("project_dir") or ""
    if project:
        local = Path(project) / ".venv/bin/spark-submit"
    elif plan.get("python"):
        local = Path(plan["python"]).parent / "spark-submit"
    else:
        return "spark-submit"
    return str(local) if local.is_file() else "spark-submit"


def operator_spark_binary(conn_id: str) -> str:
    """The spark-submit ``SparkSubmitOperator`` runs for the Spark connection ``conn_id``:
    its ``spark-binary`` extra, else ``spark-submit`` (looked up on ``PATH``)."""
    try:
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

        binary = SparkSubmitHook(conn_id=conn_id)._resolve_connection().get("spark_binary")
    except Exception:  # no such connection, or a provider that resolves it otherwise
        binary = None
    return str(binary or "spark-submit")


def _can_start(command: str) -> bool:
    if os.sep in command:
        return os.path.isfile(command) and os.access(command, os.X_OK)
    return shutil.which(command) is not None


def check_runner(runner: str, params: dict[str, Any], plan: dict[str, Any] | None) -> None:
    """Fail the run now (no retry) when the runner's spark-submit cannot start on this
    worker, saying what to set.

    Raises:
        AirflowFailException: naming the command, the ``PATH`` searched and the fixes.
    """
    plan = plan or {}
    path = os.environ.get("PATH", "")
    if runner == SPARK_OPERATOR:
        conn_id = str(params.get("spark_conn_id") or "spark_default")
        binary = operator_spark_binary(conn_id)
        if _can_start(binary):
            return
        bash = bash_spark_submit(plan, {})
        hint = (f'; or trigger with "runner": "bash", which would run {bash}'
                if _can_start(bash) and os.sep in bash else
                '; or trigger with "runner": "bash" and "spark_submit": "/path/to/spark-submit"')
        raise AirflowFailException(
            f"runner spark_submit_operator cannot start: {binary!r} (the Spark connection "
            f"{conn_id!r}'s spark-binary, default spark-submit) is not on this worker's PATH "
            f"({path}). Put Spark's bin directory (or a venv with pyspark) on the PATH of "
            f"Airflow's workers{hint}")
    if runner == BASH:
        submit = bash_spark_submit(plan, params)
        if _can_start(submit):
            return
        where = "is not an executable file" if os.sep in submit else \
            f"is not on this worker's PATH ({path})"
        raise AirflowFailException(
            f"runner bash cannot start: {submit!r} {where}. Trigger with \"spark_submit\": "
            "\"/path/to/spark-submit\", or install pyspark in the project's .venv (or next "
            "to the python param's interpreter), or put Spark's bin directory on the PATH")


def job_exit_code(exc: BaseException, report_path: str) -> int | None:
    """The job's exit code after its task failed with ``exc``: from its report's
    ``status`` when it wrote one, else from the exception's message (``exit code 2``,
    ``Error code is: 2``); None when neither says."""
    try:
        with open(report_path, encoding="utf-8") as f:
            status = json.load(f).get("status")
        if status in PERMANENT_STATUSES:
            return PERMANENT_STATUSES[status]
    except (OSError, ValueError, AttributeError):
        pass
    match = _EXIT_CODE.search(str(exc))
    return int(match.group(1)) if match else None


def fail_if_permanent(exc: BaseException, report_path: str) -> None:
    """Turn a task failure that no retry can fix into ``AirflowFailException`` (Airflow
    skips the retries): a spark-submit that cannot start, or a job that exited with a
    permanent code (:data:`PERMANENT_STATUSES`). Returns for anything else.

    Raises:
        AirflowFailException: the failure is permanent.
    """
    if isinstance(exc, AirflowFailException):
        return
    if isinstance(exc, FileNotFoundError | PermissionError):
        raise AirflowFailException(
            f"spark-submit cannot start: {exc}. Set the spark_submit param (bash runner) or "
            "put Spark's bin directory on the workers' PATH") from exc
    code = job_exit_code(exc, report_path)
    names = {v: k for k, v in PERMANENT_STATUSES.items()}
    if code in names:
        raise AirflowFailException(
            f"the job failed with exit code {code} ({names[code]}): a retry cannot fix it; "
            "see the job's log and report above, fix the parameters, configuration or data, "
            "then trigger again") from exc
