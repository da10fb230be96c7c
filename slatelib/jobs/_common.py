"""What every job's command line shares: the common options, database selection, settings,
and the entry-point shell (:func:`run_main`: logging, the report on stdout, exit codes).

Several databases run in one Spark application, each isolated
(:func:`slatelib.spark.isolation.run_isolated`), so one failing database does not stop the
others. The process exit code is 0 when every database succeeded, else the code of the
first failed database in argument order.

Every job prints one JSON report on stdout (on a terminal, a short summary instead, the
report going to ``--report FILE``: ``--output-format``), and nothing else there; logging, progress
(``--progress/--no-progress``, ``--progress-interval``; on by default: docs/progress.md) and
a one-line human summary (the report's ``headline``) go to stderr. Every report has the
same top level: ``job``, ``status`` (the exit name), ``headline``, ``seconds`` (the wall
time of the run, Spark's start included), ``totals`` and ``databases`` (one entry each),
then what is particular to the job.

Every job also takes ``--metrics-file PATH`` (the run's Prometheus metrics as a
node-exporter textfile) and ``--metrics-push URL`` (the same to a Pushgateway), written
once the report is out (:func:`emit_metrics`; docs/metrics.md).
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from slatelib.config import Settings, load_env_files, load_settings
from slatelib.errors import InvalidArgumentError
from slatelib.exit_codes import (
    EXIT_NAMES,
    EXIT_USAGE,
    exit_code_for,
)
from slatelib.objstore import ObjectStore, open_store, split_db_url
from slatelib.objstore.registry import set_store_defaults
from slatelib.objstore.url import join_store_url, split_store_url
from slatelib.ops.discover import discover_databases
from slatelib.ops.job_report import Headline
from slatelib.ops.job_summary import REPORT_FORMATS, report_goes_to_terminal, summary_text
from slatelib.ops.progress import add_progress_args, progress_output_from_args

log = logging.getLogger("slatelib.jobs")

__all__ = ["EXIT_NAMES", "DbTarget", "Headline", "add_common_args", "check_selection",
           "configure_logging",
           "emit_metrics", "emit_report", "exit_code_for", "parse_db_entry", "resolve_targets", "run_main",
           "settings_from", "split_under_root", "usage_error", "wal_store_arg"]


@dataclass(frozen=True)
class DbTarget:
    """One database: the store URL and the path inside it, plus how it was named, and the
    URL of the object store that keeps its WAL (``""``: its own store)."""

    store_url: str
    path: str
    name: str
    wal_store: str = ""

    def open(self) -> ObjectStore:
        """The database's store, with its WAL store attached when it has one.

        Raises:
            InvalidArgumentError: a malformed store or WAL store URL.
        """
        return open_store(self.store_url, wal_store=self.wal_store)


DB_ENTRY_KEYS = frozenset({"db", "wal_store"})


def parse_db_entry(text: str, *, where: str) -> tuple[str, str | None]:
    """``(database URL, its WAL store URL or None)`` of one database entry: a URL, or a JSON
    object ``{"db": URL, "wal_store": URL}`` (``"wal_store": ""``: the database keeps its
    WAL in its own store, whatever ``--wal-store`` says). What ``--db``, each ``--dbs-file``
    line and the DAGs' database lists take.

    Raises:
        InvalidArgumentError: malformed JSON, unknown keys, or values that are not strings
            (naming ``where``).
    """
    text = text.strip()
    if not text.startswith("{"):
        return text, None
    try:
        entry = json.loads(text)
    except ValueError as exc:
        raise InvalidArgumentError(f"{where}: not a URL nor a JSON object: {exc}") from None
    if not isinstance(entry, dict) or not isinstance(entry.get("db"), str) or not entry["db"]:
        raise InvalidArgumentError(f'{where}: a database entry needs "db": URL, got {text!r}')
    unknown = sorted(set(entry) - DB_ENTRY_KEYS)
    if unknown:
        raise InvalidArgumentError(
            f"{where}: unknown key(s) {', '.join(unknown)} in {text!r} (known: db, wal_store)")
    wal = entry.get("wal_store")
    if wal is not None and not isinstance(wal, str):
        raise InvalidArgumentError(f'{where}: "wal_store" must be a URL string, got {wal!r}')
    return entry["db"].strip(), None if wal is None else wal.strip()


def add_common_args(p: argparse.ArgumentParser, *, selection: bool = True) -> None:
    """The options every job takes; ``selection``: also ``--db``/``--dbs-file``/
    ``--discover`` (a job that names its databases otherwise leaves them out)."""
    if selection:
        p.add_argument("--db", action="append", default=[], metavar="URL",
                       help="database URL (repeatable), e.g. s3://bucket/tenants/a/db, or a "
                            'JSON object {"db": URL, "wal_store": URL} for a database with '
                            "its own WAL store")
        p.add_argument("--dbs-file", metavar="FILE",
                       help="file with one database per line, a URL or a JSON object as "
                            "--db takes (# comments allowed)")
        p.add_argument("--discover", metavar="PREFIX_URL",
                       help="every database under this prefix URL, e.g. s3://bucket/tenants/")
    p.add_argument("--store-root", metavar="URL",
                   help="root of the object store the databases were created in, when it is "
                        "not the bucket (or / for file://): clones name their parents "
                        "relative to it, e.g. --store-root file:///data --db file:///data/clone")
    p.add_argument("--wal-store", metavar="URL", default=None,
                   help="object store that keeps the databases' WAL SSTs (0.17's "
                        "with_wal_object_store), e.g. s3://wal-bucket: the database path is "
                        "the same in it; '' : none (default: [object_store] wal_store, "
                        "SLATELIB_WAL_STORE); a database entry's own wal_store wins")
    p.add_argument("--conf", action="append", default=[], metavar="FILE",
                   help="settings TOML (repeatable; later files win)")
    p.add_argument("--env-file", action="append", default=[], metavar="FILE",
                   help="load SLATELIB_*/AWS_*/GOOGLE_*/AZURE_* variables from a dotenv-style "
                        "file before anything else (repeatable; the environment wins); they "
                        "are passed on to the executors as spark.executorEnv.*")
    p.add_argument("--report", metavar="FILE", help="also write the JSON report to FILE")
    p.add_argument("--output-format", choices=REPORT_FORMATS, default=None,
                   help="stdout: json (the report) or table (a short summary; the report "
                        "then goes only to --report FILE); default: table on a terminal, "
                        "json otherwise (pipes, files, Airflow)")
    add_progress_args(p)
    p.add_argument("-v", "--verbose", action="count", default=0)
    p.add_argument("--metrics-file", metavar="PATH",
                   help="write the run's Prometheus metrics to PATH for node-exporter's "
                        "textfile collector (name it *.prom; written to a temporary file, "
                        "then renamed; docs/metrics.md)")
    p.add_argument("--metrics-push", metavar="URL",
                   help="push the run's Prometheus metrics to the Pushgateway at URL, "
                        "grouped by job and by job and database (docs/metrics.md)")


def split_under_root(url: str, store_root: str | None, *,
                     allow_root: bool = False) -> tuple[str, str]:
    """``(store URL, path inside it)`` of a database URL: split at the bucket (or ``/``)
    by default, at ``store_root`` when given (clones' ``external_dbs`` paths are relative to
    the root their creator opened the store at).

    Raises:
        InvalidArgumentError: a malformed URL, or one that does not lie under ``store_root``
            (``allow_root``: the root itself is accepted, with an empty path).
    """
    if store_root is None:
        return split_db_url(url)
    base, full = split_store_url(url, what="database url")
    root_base, root_path = split_store_url(store_root, what="--store-root")
    inside = not root_path or full == root_path or full.startswith(root_path + "/")
    if base != root_base or not inside:
        raise InvalidArgumentError(f"{url!r} is not under --store-root {store_root!r}")
    path = full[len(root_path):].lstrip("/") if root_path else full
    if not path and not allow_root:
        raise InvalidArgumentError(f"{url!r} names the store root {store_root!r}, not a database")
    return join_store_url(root_base, root_path), path


def wal_store_arg(args: argparse.Namespace, default: str = "") -> str:
    """The run's WAL store URL: ``--wal-store`` when given (``""``: none), else ``default``
    (``[object_store] wal_store`` / ``SLATELIB_WAL_STORE``)."""
    given: str | None = getattr(args, "wal_store", None)
    return given.strip() if given is not None else default


def resolve_targets(args: argparse.Namespace, *, wal_store: str = "") -> list[DbTarget]:
    """The databases named by ``--db``, ``--dbs-file`` and ``--discover``, de-duplicated.
    Each keeps its WAL in its entry's ``wal_store`` when the entry names one, else in the
    run's (:func:`wal_store_arg` with ``wal_store`` as the settings' default).

    Raises:
        InvalidArgumentError: none given, an unreadable file, a malformed URL or entry.
    """
    entries = [parse_db_entry(d, where="--db") for d in args.db]
    if args.dbs_file:
        try:
            with open(args.dbs_file, encoding="utf-8") as f:
                entries += [parse_db_entry(ln, where=f"--dbs-file {args.dbs_file}, line {n}")
                            for n, ln in enumerate(f, 1)
                            if ln.strip() and not ln.lstrip().startswith("#")]
        except OSError as exc:
            raise InvalidArgumentError(f"--dbs-file {args.dbs_file}: {exc}") from exc
    run_wal = wal_store_arg(args, wal_store)
    root = getattr(args, "store_root", None)
    targets = []
    for url, own_wal in entries:
        store_url, path = split_under_root(url, root)
        targets.append(DbTarget(store_url, path, url, run_wal if own_wal is None else own_wal))
    if args.discover:
        store_url, prefix = split_under_root(args.discover, root, allow_root=True)
        for root in discover_databases(open_store(store_url), prefix):
            targets.append(DbTarget(store_url, root, f"{store_url.rstrip('/')}/{root}",
                                    run_wal))
    if not targets:
        raise InvalidArgumentError("no database given: use --db, --dbs-file or --discover")
    seen: set[tuple[str, str]] = set()
    out = []
    for t in targets:
        if (t.store_url, t.path) not in seen:
            seen.add((t.store_url, t.path))
            out.append(t)
    return out


def check_selection(args: argparse.Namespace) -> None:
    """What :func:`resolve_targets` refuses without touching a store (no database given, a
    malformed URL or entry, an unreadable ``--dbs-file``), checked before Spark starts; a
    job without ``--db`` options passes.

    Raises:
        InvalidArgumentError: naming the option.
    """
    if not (hasattr(args, "dbs_file") and isinstance(getattr(args, "db", None), list)):
        return  # the job names its databases itself (export, rescale)
    if not (args.db or args.dbs_file or args.discover):
        raise InvalidArgumentError("no database given: use --db, --dbs-file or --discover")
    root = getattr(args, "store_root", None)
    for entry in args.db:
        split_under_root(parse_db_entry(entry, where="--db")[0], root)
    if args.dbs_file and not os.access(args.dbs_file, os.R_OK):
        raise InvalidArgumentError(f"--dbs-file {args.dbs_file}: not a readable file")
    if args.discover:
        split_under_root(args.discover, root, allow_root=True)


def settings_from(args: argparse.Namespace) -> Settings:
    """``--env-file`` files into the environment, then the settings (``--conf`` files and
    ``SLATELIB_*`` variables); registers ``[object_store]`` as the store defaults.

    Raises:
        InvalidArgumentError: a malformed env file or settings.
    """
    load_env_files(getattr(args, "env_file", None))
    settings = load_settings(args.conf)
    set_store_defaults(settings.object_store)
    return settings


def emit_report(report: dict[str, Any], path: str | None, output_format: str | None = None,
                ) -> None:
    """The JSON report on stdout (and to ``path``); with ``output_format`` ``table`` (the
    default on a terminal: :func:`~slatelib.ops.job_summary.report_goes_to_terminal`), a
    short summary on stdout instead (:func:`~slatelib.ops.job_summary.summary_text`)."""
    text = json.dumps(report, indent=2, sort_keys=False)
    if path:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    table = (output_format or ("table" if report_goes_to_terminal() else "json")) == "table"
    sys.stdout.write(summary_text(report, report_path=path) if table else text + "\n")
    sys.stdout.flush()


def emit_metrics(report: dict[str, Any], args: argparse.Namespace) -> None:
    """``--metrics-file`` / ``--metrics-push``: the run's metrics (a failure is logged on
    stderr; it never changes the exit code)."""
    path = getattr(args, "metrics_file", None)
    url = getattr(args, "metrics_push", None)
    if path or url:
        from slatelib.metrics.output import emit_run_metrics

        emit_run_metrics(report, metrics_file=path, metrics_push=url)


def configure_logging(verbose: int) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr,
    )


def usage_error(message: str) -> int:
    sys.stderr.write(f"error: {message}\n")
    return EXIT_USAGE


JobRun = Callable[[Any, Settings, argparse.Namespace], tuple[dict[str, Any], int]]


JobRunFn = Callable[..., tuple[dict[str, Any], int]]


def counts_store_requests(headline: Headline | None = None) -> Callable[[JobRunFn], JobRunFn]:
    """Decorate a job's ``run(spark, settings, args, ...)`` so that its report gets
    ``store_requests``: the object-store requests of the run, on the driver and in its Spark
    tasks (docs/request-accounting.md). ``headline``: the job's headline, recomputed with
    them (a report without a headline keeps none)."""

    def decorate(run: JobRunFn) -> JobRunFn:
        @functools.wraps(run)
        def counted(spark: Any, *args: Any, **kwargs: Any) -> tuple[dict[str, Any], int]:
            from slatelib.spark.executors import job_requests

            meter = job_requests(spark)
            report, code = run(spark, *args, **kwargs)
            report["store_requests"] = meter.report()
            if headline is not None and "headline" in report and (line := headline(report)):
                report["headline"] = line
            return report, code

        return counted

    return decorate


def run_main(args: argparse.Namespace, app_name: str, run: JobRun, *, needs_spark: bool,
             precheck: Callable[[Settings], None] | None = None,
             headline: Headline | None = None, jars: Sequence[str] = ("delta",)) -> int:
    """What every job's ``main`` does: logging, settings (and ``precheck``) before Spark
    starts, ``run(spark, settings, args)``, the report on stdout with ``seconds`` the wall
    time since ``main`` started (Spark's start-up included), and the ``headline`` last on
    stderr. ``jars``: the jar features Spark is built with (:func:`slatelib.spark.session.
    build_spark`). Returns the exit code (2 for invalid input, printed to stderr)."""
    started = time.monotonic()
    from slatelib.spark.session import separate_stderr

    separate_stderr()  # under spark-submit, stderr would land in stdout
    configure_logging(args.verbose)
    try:
        settings = settings_from(args)
        check_selection(args)  # argument errors before Spark starts
        if precheck is not None:
            precheck(settings)
    except InvalidArgumentError as exc:
        return usage_error(str(exc))
    spark = None
    if needs_spark:
        from slatelib.spark.session import build_spark

        spark = build_spark(app_name, settings=settings.spark, jars=jars)
    try:
        with progress_output_from_args(args, default=True):  # stderr only
            report, code = run(spark, settings, args)
        if spark is not None:
            from slatelib.spark.session import spark_facts

            report["spark"] = spark_facts(spark)
    except InvalidArgumentError as exc:
        return usage_error(str(exc))
    finally:
        if spark is not None:
            spark.stop()
    report["seconds"] = round(time.monotonic() - started, 3)
    if headline is not None and (line := headline(report)):
        report["headline"] = line
    emit_report(report, args.report, getattr(args, "output_format", None))
    emit_metrics(report, args)
    if report.get("headline"):
        sys.stderr.write(report["headline"] + "\n")
        sys.stderr.flush()
    return code
