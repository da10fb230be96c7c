"""Store request accounting: how many object-store requests this process made, by the kinds
S3 bills (docs/request-accounting.md).

The bare obstore adapter (:class:`~slatelib.objstore.obstore_store.ObstoreObjectStore`) is
the only place that knows how many HTTP requests one :class:`ObjectStore` call becomes
(ranges coalesced into spans, listing pages, delete batches, multipart uploads), so it
records each request at the point where it calls obstore, below every wrapper: an attempt
that :class:`~slatelib.objstore.retrying.RetryingObjectStore` retries is counted again, and
each retry is also counted in ``retries``. ``file://`` and ``memory://`` stores record the
requests S3 would have been sent for the same calls.

Counts go to one process-wide :class:`RequestCounter` (:data:`PROCESS`; thread-safe).
A job takes a :func:`snapshot` before and after and reports the difference; a Spark task
does the same around its own work and hands its delta to the driver
(:mod:`slatelib.spark.executors`), so that a reused Python worker never reports the
requests of an earlier task. Pure apart from :data:`PROCESS` and its lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import Any, Literal

__all__ = ["KINDS", "PROCESS", "JobRequests", "RequestCounter", "RequestCounts", "RequestKind", "list_pages",
           "measure", "multipart_requests", "record", "record_read", "record_retry", "requests_report",
           "snapshot"]

RequestKind = Literal["get", "ranged_get", "head", "put", "conditional_put", "list", "delete",
                      "multi_delete"]
"""One billed S3 request: GET, GET with ``Range``, HEAD, PUT (every request of a multipart
upload too), PUT with ``If-None-Match``/``If-Match``, one ListObjectsV2 page, DELETE, one
DeleteObjects batch."""

KINDS: tuple[RequestKind, ...] = ("get", "ranged_get", "head", "put", "conditional_put", "list",
                                  "delete", "multi_delete")

LIST_PAGE_KEYS = 1000
"""Keys in one ListObjectsV2 page (S3's default ``max-keys``)."""


@dataclass(frozen=True, slots=True)
class RequestCounts:
    """Requests by kind, object bytes moved and retries (a snapshot or a difference)."""

    get: int = 0
    ranged_get: int = 0
    head: int = 0
    put: int = 0
    conditional_put: int = 0
    list: int = 0
    delete: int = 0
    multi_delete: int = 0
    bytes_read: int = 0
    """Object bytes received (GET bodies)."""
    bytes_written: int = 0
    """Object bytes sent (PUT bodies)."""
    retries: int = 0
    """Attempts that slatelib's retry layer retried."""

    @property
    def total(self) -> int:
        """All requests."""
        return sum(getattr(self, k) for k in KINDS)

    def __add__(self, other: RequestCounts) -> RequestCounts:
        return RequestCounts(**{f.name: getattr(self, f.name) + getattr(other, f.name)
                                for f in fields(self)})

    def __sub__(self, other: RequestCounts) -> RequestCounts:
        return RequestCounts(**{f.name: getattr(self, f.name) - getattr(other, f.name)
                                for f in fields(self)})

    def as_flat(self) -> dict[str, int]:
        """Every non-zero field by name (what a Spark accumulator of int dicts sums)."""
        return {f.name: v for f in fields(self) if (v := getattr(self, f.name))}

    @staticmethod
    def from_flat(values: Mapping[str, Any]) -> RequestCounts:
        """The counts of :meth:`as_flat` (unknown keys ignored)."""
        names = {f.name for f in fields(RequestCounts)}
        return RequestCounts(**{k: int(v) for k, v in values.items() if k in names})

    def to_dict(self) -> dict[str, Any]:
        """The report shape: ``requests`` (non-zero kinds), ``total``, ``bytes_read``,
        ``bytes_written``, ``retries``."""
        return {"requests": {k: n for k in KINDS if (n := getattr(self, k))},
                "total": self.total, "bytes_read": self.bytes_read,
                "bytes_written": self.bytes_written, "retries": self.retries}


ZERO = RequestCounts()
_FIELDS = tuple(f.name for f in fields(RequestCounts))


def requests_report(driver: RequestCounts, executors: RequestCounts = ZERO) -> dict[str, Any]:
    """A report's ``store_requests``: the sum of ``driver`` and ``executors``, then each
    under its own key (docs/request-accounting.md)."""
    return {**(driver + executors).to_dict(), "driver": driver.to_dict(),
            "executors": executors.to_dict()}


class RequestCounter:
    """A thread-safe running count of requests."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = dict.fromkeys(_FIELDS, 0)

    def record(self, kind: RequestKind, n: int = 1, *, bytes_read: int = 0,
               bytes_written: int = 0) -> None:
        """Count ``n`` requests of ``kind`` and the object bytes they moved."""
        counts = self._counts
        with self._lock:
            counts[kind] += n
            counts["bytes_read"] += bytes_read
            counts["bytes_written"] += bytes_written

    def record_retry(self) -> None:
        """Count one retried attempt."""
        with self._lock:
            self._counts["retries"] += 1

    def snapshot(self) -> RequestCounts:
        """The counts so far."""
        with self._lock:
            return RequestCounts(**self._counts)


PROCESS = RequestCounter()
"""This process's counter: every store of the process records here."""


def record(kind: RequestKind, n: int = 1, *, bytes_read: int = 0, bytes_written: int = 0) -> None:
    """Count requests in :data:`PROCESS`."""
    PROCESS.record(kind, n, bytes_read=bytes_read, bytes_written=bytes_written)


def record_read(n: int) -> None:
    """Count ``n`` object bytes received (by requests already counted) in :data:`PROCESS`."""
    PROCESS.record("get", 0, bytes_read=n)


def record_retry() -> None:
    """Count one retried attempt in :data:`PROCESS`."""
    PROCESS.record_retry()


def snapshot() -> RequestCounts:
    """:data:`PROCESS`'s counts so far."""
    return PROCESS.snapshot()


class Measurement:
    """The requests made while a :func:`measure` block ran (``delta``, final on exit)."""

    def __init__(self, before: RequestCounts) -> None:
        self.before = before
        self._after: RequestCounts | None = None

    @property
    def delta(self) -> RequestCounts:
        return (self._after if self._after is not None else snapshot()) - self.before

    def stop(self) -> None:
        self._after = snapshot()


@contextmanager
def measure() -> Iterator[Measurement]:
    """The requests this process makes inside the block (every thread's)."""
    m = Measurement(snapshot())
    try:
        yield m
    finally:
        m.stop()


def list_pages(listed: int) -> int:
    """ListObjectsV2 pages S3 returns for ``listed`` keys read in order (at least one: an
    empty listing is one request)."""
    return max(1, -(-listed // LIST_PAGE_KEYS))


def multipart_requests(size: int, part_size: int) -> int:
    """Requests of a multipart upload of ``size`` bytes: create, one per part, complete."""
    return 2 + max(1, -(-size // part_size))


class JobRequests:
    """The requests of one job run: this process's (the driver's) and, with ``executors``
    (a function returning the running total of the executors' requests, e.g.
    :func:`slatelib.spark.executors.executor_requests`), its Spark tasks', both counted
    from the moment this object is made."""

    def __init__(self, executors: Callable[[], RequestCounts] | None = None) -> None:
        self._executors = executors
        self._driver0 = snapshot()
        self._executors0 = executors() if executors is not None else ZERO

    def driver(self) -> RequestCounts:
        """This process's requests since the start."""
        return snapshot() - self._driver0

    def executors(self) -> RequestCounts:
        """The executors' requests since the start (tasks that finished)."""
        return self._executors() - self._executors0 if self._executors is not None else ZERO

    def report(self) -> dict[str, Any]:
        """The report's ``store_requests`` (:func:`requests_report`)."""
        return requests_report(self.driver(), self.executors())
