"""Every metric slatelib exposes, in one table: name, type, labels and help. Pure.

The builders (:mod:`slatelib.metrics.families`) create families only through this table,
and ``docs/metrics.md`` lists the same rows (a test compares the two), so the documented
names, types and labels cannot drift from what a scrape returns.

Labels are bounded: ``job`` (compact, gc, rescale, export), ``db`` (a database URL),
``phase``, ``kind`` (a store request kind), ``outcome`` / ``state`` (small fixed sets) and
``segment`` (a database's segments, bounded by its configuration). No label names an SST,
a compaction id or a worker id.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["METRICS", "MetricDef", "exposed_name", "metric"]

PREFIX = "slatelib_"


@dataclass(frozen=True)
class MetricDef:
    """One metric family. ``kind``: ``gauge`` or ``counter`` (a counter's samples are
    exposed as ``<name>_total``). ``source``: who exposes it (``run``: batch jobs' textfile
    and Pushgateway output; ``standing``: the worker's and service's ``/metrics``;
    ``db``: per-database state, in both)."""

    name: str
    kind: str
    labels: tuple[str, ...]
    help: str
    source: str


def _g(name: str, labels: tuple[str, ...], text: str, source: str) -> MetricDef:
    return MetricDef(PREFIX + name, "gauge", labels, text, source)


def _c(name: str, labels: tuple[str, ...], text: str, source: str) -> MetricDef:
    return MetricDef(PREFIX + name, "counter", labels, text, source)


JD = ("job", "db")
J = ("job",)
D = ("db",)

_ALL = (
    # ------------------------------------------------------------- batch runs, per database
    _g("run_rows_in", JD, "Rows (versions) read by the run for this database.", "run"),
    _g("run_rows_out", JD, "Rows written by the run for this database.", "run"),
    _g("run_bytes_in", JD, "Stored bytes read by the run for this database.", "run"),
    _g("run_bytes_out", JD, "Stored bytes written by the run for this database.", "run"),
    _g("run_deleted_objects", JD, "Objects GC deleted (to delete, on a dry run).", "run"),
    _g("run_deleted_bytes", JD, "Bytes GC deleted (to delete, on a dry run).", "run"),
    _g("run_seconds", JD, "Wall seconds the run spent on this database.", "run"),
    _g("run_phase_seconds", (*JD, "phase"), "Seconds per phase of the run on this database.",
       "run"),
    _g("run_exit_code", JD, "Exit code of this database's run (slatelib/exit_codes.py).",
       "run"),
    _g("run_outcome", (*JD, "outcome"),
       "1 for this database's outcome (the exit code's name), 0 for the others.", "run"),
    _g("run_retries", JD, "Store requests retried by slatelib's retry layer.", "run"),
    _g("run_store_requests", (*JD, "kind"), "Object-store requests by kind.", "run"),
    _g("run_store_bytes_read", JD, "Object bytes received from the store.", "run"),
    _g("run_store_bytes_written", JD, "Object bytes sent to the store.", "run"),
    _g("run_finished_timestamp_seconds", JD, "Unix time the run finished.", "run"),
    # ---------------------------------------------------------------- batch runs, whole job
    _g("job_seconds", J, "Wall seconds of the whole run (Spark start-up included).", "run"),
    _g("job_phase_seconds", (*J, "phase"),
       "Seconds per phase of the whole run (jobs that time phases per run).", "run"),
    _g("job_exit_code", J, "Process exit code of the run.", "run"),
    _g("job_outcome", (*J, "outcome"), "1 for the run's outcome, 0 for the others.", "run"),
    _g("job_databases", J, "Databases the run covered.", "run"),
    _g("job_failed_databases", J, "Databases whose run failed.", "run"),
    _g("job_retries", J, "Store requests retried, driver and executors.", "run"),
    _g("job_store_requests", (*J, "kind"),
       "Object-store requests by kind, driver and executors.", "run"),
    _g("job_store_bytes_read", J, "Object bytes received, driver and executors.", "run"),
    _g("job_store_bytes_written", J, "Object bytes sent, driver and executors.", "run"),
    _g("job_finished_timestamp_seconds", J, "Unix time the run finished.", "run"),
    # ----------------------------------------------------------- worker and service (/metrics)
    _g("compaction_databases", (), "Databases the worker or service watches.", "standing"),
    _g("compaction_jobs_running", D, "Compactions running now.", "standing"),
    _c("compaction_jobs_claimed", D, "Scheduled compactions the worker claimed.", "standing"),
    _c("compaction_jobs_finished", (*D, "outcome"),
       "Compactions that ended, by outcome (worker: compacted, failed, released, lost; "
       "service: committed, failed, refused, abandoned).", "standing"),
    _c("compaction_jobs_lost", D,
       "Worker jobs lost: reclaimed by the coordinator or claimed by another worker.",
       "standing"),
    _g("compaction_jobs_declined", D,
       "Scheduled entries the worker will not execute (e.g. segment drains).", "standing"),
    _g("compaction_heartbeat_lag_seconds", D,
       "Worker: seconds since the oldest running job's last heartbeat landed (0: none "
       "running).", "standing"),
    _c("compaction_rows_in", D, "Rows read by finished compactions.", "standing"),
    _c("compaction_rows_out", D, "Rows written by finished compactions.", "standing"),
    _c("compaction_bytes_in", D, "Stored bytes read by finished compactions.", "standing"),
    _c("compaction_bytes_out", D, "Stored bytes written by finished compactions.",
       "standing"),
    _g("compaction_db_state", (*D, "state"),
       "Service: 1 for the database's state (idle, queued, running, backoff, refused).",
       "standing"),
    _g("compaction_l0_ssts", D,
       "Service: L0 SSTs of the deepest tree at the last poll.", "standing"),
    _g("compaction_sorted_runs", D,
       "Service: sorted runs of the tree with the most at the last poll.", "standing"),
    _g("compaction_l0_limit", (), "The L0 depth at which a writer stalls ([writer] "
       "l0_max_ssts).", "standing"),
    _c("compaction_l0_at_limit_seconds", D,
       "Seconds the deepest L0 was at or above the limit, as last seen (service: each "
       "poll; worker: each per-database stats collection).", "standing"),
    _g("compaction_last_poll_timestamp_seconds", D, "Unix time of the last poll.",
       "standing"),
    _c("compaction_polls", (), "Worker: polls over every database.", "standing"),
    _c("compaction_store_requests", ("kind",),
       "Object-store requests this process (the Spark driver) made, by kind: polls, claims, "
       "heartbeats, commits, the per-database stats (and key ranges run on threads); "
       "executors' requests are not included.", "standing"),
    _c("compaction_store_bytes_read", (), "Object bytes this process received.", "standing"),
    _c("compaction_store_bytes_written", (), "Object bytes this process sent.", "standing"),
    _c("compaction_store_retries", (), "Store requests this process retried.", "standing"),
    # ---------------------------------------------------------------------- per database
    _g("db_l0_ssts", (*D, "segment"),
       "L0 SSTs per tree (segment \"\": a database without segments).", "db"),
    _g("db_l0_ssts_max_tree", D,
       "L0 SSTs of the deepest tree (a writer stalls when it reaches l0_max_ssts).", "db"),
    _g("db_sorted_runs", D, "Sorted runs (every tree).", "db"),
    _g("db_sst_views", D,
       "SST views in the latest manifest: L0's and the sorted runs' together.", "db"),
    _g("db_external_dbs", D, "External databases the manifest references (clones).", "db"),
    _g("db_checkpoints", D, "Live (unexpired) checkpoints.", "db"),
    _g("db_oldest_checkpoint_age_seconds", D, "Age of the oldest live checkpoint.", "db"),
    _g("db_manifest_versions", D, "Manifest versions on storage.", "db"),
    _g("db_wal_ssts_to_replay", D,
       "WAL SSTs past the replay point: not yet flushed to L0, replayed on reopen.", "db"),
    _g("db_wal_ssts_replayed", D,
       "WAL SSTs at or behind the replay point still stored (GC collects them).", "db"),
    _g("db_live_bytes", D,
       "Bytes of the SSTs the live manifests reference (latest and checkpointed).", "db"),
    _g("db_gc_reclaimable_bytes", D, "Bytes a default GC run would delete now.", "db"),
    _g("db_gc_reclaimable_objects", D, "Objects a default GC run would delete now.", "db"),
    _g("db_last_compaction_timestamp_seconds", D,
       "Unix time the newest sorted-run SST was written.", "db"),
    _g("db_foreign_compactor", D,
       "1 when a compactor other than slatelib holds the compactor epoch.", "db"),
    _g("db_stats_timestamp_seconds", D, "Unix time the database's stats were collected.",
       "db"),
    _g("db_stats_errors", D,
       "Consecutive failures to collect the database's stats (0: the last one worked).",
       "db"),
)

METRICS: dict[str, MetricDef] = {m.name: m for m in _ALL}


def metric(name: str) -> MetricDef:
    """The definition of ``name`` (with or without the ``slatelib_`` prefix).

    Raises:
        KeyError: an unknown metric.
    """
    return METRICS[name if name.startswith(PREFIX) else PREFIX + name]


def exposed_name(m: MetricDef) -> str:
    """The sample name a scrape shows: ``<name>_total`` for a counter."""
    return m.name + "_total" if m.kind == "counter" else m.name
