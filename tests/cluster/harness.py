"""A Spark standalone cluster for the cluster tier, started from PySpark's own distribution.

Layout (:class:`Cluster`), when namespaces can be made (root; ``tests/cluster/netns.py``):

- the **submitting machine** is this one, on the bridge's address: the drivers of every
  ``spark-submit`` / ``slate-spark`` / Airflow run, and the Spark master;
- **two workers** (``w1``, ``w2``), one core each, each its own host: its own network
  namespace and address, its own hostname, and a mount namespace in which the checkout's
  ``.venv``, ``.venv-airflow``, ``slatelib/`` and ``jobs/`` are empty. Their Spark is a
  copy of PySpark's distribution outside the checkout, and their environment holds nothing
  of ours: executors run only what a cluster would give them, the packed env
  (``--archives dist/slatelib-executor-env.tar.gz#env``) or the node install
  (``build/executor-env``: slatelib installed from the built wheel);
- **the S3 host** (``s3``): the test S3 server behind the gate of ``s3_gate.py``, reached
  over the bridge by drivers and executors alike, which refuses requests not signed with
  the test's access key. Credentials reach executors only through ``--env-file`` or
  ``spark.executorEnv.*``.

Without namespaces (not root), the same processes run on 127.0.0.1 and the checkout is not
hidden from the workers; everything else is the same.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.cluster.netns import TestNet, can_make_nets, reap_stale

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv"
PACKED_ENV = ROOT / "dist" / "slatelib-executor-env.tar.gz"
NODE_ENV = ROOT / "build" / "executor-env"
ACCESS_KEY = "cluster-tier-key"
SECRET_KEY = "cluster-tier-secret"
REGION = "us-east-1"
WORKERS = ("w1", "w2")
HIDDEN = (ROOT / ".venv", ROOT / ".venv-airflow", ROOT / "slatelib", ROOT / "jobs")
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""JVMs that start quickly (C1 only, serial GC): the tier's data is small."""


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _java_home() -> str:
    java = shutil.which("java")
    if os.environ.get("JAVA_HOME"):
        return os.environ["JAVA_HOME"]
    assert java, "no java on PATH: the cluster tier needs Java 17"
    return str(Path(os.path.realpath(java)).parent.parent)


def _link_tree(src: Path, dst: Path) -> None:
    """Copy ``src`` to ``dst`` with hard links where the file system allows."""
    def link(s: str, d: str) -> None:
        try:
            os.link(s, d)
        except OSError:
            shutil.copy2(s, d)
    shutil.copytree(src, dst, copy_function=link, symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__"))


@dataclass
class RunResult:
    """A finished submission: its exit code, output and (if it printed one) report."""

    argv: list[str]
    returncode: int
    stdout: str
    stderr: str

    @property
    def report(self) -> dict[str, Any]:
        try:
            got: dict[str, Any] = json.loads(self.stdout)
            return got
        except ValueError:
            raise AssertionError(f"no JSON report on stdout (exit {self.returncode}):\n"
                                 f"{self.stdout[-3000:]}\n--- stderr ---\n"
                                 f"{self.stderr[-6000:]}") from None

    def explain(self) -> str:
        return (f"$ {' '.join(self.argv)}\nexit {self.returncode}\n--- stdout ---\n"
                f"{self.stdout[-3000:]}\n--- stderr ---\n{self.stderr[-8000:]}")


@dataclass
class Cluster:
    """One standalone cluster for the whole tier (see the module docstring)."""

    base: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="slatelib-cluster-")))
    net: TestNet | None = None
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    master_url: str = ""
    master_ui: str = ""
    s3_endpoint: str = ""
    addresses: dict[str, str] = field(default_factory=dict)
    driver_host: str = "127.0.0.1"
    events_from: int = 0
    job_conf: dict[str, str] = field(default_factory=dict)
    """What every submission of the tier sets: one-core executors that fit the workers, and
    JVMs that start quickly (:data:`QUICK_JVM`, and class-data-sharing archives of Spark's
    classes made when the cluster starts, :meth:`_class_archives`)."""

    # -- start and stop ------------------------------------------------------------------
    def start(self) -> Cluster:
        try:
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> Cluster:
        why_not = can_make_nets()
        if why_not is None:
            reap_stale()
            self.net = TestNet()
            self.net.create()
            self.driver_host = self.net.gateway
            for host in ("s3", *WORKERS):
                self.addresses[host] = self.net.add_host(host)
        else:
            sys.stderr.write(f"cluster tier: workers share this host ({why_not})\n")
            self.addresses = dict.fromkeys(("s3", *WORKERS), "127.0.0.1")
        self._spark_home()
        self._start_s3()
        self._start_master()
        for name in WORKERS:
            self._start_worker(name)
        self._wait_for_workers()
        self._class_archives()
        return self

    def stop(self) -> None:
        for proc in reversed(list(self.procs.values())):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
        if self.net is not None:
            self.net.destroy()
        shutil.rmtree(self.base, ignore_errors=True)

    def _spark_home(self) -> None:
        import pyspark

        self.spark_home = self.base / "spark"
        _link_tree(Path(pyspark.__file__).parent, self.spark_home)
        # The daemons' and executors' SPARK_CONF_DIR (on their class path): empty, as class
        # data sharing needs, so they log with Spark's defaults into their own files.
        self.conf_dir = self.base / "conf"
        self.conf_dir.mkdir()

    def _clean_env(self, **extra: str) -> dict[str, str]:
        """What a node's Spark daemons start with: nothing of the checkout or the tests."""
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               "JAVA_HOME": _java_home(), "SPARK_HOME": str(self.spark_home),
               "SPARK_CONF_DIR": str(self.conf_dir), "LANG": "C.UTF-8",
               "HOME": str(self.base / "home"), "SPARK_LOG_DIR": str(self.base / "logs")}
        env.update(extra)
        return env

    def _on(self, host: str, argv: list[str], *, hide: bool = False) -> list[str]:
        if self.net is None:
            return argv
        return self.net.exec_argv(host, argv, hide=HIDDEN if hide else ())

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        log = open(self.base / f"{name}.log", "wb")  # noqa: SIM115 - the process keeps it
        self.procs[name] = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)

    def log_tail(self, name: str, n: int = 4000) -> str:
        path = self.base / f"{name}.log"
        return path.read_text(errors="replace")[-n:] if path.exists() else ""

    def _start_s3(self) -> None:
        host = self.addresses["s3"]
        port = 9000 if self.net is not None else _free_port(host)
        self.control = self.base / "s3-control"
        self.control.mkdir()
        self.set_rules()
        argv = [str(VENV / "bin" / "python"), str(ROOT / "tests" / "cluster" / "s3_gate.py"),
                "--host", host, "--port", str(port), "--control", str(self.control)]
        self._spawn("s3", self._on("s3", argv), {**os.environ, "PYTHONUNBUFFERED": "1"})
        self.s3_endpoint = f"http://{host}:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(self.s3_endpoint + "/moto-api/", timeout=1).close()
                return
            except urllib.error.HTTPError:  # the gate answers (it refuses unsigned requests)
                return
            except OSError:
                assert self.procs["s3"].poll() is None, self.log_tail("s3")
                time.sleep(0.2)
        raise AssertionError(f"the S3 host did not answer:\n{self.log_tail('s3')}")

    def _start_master(self) -> None:
        host = self.driver_host
        port, ui = _free_port(host), _free_port(host)
        argv = [str(self.spark_home / "bin" / "spark-class"),
                "org.apache.spark.deploy.master.Master", "--host", host, "--port", str(port),
                "--webui-port", str(ui)]
        self._spawn("master", argv, self._clean_env(SPARK_LOCAL_IP=host))
        self.master_url = f"spark://{host}:{port}"
        self.master_ui = f"http://{host}:{ui}"

    def worker_dir(self, name: str) -> Path:
        return self.base / "work" / name

    def _start_worker(self, name: str) -> None:
        host = self.addresses[name]
        work = self.worker_dir(name)
        work.mkdir(parents=True)
        ui = 8081 if self.net is not None else _free_port(host)
        argv = [str(self.spark_home / "bin" / "spark-class"),
                "org.apache.spark.deploy.worker.Worker", "--host", host, "--cores", "1",
                "--memory", "2g", "--webui-port", str(ui), "--work-dir", str(work),
                self.master_url]
        env = self._clean_env(SPARK_LOCAL_IP=host, SPARK_WORKER_DIR=str(work))
        self._spawn(name, self._on(name, argv, hide=True), env)

    def _class_archives(self) -> None:
        """Dump the classes a Spark application loads into two archives (JDK class data
        sharing), one for the drivers (PySpark's Spark of the project's venv) and one for the
        executors (the workers' Spark), by running a small local application with each
        class path; every later JVM maps them instead of loading the classes again. A JVM
        whose class path differs ignores its archive."""
        probe = str(ROOT / "tests" / "cluster" / "probe_app.py")
        runs = {
            "driver": (VENV / "bin" / "spark-submit",
                       self.driver_env({"PYSPARK_PYTHON": str(VENV / "bin" / "python")})),
            "executor": (self.spark_home / "bin" / "spark-submit",
                         self._clean_env(PYSPARK_PYTHON=str(NODE_ENV / "bin" / "python"))),
        }
        procs = {}
        for name, (submit, env) in runs.items():
            env["SPARK_SUBMIT_OPTS"] = f"{QUICK_JVM} -XX:ArchiveClassesAtExit={self.base}/{name}.jsa"
            procs[name] = subprocess.Popen(
                [str(submit), "--master", "local[1]", "--conf", "spark.ui.enabled=false", probe],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        options = {}
        for name, proc in procs.items():
            proc.wait(timeout=300)
            archive = self.base / f"{name}.jsa"
            options[name] = QUICK_JVM + (f" -XX:SharedArchiveFile={archive} -Xlog:cds=off"
                                         if archive.is_file() else "")
        self.job_conf = {"spark.executor.cores": "1", "spark.executor.memory": "768m",
                         "spark.driver.extraJavaOptions": options["driver"],
                         "spark.executor.extraJavaOptions": options["executor"]}

    def master_state(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.master_ui + "/json/", timeout=5) as r:
            state: dict[str, Any] = json.load(r)
            return state

    def _wait_for_workers(self, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for name in ("master", *WORKERS):
                assert self.procs[name].poll() is None, f"{name} exited:\n{self.log_tail(name)}"
            with contextlib.suppress(OSError, ValueError):
                alive = [w for w in self.master_state().get("workers", [])
                         if w.get("state") == "ALIVE"]
                if len(alive) >= len(WORKERS):
                    return
            time.sleep(0.5)
        raise AssertionError("the workers did not register:\n" + "\n".join(
            f"--- {n} ---\n{self.log_tail(n)}" for n in ("master", *WORKERS)))

    # -- the object store ----------------------------------------------------------------
    def set_rules(self, **rules: Any) -> None:
        """Replace the gate's rules (``access_key`` is always required); :meth:`events` and
        :meth:`wait_event` then see only what happens from now on."""
        self.events_from = len(self.events(everything=True))
        rules.setdefault("access_key", ACCESS_KEY)
        tmp = self.control / "rules.json.tmp"
        tmp.write_text(json.dumps(rules))
        os.replace(tmp, self.control / "rules.json")
        time.sleep(0.05)  # a new mtime for the next change

    def release(self, hold_id: str, action: str = "apply") -> None:
        (self.control / "release" / hold_id).write_text(action)

    def events(self, *, everything: bool = False) -> list[dict[str, Any]]:
        """The gate's events since the last :meth:`set_rules` (``everything``: all)."""
        path = self.control / "events.jsonl"
        if not path.exists():
            return []
        lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
        return [json.loads(ln) for ln in lines[0 if everything else self.events_from:]]

    def wait_event(self, predicate: Any, timeout_s: float = 120,
                   proc: subprocess.Popen[str] | None = None) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for e in self.events():
                if predicate(e):
                    return e
            if proc is not None and proc.poll() is not None:
                raise AssertionError(f"the job ended (exit {proc.returncode}) first")
            time.sleep(0.1)
        raise AssertionError("timed out waiting for an S3 event")

    def store_options(self) -> dict[str, Any]:
        return {"endpoint": self.s3_endpoint, "region": REGION, "access_key_id": ACCESS_KEY,
                "secret_access_key": SECRET_KEY, "allow_http": True}

    def env_vars(self) -> dict[str, str]:
        """The S3 settings as the variables of an env file."""
        return {"SLATELIB_S3_ENDPOINT": self.s3_endpoint, "SLATELIB_S3_REGION": REGION,
                "SLATELIB_S3_ACCESS_KEY_ID": ACCESS_KEY,
                "SLATELIB_S3_SECRET_ACCESS_KEY": SECRET_KEY}

    def env_file(self) -> Path:
        path = self.base / "s3.env"
        if not path.exists():
            path.write_text("".join(f"{k}={v}\n" for k, v in self.env_vars().items()))
        return path

    def new_bucket(self) -> str:
        import boto3

        name = f"cluster-{uuid.uuid4().hex[:16]}"
        boto3.client("s3", endpoint_url=self.s3_endpoint, region_name=REGION,
                     aws_access_key_id=ACCESS_KEY,
                     aws_secret_access_key=SECRET_KEY).create_bucket(Bucket=name)
        return name

    def open_store(self, url: str) -> Any:
        from slatelib.objstore import open_store

        return open_store(url, **self.store_options())

    # -- submitting ----------------------------------------------------------------------
    def driver_env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The submitting shell: the project's venv on PATH, no credentials, no SLATELIB_*
        settings, and Spark told which of this machine's addresses the workers reach."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SLATELIB_", "AWS_", "PYSPARK_", "SPARK_"))}
        env["PATH"] = f"{VENV / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["VIRTUAL_ENV"] = str(VENV)
        env["SPARK_LOCAL_IP"] = self.driver_host
        env["PYTHONUNBUFFERED"] = "1"
        env.update(extra or {})
        return env

    def ship_conf(self, ship: str) -> list[str]:
        """spark-submit options that give executors slatelib: ``packed`` (the packed env,
        ``--archives``), ``node`` (the node install) or ``none``."""
        if ship == "packed":
            return ["--archives", f"{PACKED_ENV}#env",
                    "--conf", "spark.pyspark.python=./env/bin/python"]
        if ship == "node":
            return ["--conf", f"spark.pyspark.python={NODE_ENV / 'bin' / 'python'}"]
        return []

    def spark_submit_argv(self, job: str, args: Sequence[str], *, ship: str = "packed",
                          conf: dict[str, str] | None = None,
                          submit: Sequence[str] = ()) -> list[str]:
        argv = [str(VENV / "bin" / "spark-submit"), "--master", self.master_url,
                *self.ship_conf(ship),
                "--conf", f"spark.pyspark.driver.python={VENV / 'bin' / 'python'}"]
        for key, value in {**self.job_conf, **(conf or {})}.items():
            argv += ["--conf", f"{key}={value}"]
        return [*argv, *submit, str(ROOT / "jobs" / f"{job}.py"), *args]

    def slate_spark_argv(self, job: str, args: Sequence[str], *, ship: str = "packed",
                         conf: dict[str, str] | None = None) -> list[str]:
        argv = [str(VENV / "bin" / "slate-spark"), job, *args, "--master", self.master_url]
        if ship == "packed":
            argv += ["--executor-env", str(PACKED_ENV)]
        elif ship == "node":
            argv += ["--spark-conf", f"spark.pyspark.python={NODE_ENV / 'bin' / 'python'}"]
        for key, value in {**self.job_conf, **(conf or {})}.items():
            argv += ["--spark-conf", f"{key}={value}"]
        return argv

    def run(self, argv: list[str], *, env: dict[str, str] | None = None,
            timeout: float = 600) -> RunResult:
        done = subprocess.run(argv, env=self.driver_env(env), cwd=str(ROOT), text=True,
                              capture_output=True, timeout=timeout)
        return RunResult(argv, done.returncode, done.stdout, done.stderr)

    def start_run(self, argv: list[str], *, env: dict[str, str] | None = None,
                  ) -> subprocess.Popen[str]:
        return subprocess.Popen(argv, env=self.driver_env(env), cwd=str(ROOT), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)

    # -- where things ran ----------------------------------------------------------------
    def app_dirs(self, app_id: str) -> dict[str, list[str]]:
        """The executor directories each worker made for application ``app_id``."""
        out: dict[str, list[str]] = {}
        for name in WORKERS:
            d = self.worker_dir(name) / app_id
            if d.is_dir():
                out[name] = sorted(p.name for p in d.iterdir() if p.is_dir())
        return out

    def processes(self, worker: str) -> list[str]:
        """What runs on ``worker`` (pid and command line), for failure messages."""
        out = []
        for pid in self.net.pids(worker) if self.net is not None else []:
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            out.append(f"{pid}: {cmd.decode(errors='replace')[:160]}")
        return out

    def executor_pids(self, worker: str) -> list[int]:
        """The executor JVMs running on ``worker``."""
        candidates = (self.net.pids(worker) if self.net is not None else
                      [int(p) for p in os.listdir("/proc") if p.isdigit()])
        pids = []
        for pid in candidates:
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(b"CoarseGrainedExecutorBackend" in c for c in cmd) and (
                    self.net is not None
                    or any(self.addresses[worker].encode() in c for c in cmd)):
                pids.append(pid)
        return pids


@contextlib.contextmanager
def running_cluster() -> Iterator[Cluster]:
    cluster = Cluster()
    try:
        yield cluster.start()
    finally:
        cluster.stop()
