"""Seeded fault building blocks: store rules, gates that stall a thread, skewed clocks.

- :func:`flaky_store` wraps the local store in a :class:`FlakyObjectStore` with the rules
  the seed picks (errors before a call takes effect, lost responses after it landed,
  latency), under the production retry policy or bare (then the faults reach the caller).
- :class:`Gate` stalls the thread that makes a matching store call until the harness
  opens it (a stalled writer flush, a stalled GC): it is the ``sleep`` of a
  FlakyObjectStore latency rule, so the call blocks right there.
- :class:`SkewedClock` is the system clock shifted by a fixed offset (clock skew between
  processes); :class:`FakeClock` would stop time, which the writers' timers need.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field

from slatelib.objstore import ObjectStore
from slatelib.objstore.registry import with_retries
from slatelib.testing.faulty import FlakyObjectStore

KINDS = ("/wal/", "/manifest/", "/compacted/", "/compactions/", "/gc/", "")
WRITE_OPS = ("put_if_absent", "put", "put_if_match", "delete", "delete_many")
READ_OPS = ("get", "get_range", "get_ranges", "head", "list", "get_with_meta")


class SkewedClock:
    """The system clock shifted by ``offset_s`` (wall time only; monotonic time is real)."""

    def __init__(self, offset_s: float) -> None:
        self.offset_ms = int(offset_s * 1000)

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000 + self.offset_ms

    def monotonic_s(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


@dataclass
class Gate:
    """Blocks the threads that reach it until :meth:`open` (or ``timeout_s``)."""

    timeout_s: float = 20.0
    reached: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)

    def sleep(self, _seconds: float) -> None:
        self.reached.set()
        self.released.wait(self.timeout_s)

    def wait_reached(self, timeout_s: float) -> bool:
        return self.reached.wait(timeout_s)

    def open(self) -> None:
        self.released.set()


@dataclass(frozen=True)
class StoreFaults:
    """The rules one actor's store gets (described for the episode log)."""

    rules: tuple[str, ...]
    retries: bool


def _path(rng: random.Random, kinds: tuple[str, ...] = KINDS) -> str | None:
    kind = rng.choice(kinds)
    return kind or None


def pick_rules(rng: random.Random, flaky: FlakyObjectStore, *, count: int,
               kinds: tuple[str, ...] = KINDS, lost: bool = True,
               latency: bool = True) -> list[str]:
    """Add ``count`` seeded rules to ``flaky`` and describe them."""
    out: list[str] = []
    for _ in range(count):
        choice = rng.choice(["before", "before", "after", "latency"])
        if choice == "after" and not lost:
            choice = "before"
        if choice == "latency" and not latency:
            choice = "before"
        path = _path(rng, kinds)
        skip = rng.choice((0, 0, 1, 2, 5))
        times = rng.choice((1, 1, 2, 3))
        if choice == "before":
            op = rng.choice((None, *WRITE_OPS[:3], *READ_OPS[:2], "list"))
            flaky.fail_before(op, path, times=times, skip=skip)  # type: ignore[arg-type]
            out.append(f"fail-before {op or '*'} {path or '*'} x{times} skip {skip}")
        elif choice == "after":
            op = rng.choice(WRITE_OPS[:4])
            flaky.fail_after(op, path, times=times, skip=skip)  # type: ignore[arg-type]
            out.append(f"lost-response {op} {path or '*'} x{times} skip {skip}")
        else:
            seconds = rng.choice((0.005, 0.02, 0.05, 0.15))
            op = rng.choice((None, *WRITE_OPS[:3], "get"))
            flaky.delay(op, path, seconds=seconds, times=rng.choice((3, 10, None)),  # type: ignore[arg-type]
                        skip=skip)
            out.append(f"latency {seconds}s {op or '*'} {path or '*'}")
    return out


def flaky_store(raw: ObjectStore, rng: random.Random, *, count: int | None = None,
                retries: bool | None = None, kinds: tuple[str, ...] = KINDS,
                lost: bool = True) -> tuple[ObjectStore, FlakyObjectStore, StoreFaults]:
    """A store over ``raw`` with seeded faults: ``(store to use, the flaky layer, what)``."""
    flaky = FlakyObjectStore(raw)
    n = rng.choice((0, 1, 1, 2, 3)) if count is None else count
    rules = pick_rules(rng, flaky, count=n, kinds=kinds, lost=lost)
    use_retries = rng.random() < 0.8 if retries is None else retries
    store: ObjectStore = with_retries(flaky) if use_retries else flaky
    return store, flaky, StoreFaults(tuple(rules), use_retries)


def gate_layer(store: ObjectStore, gate: Gate) -> FlakyObjectStore:
    """A layer over ``store`` whose latency rules stall on ``gate``; arm it with
    :func:`arm` once the actor is past the calls that must not stall."""
    return FlakyObjectStore(store, sleep=gate.sleep)


def arm(layer: FlakyObjectStore, op: str | None, path: str | None, *, skip: int = 0) -> None:
    """Stall the ``skip + 1``-th call of ``layer`` matching ``op``/``path`` at its gate."""
    layer.delay(op, path, seconds=1.0, times=1, skip=skip)  # type: ignore[arg-type]


def expected_errors() -> tuple[type[BaseException], ...]:
    """What an actor may raise under injected faults: transient, unknown outcome, lost
    race / fenced, refused state. A DataError (a missing or corrupt object), an
    InternalError or any non-slatelib exception is never expected."""
    from slatelib.errors import (
        CommitStateUnknownError,
        ConflictError,
        InvalidDbStateError,
        UnavailableError,
    )

    return (UnavailableError, CommitStateUnknownError, ConflictError, InvalidDbStateError)


def judge(exc: BaseException, what: str) -> str:
    """``exc`` as a short text when it is an expected failure of ``what``; raises
    :class:`AuditFailure` (chained) otherwise."""
    from tests.faults.ledger import AuditFailure

    if isinstance(exc, expected_errors()):
        return f"{type(exc).__name__}: {str(exc)[:160]}"
    raise AuditFailure(f"{what}: unexpected {type(exc).__name__}: {exc}") from exc
