"""FlakyObjectStore: fault injection around any ObjectStore, for tests.

Rules pick calls by operation name and/or path (substring or compiled regex) and then:

- fail *before* the operation takes effect (nothing was written or read),
- fail *after* it took effect (a put landed but its response was "lost"),
- add latency through an injectable ``sleep``,
- let the first ``skip`` matching calls through and fail only the next ``times`` ones,
- or raise :class:`SimulatedCrash`, which is neither a ``SlateError`` nor an
  ``Exception``, to stand for the process dying at that point.

``calls`` counts every call per operation and ``log`` records ``(op, path)`` in order.

Example::

    flaky = FlakyObjectStore(open_store("memory:///"))
    flaky.fail_after("put_if_absent", path="manifest/")      # lands, then UnavailableError
    flaky.fail_before("get", path=re.compile(r"\\.sst$"), times=2, skip=1)
    flaky.crash("put", path="wal/")                           # lands, then the "process dies"
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

from slatelib.errors import UnavailableError
from slatelib.objstore.forwarding import ForwardingStore
from slatelib.objstore.object_store import BytesLike, ObjectMeta, ObjectStore, OpName

T = TypeVar("T")

Timing = Literal["before", "after"]
PathMatcher = str | re.Pattern[str] | None


class SimulatedCrash(BaseException):
    """The process "died" at this point (raised by :meth:`FlakyObjectStore.crash` rules)."""


@dataclass
class FaultRule:
    """One fault: which calls it matches and what it does to them.

    ``skip`` matching calls pass untouched, then the next ``times`` matching calls (None:
    all of them) get ``latency_s`` of sleep and, when ``error`` is set, fail ``when`` the
    operation would have started (``"before"``) or after it completed (``"after"``).
    For ``list``, a ``"before"`` failure comes after ``after_items`` items were yielded.
    ``seen`` and ``fired`` count matching and affected calls.
    """

    op: OpName | None = None
    path: PathMatcher = None
    when: Timing = "before"
    error: Callable[[], BaseException] | None = None
    skip: int = 0
    times: int | None = 1
    latency_s: float = 0.0
    after_items: int = 0
    seen: int = 0
    fired: int = 0

    def matches(self, op: OpName, paths: Sequence[str]) -> bool:
        """Whether a call of ``op`` on ``paths`` is selected by this rule."""
        if self.op is not None and self.op != op:
            return False
        if self.path is None:
            return True
        if isinstance(self.path, str):
            return any(self.path in p for p in paths)
        return any(self.path.search(p) for p in paths)


class FlakyObjectStore(ForwardingStore):
    """ObjectStore wrapper that injects faults according to its rules (thread-safe).

    Args:
        inner: the real store.
        sleep: used for latency rules (tests pass a fake).
    """

    def __init__(self, inner: ObjectStore, *, sleep: Callable[[float], None] = time.sleep) -> None:
        super().__init__(inner)
        self._sleep = sleep
        self._lock = threading.Lock()
        self.rules: list[FaultRule] = []
        self.calls: Counter[str] = Counter()
        self.log: list[tuple[OpName, str]] = []

    # -- rules -----------------------------------------------------------------------------

    def add_rule(self, rule: FaultRule) -> FaultRule:
        """Add a rule (checked in insertion order) and return it."""
        with self._lock:
            self.rules.append(rule)
        return rule

    def fail_before(
        self,
        op: OpName | None = None,
        path: PathMatcher = None,
        *,
        times: int | None = 1,
        skip: int = 0,
        error: Callable[[], BaseException] | None = None,
        after_items: int = 0,
    ) -> FaultRule:
        """Fail matching calls before they take effect (default ``UnavailableError``)."""
        rule = FaultRule(op=op, path=path, when="before", error=error or _unavailable)
        rule.skip, rule.times, rule.after_items = skip, times, after_items
        return self.add_rule(rule)

    def fail_after(
        self,
        op: OpName | None = None,
        path: PathMatcher = None,
        *,
        times: int | None = 1,
        skip: int = 0,
        error: Callable[[], BaseException] | None = None,
    ) -> FaultRule:
        """Let matching calls take effect, then fail them (the response is lost)."""
        rule = FaultRule(op=op, path=path, when="after", error=error or _unavailable)
        rule.skip, rule.times = skip, times
        return self.add_rule(rule)

    def crash(
        self,
        op: OpName | None = None,
        path: PathMatcher = None,
        *,
        when: Timing = "after",
        skip: int = 0,
    ) -> FaultRule:
        """Raise :class:`SimulatedCrash` on the next matching call (after it took effect
        by default)."""
        return self.add_rule(
            FaultRule(op=op, path=path, when=when, error=SimulatedCrash, skip=skip, times=1)
        )

    def delay(
        self,
        op: OpName | None = None,
        path: PathMatcher = None,
        *,
        seconds: float,
        times: int | None = None,
        skip: int = 0,
    ) -> FaultRule:
        """Sleep ``seconds`` (through the injected ``sleep``) before matching calls."""
        return self.add_rule(FaultRule(op=op, path=path, skip=skip, times=times, latency_s=seconds))

    def clear(self) -> None:
        """Remove every rule (counters are kept)."""
        with self._lock:
            self.rules.clear()

    # -- machinery -------------------------------------------------------------------------

    def _enter(self, op: OpName, paths: Sequence[str]) -> FaultRule | None:
        latency = 0.0
        failing: FaultRule | None = None
        with self._lock:
            self.calls[op] += 1
            self.log.append((op, ",".join(paths)))
            for rule in self.rules:
                if not rule.matches(op, paths):
                    continue
                rule.seen += 1
                if rule.seen <= rule.skip or (rule.times is not None and rule.fired >= rule.times):
                    continue
                if rule.error is not None and failing is not None:
                    continue  # one failure per call; a later rule keeps its budget
                rule.fired += 1
                latency += rule.latency_s
                if rule.error is not None:
                    failing = rule
        if latency:
            self._sleep(latency)
        return failing

    def _run(self, op: OpName, paths: Sequence[str], fn: Callable[[], T]) -> T:
        fault = self._enter(op, paths)
        if fault is not None and fault.when == "before":
            raise _make(fault, op, paths)
        result = fn()
        if fault is not None and fault.when == "after":
            raise _make(fault, op, paths)
        return result

    # -- ObjectStore -----------------------------------------------------------------------

    def get(self, path: str) -> bytes:
        """:meth:`ObjectStore.get` with faults."""
        return self._run("get", [path], lambda: self._inner.get(path))

    def get_with_meta(self, path: str) -> tuple[bytes, ObjectMeta]:
        """:meth:`ObjectStore.get_with_meta` with faults."""
        return self._run("get_with_meta", [path], lambda: self._inner.get_with_meta(path))

    def get_range(self, path: str, start: int, end: int) -> bytes:
        """:meth:`ObjectStore.get_range` with faults."""
        return self._run("get_range", [path], lambda: self._inner.get_range(path, start, end))

    def get_ranges(self, path: str, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """:meth:`ObjectStore.get_ranges` with faults."""
        return self._run("get_ranges", [path], lambda: self._inner.get_ranges(path, ranges))

    def head(self, path: str) -> ObjectMeta:
        """:meth:`ObjectStore.head` with faults."""
        return self._run("head", [path], lambda: self._inner.head(path))

    def put(self, path: str, data: BytesLike) -> None:
        """:meth:`ObjectStore.put` with faults."""
        self._run("put", [path], lambda: self._inner.put(path, data))

    def put_if_absent(self, path: str, data: BytesLike) -> None:
        """:meth:`ObjectStore.put_if_absent` with faults."""
        self._run("put_if_absent", [path], lambda: self._inner.put_if_absent(path, data))

    def put_if_match(self, path: str, data: BytesLike, e_tag: str | None) -> str | None:
        """:meth:`ObjectStore.put_if_match` with faults."""
        return self._run(
            "put_if_match", [path], lambda: self._inner.put_if_match(path, data, e_tag)
        )

    def delete(self, path: str) -> None:
        """:meth:`ObjectStore.delete` with faults."""
        self._run("delete", [path], lambda: self._inner.delete(path))

    def delete_many(self, paths: Iterable[str]) -> None:
        """:meth:`ObjectStore.delete_many` with faults (a rule matches if any path does)."""
        batch = list(paths)
        self._run("delete_many", batch, lambda: self._inner.delete_many(batch))

    def list(
        self, prefix: str, *, start_after: str | None = None, end_before: str | None = None
    ) -> Iterator[ObjectMeta]:
        """:meth:`ObjectStore.list` with faults (the rule path is matched against the
        prefix)."""
        fault = self._enter("list", [prefix])
        items = self._inner.list(prefix, start_after=start_after, end_before=end_before)
        return self._list(items, fault, prefix)

    @staticmethod
    def _list(
        items: Iterator[ObjectMeta], fault: FaultRule | None, prefix: str
    ) -> Iterator[ObjectMeta]:
        if fault is not None and fault.when == "before":
            for count, meta in enumerate(items):
                if count >= fault.after_items:
                    break
                yield meta
            raise _make(fault, "list", [prefix])
        yield from items
        if fault is not None:
            raise _make(fault, "list", [prefix])


def _unavailable() -> BaseException:
    return UnavailableError("injected fault")


def _make(rule: FaultRule, op: OpName, paths: Sequence[str]) -> BaseException:
    if rule.error is None or rule.error is _unavailable:
        return UnavailableError(f"injected fault {rule.when} {op} {', '.join(paths)!r}")
    return rule.error()
