"""Read-modify-write of sequenced objects: refresh -> mutate -> write_next -> retry.

This is the one place that retries :class:`ConflictError`. :class:`FencedError` (a newer
writer or compactor epoch) is never retried. Fencing checks live in
:mod:`slatelib.core.invariants`. :func:`transact` is the one wrapper for writes that must
know they landed: a fence check, a deadline (``manifest_update_timeout``) and the "did it
land" test around :func:`update_versioned`. The manifest of one database gets its handle,
with the checkpoint and external-database operations, in :mod:`slatelib.db_manifest`.

Callbacks (``mutate``, ``step``, ``fence``, ``landed``) are pure functions of the version
they are given: reads and writes of other objects happen before or after the loop, so a
retry repeats none of them (docs/rfcs/0020-house-second-step.md, "manifest").
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from slatelib.clock import SYSTEM_CLOCK, Clock
from slatelib.errors import (
    CommitStateUnknownError,
    ConflictError,
    FencedError,
    InvalidArgumentError,
    SlateError,
    UnavailableError,
)
from slatelib.store.sequenced import SequencedStore, Versioned

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_MAX_ATTEMPTS = 64
_BASE_DELAY_S = 0.01
_MAX_DELAY_S = 1.0


def update_versioned(
    store: SequencedStore[T],
    mutate: Callable[[Versioned[T]], T | None],
    *,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    clock: Clock = SYSTEM_CLOCK,
    rng: random.Random | None = None,
    current: Versioned[T] | None = None,
) -> Versioned[T]:
    """Apply ``mutate`` to the latest version and write it as the next id, retrying on
    conflicts with exponential backoff and jitter.

    ``mutate`` returns the new value, or None when nothing needs writing (the current
    version is then returned). The new value must satisfy the store's successor rule
    (:meth:`SequencedStore.check_successor`; for manifests
    :func:`slatelib.core.invariants.check_manifest_successor`) over the version it
    replaces. It may raise :class:`FencedError` to stop. It must be
    idempotent: when a write's outcome is unknown (a lost response), the loop re-reads the
    latest version and calls ``mutate`` again, which must then see its change already
    applied and return None (or apply it again, for changes such as epoch claims where
    re-applying is the safe answer).

    Raises:
        FencedError: raised by ``mutate``; never retried.
        InternalError: the new version breaks an invariant (nothing written).
        ConflictError: still conflicting after ``max_attempts``.
        CommitStateUnknownError: the last attempt's outcome was unknown and a re-read does
            not show the change (it may still have been written).
    """
    if max_attempts < 1:
        raise InvalidArgumentError("max_attempts must be at least 1")
    rnd = rng or random.Random()
    delay = _BASE_DELAY_S
    last_exc: SlateError | None = None
    for attempt in range(max_attempts):
        cur = current if (attempt == 0 and current is not None) else store.read_latest()
        new_value = mutate(cur)
        if new_value is None:
            return cur
        store.check_successor(cur.value, new_value)
        try:
            return store.write(cur.id + 1, new_value)
        except FencedError:
            raise
        except (ConflictError, CommitStateUnknownError) as exc:
            last_exc = exc
            log.info("cas %s, retrying [attempt=%d, id=%d]",
                     "conflict" if isinstance(exc, ConflictError) else "outcome unknown",
                     attempt + 1, cur.id + 1)
            clock.sleep(rnd.uniform(0, delay))
            delay = min(delay * 2, _MAX_DELAY_S)
    if isinstance(last_exc, CommitStateUnknownError):
        # The last write's outcome is unknown: re-read once, as between attempts.
        cur = store.read_latest()
        if mutate(cur) is None:
            return cur
        raise CommitStateUnknownError(
            f"gave up after {max_attempts} attempts; the last write's outcome is unknown and "
            f"the latest version ({cur.id}) does not hold the change"
        ) from last_exc
    raise ConflictError(f"gave up after {max_attempts} conflicting attempts") from last_exc


class UpdateTimeoutError(UnavailableError):
    """A driver-side write was not done within ``manifest_update_timeout``. The latest state
    was read and does not hold the change, so the outcome is known: not written."""


@dataclass(frozen=True)
class Deadline:
    """A write's ``manifest_update_timeout``, counted from when the write began."""

    clock: Clock
    timeout_s: float
    what: str
    start_s: float

    @classmethod
    def starting_now(cls, clock: Clock, timeout_s: float, what: str) -> Deadline:
        return cls(clock, timeout_s, what, clock.monotonic_s())

    def check(self) -> None:
        """Raises:
            UpdateTimeoutError: the deadline has passed."""
        if self.clock.monotonic_s() - self.start_s > self.timeout_s:
            raise UpdateTimeoutError(
                f"{self.what}: not done within {self.timeout_s:g}s of retries")


def transact(
    store: SequencedStore[T],
    step: Callable[[Versioned[T]], T | None],
    *,
    clock: Clock = SYSTEM_CLOCK,
    fence: Callable[[T], None] | None = None,
    landed: Callable[[T], bool] | None = None,
    deadline: Deadline | None = None,
    current: Versioned[T] | None = None,
    what: str = "update",
) -> Versioned[T]:
    """"Fence, deadline, did it land" around :func:`update_versioned`, in this order on
    every version an attempt would replace:

    1. ``landed(value)``: our change is there already (an earlier attempt whose response
       was lost landed): nothing is written, even past the deadline;
    2. ``fence(value)``: raises :class:`FencedError` when a newer epoch took over;
    3. ``step(version)``: the change (None: nothing to write);
    4. ``deadline``: once passed, writing again is refused (:class:`UpdateTimeoutError`).

    With ``landed``, the version returned must hold the change.

    Raises:
        FencedError / UpdateTimeoutError / as :func:`update_versioned`.
        ConflictError: with ``landed``, the loop returned a version without the change.
    """
    def attempt(cur: Versioned[T]) -> T | None:
        if landed is not None and landed(cur.value):
            return None
        if fence is not None:
            fence(cur.value)
        new = step(cur)
        if new is not None and deadline is not None:
            deadline.check()
        return new

    out = update_versioned(store, attempt, clock=clock, current=current)
    if landed is not None and not landed(out.value):
        raise ConflictError(f"{what} did not land (latest version {out.id})")
    return out
