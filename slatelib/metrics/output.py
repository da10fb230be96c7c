"""The I/O shell of the metrics: a batch run's families to a node-exporter textfile or a
Pushgateway, and the worker's and service's ``/metrics`` endpoint.

The families themselves come from :mod:`slatelib.metrics.families` (pure); this module only
registers, serves, writes and pushes them with ``prometheus_client``.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, push_to_gateway, start_http_server
from prometheus_client.core import Metric
from prometheus_client.exposition import generate_latest, write_to_textfile

from slatelib.errors import InvalidArgumentError
from slatelib.metrics.families import (
    L0LimitClock,
    db_stats_families,
    process_request_families,
    run_families,
    standing_families,
)
from slatelib.objstore import ObjectStore, accounting

__all__ = ["PushGroup", "StandingMetrics", "StatsTarget", "emit_run_metrics",
           "process_requests", "push_groups", "push_run_metrics", "registry_of",
           "serving_metrics", "write_run_textfile"]

log = logging.getLogger(__name__)

StatsTarget = tuple[str, ObjectStore, str]
"""A database whose stats the standing modes collect: ``(name, store, path)``."""


class _Static:
    """A collector that returns the families it was built with."""

    def __init__(self, families: Sequence[Metric]) -> None:
        self._families = list(families)

    def collect(self) -> Iterable[Metric]:
        return list(self._families)


def registry_of(families: Sequence[Metric]) -> CollectorRegistry:
    """A registry that exposes exactly ``families``."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(_Static(families))
    return reg


def write_run_textfile(path: str, report: Mapping[str, Any], *,
                       now_s: float | None = None) -> None:
    """Write the run's families to ``path`` for node-exporter's textfile collector: to a
    temporary file next to it, then renamed over it (a reader never sees half a file).

    Raises:
        OSError: the file could not be written.
    """
    fams = run_families(report, now_s=time.time() if now_s is None else now_s)
    write_to_textfile(path, registry_of(fams))


@dataclass(frozen=True)
class PushGroup:
    """One Pushgateway group of a run: its grouping key (``job`` first), the databases
    whose families it holds, and whether it holds the whole-run families."""

    key: dict[str, str]
    databases: tuple[str, ...]
    whole_run: bool


def push_groups(report: Mapping[str, Any]) -> list[PushGroup]:
    """The Pushgateway groups of a run, chosen so that no other run replaces them unless
    it is a later run of the same job over the same databases:

    - a run over one database: one group ``{job, db}`` with everything (the gateway labels
      the whole-run families with ``db`` too);
    - a run over several: ``{job, db}`` per database with its families, and
      ``{job, selection}`` with the whole-run families, ``selection`` being a digest of
      the run's sorted database URLs (the same selection, e.g. the same ``--discover``,
      gives the same group)."""
    job = str(report.get("job", "unknown"))
    dbs = list(dict.fromkeys(str(e["db"]) for e in report.get("databases") or []
                             if isinstance(e, Mapping) and e.get("db") is not None))
    if len(dbs) == 1:
        return [PushGroup({"job": job, "db": dbs[0]}, (dbs[0],), True)]
    digest = hashlib.sha256("\n".join(sorted(dbs)).encode()).hexdigest()[:16]
    return [PushGroup({"job": job, "selection": digest}, (), True),
            *(PushGroup({"job": job, "db": d}, (d,), False) for d in dbs)]


def push_run_metrics(url: str, report: Mapping[str, Any], *, now_s: float | None = None,
                     timeout_s: float = 30.0) -> int:
    """Push the run's families to the Pushgateway at ``url``: one PUT per group of
    :func:`push_groups` (a PUT replaces its group). Returns the pushes made.

    Raises:
        OSError: the gateway refused or could not be reached (urllib's errors are OSError).
    """
    now = time.time() if now_s is None else now_s
    pushed = 0
    for g in push_groups(report):
        fams = run_families(report, now_s=now, databases=g.databases, whole_run=g.whole_run)
        rest = {k: v for k, v in g.key.items() if k != "job"}
        push_to_gateway(url, job=g.key["job"], registry=registry_of(fams), grouping_key=rest,
                        timeout=timeout_s)
        pushed += 1
    return pushed


def emit_run_metrics(report: Mapping[str, Any], *, metrics_file: str | None,
                     metrics_push: str | None) -> list[str]:
    """``--metrics-file`` and ``--metrics-push`` of a batch job: write and/or push the
    run's families. A failure is logged and returned (the run's outcome stands: metrics
    never change a job's exit code)."""
    now = time.time()
    problems = []
    if metrics_file:
        try:
            write_run_textfile(metrics_file, report, now_s=now)
        except OSError as exc:
            problems.append(f"--metrics-file {metrics_file}: {exc}")
    if metrics_push:
        try:
            push_run_metrics(metrics_push, report, now_s=now)
        except OSError as exc:
            problems.append(f"--metrics-push {metrics_push}: {exc}")
    for p in problems:
        log.warning("metrics not written: %s", p)
    return problems


def process_requests() -> dict[str, int]:
    """This process's store requests so far, flat (``slatelib.objstore.accounting``)."""
    return accounting.snapshot().as_flat()


class StandingMetrics:
    """The ``/metrics`` of the worker or the service: the loop calls :meth:`publish` with
    its status (the status file's content) after every pass; a scrape builds the families
    of the latest one (a scrape never touches the loop's own state). ``l0_limit``: the L0
    depth at which writers stall ([writer] l0_max_ssts), for the time-at-limit counter.
    ``clock``: monotonic seconds (tests pass their own)."""

    def __init__(self, *, l0_limit: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._status: Mapping[str, Any] | None = None
        self._l0 = L0LimitClock(l0_limit)
        self._clock = clock
        self._extra: dict[str, list[Metric]] = {}
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.url: str | None = None
        self._stop = threading.Event()
        self._stats_thread: threading.Thread | None = None

    def publish(self, status: Mapping[str, Any]) -> None:
        """Take the loop's latest status (thread-safe, cheap)."""
        t = self._clock()
        with self._lock:
            self._status = status
            if "worker" not in status:
                for d in status.get("databases") or []:
                    l0 = d.get("l0")
                    self._l0.observe(str(d.get("db")), l0 if isinstance(l0, int) else None, t)

    def publish_families(self, key: str, families: Sequence[Metric]) -> None:
        """Families from elsewhere (per-database stats), replacing ``key``'s previous ones."""
        with self._lock:
            self._extra[key] = list(families)

    def _forget_except(self, keys: set[str]) -> None:
        with self._lock:
            for k in [k for k in self._extra if k.startswith("db:") and k not in keys]:
                del self._extra[k]

    def start_db_stats(self, targets: Callable[[], Sequence[StatsTarget]],
                       interval_s: float, *, worker: bool) -> None:
        """Collect every database's stats (:func:`slatelib.ops.db_stats.collect_db_stats`:
        one listing and a few reads per database) now and every ``interval_s`` on a daemon
        thread, as the per-database families. ``targets``: the databases, listed again
        each round. ``worker``: feed the L0-at-limit clock from the stats (the service
        feeds it from its own polls)."""
        def loop() -> None:
            errors: dict[str, int] = {}
            while True:
                try:
                    current = list(targets())
                except Exception as exc:  # keep the last round's families
                    log.warning("metrics: listing the databases failed [error=%s]", exc)
                    current = []
                else:  # databases no longer watched leave the scrape
                    self._forget_except({f"db:{name}" for name, _, _ in current})
                for name, store, path in current:
                    if self._stop.is_set():
                        return
                    self._collect_one(name, store, path, errors, worker=worker)
                if self._stop.wait(interval_s):
                    return

        self._stats_thread = threading.Thread(target=loop, name="slatelib-metrics-stats",
                                              daemon=True)
        self._stats_thread.start()

    def _collect_one(self, name: str, store: ObjectStore, path: str,
                     errors: dict[str, int], *, worker: bool) -> None:
        from slatelib.ops.db_stats import collect_db_stats

        try:
            stats = collect_db_stats(store, path).to_dict()
        except Exception as exc:  # a damaged or vanished database: counted, not fatal
            errors[name] = errors.get(name, 0) + 1
            log.warning("metrics: collecting the stats failed [db=%s, error=%s]", name, exc)
            self.publish_families(f"db:{name}", db_stats_families(name, None,
                                                                  errors=errors[name]))
            return
        errors[name] = 0
        if worker:
            deepest = stats.get("l0_ssts_max_tree")
            with self._lock:
                self._l0.observe(name, deepest if isinstance(deepest, int) else None,
                                 self._clock())
        self.publish_families(f"db:{name}", db_stats_families(name, stats))

    def collect(self) -> Iterable[Metric]:
        """The Collector protocol: what a scrape returns."""
        with self._lock:
            status = self._status
            fams = [] if status is None else standing_families(status, l0=self._l0)
            extra = [f for fs in self._extra.values() for f in fs]
        extra += process_request_families(process_requests())
        return _merge([*fams, *extra])

    def exposition(self) -> bytes:
        """The text a scrape of ``/metrics`` returns."""
        return generate_latest(self.registry)

    def serve(self, port: int, host: str) -> str:
        """Serve ``/metrics`` on ``host:port`` from a daemon thread. Returns its URL.

        Raises:
            InvalidArgumentError: the address could not be bound.
        """
        try:
            self._server, self._thread = start_http_server(port, addr=host,
                                                           registry=self.registry)
        except OSError as exc:
            raise InvalidArgumentError(f"--metrics-port {port} on {host}: {exc}") from exc
        bound = self._server.server_address[1]
        self.url = f"http://{host}:{bound}/metrics"
        log.warning("metrics: serving %s", self.url)
        return self.url

    def close(self) -> None:
        """Stop serving (when serving)."""
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def _merge(families: Sequence[Metric]) -> list[Metric]:
    """One family per name (samples of per-database families appended together)."""
    by_name: dict[str, Metric] = {}
    for f in families:
        have = by_name.get(f.name)
        if have is None:  # a fresh family: the stored ones are never extended
            have = by_name[f.name] = Metric(f.name, f.documentation, f.type, f.unit)
        have.samples.extend(f.samples)
    return list(by_name.values())


@contextlib.contextmanager
def serving_metrics(port: int | None, host: str, *, l0_limit: int,
                    targets: Callable[[], Sequence[StatsTarget]] | None = None,
                    stats_interval_s: float = 0.0, worker: bool = False,
                    ) -> Iterator[StandingMetrics | None]:
    """``--metrics-port`` / ``--metrics-host`` of the worker and the service: a
    :class:`StandingMetrics` serving ``/metrics`` for the ``with`` block (None when
    ``port`` is 0 or None: off), with the per-database stats of ``targets`` collected every
    ``stats_interval_s`` (0: not collected).

    Raises:
        InvalidArgumentError: the address could not be bound.
    """
    if not port:
        yield None
        return
    metrics = StandingMetrics(l0_limit=l0_limit)
    metrics.serve(port, host)
    if targets is not None and stats_interval_s > 0:
        metrics.start_db_stats(targets, stats_interval_s, worker=worker)
    try:
        yield metrics
    finally:
        metrics.close()
