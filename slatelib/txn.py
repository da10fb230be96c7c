"""Read-modify-write of sequenced objects: refresh -> mutate -> write_next -> retry.

This is the one place that retries :class:`ConflictError`. :class:`FencedError` (a newer
writer or compactor epoch) is never retried. Fencing checks live in
:mod:`slatelib.core.invariants`.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import TypeVar

from slatelib.clock import SYSTEM_CLOCK, Clock
from slatelib.core.invariants import check_manifest_successor
from slatelib.core.manifest import Manifest
from slatelib.errors import (
    CommitStateUnknownError,
    ConflictError,
    FencedError,
    InvalidArgumentError,
    SlateError,
)
from slatelib.store.sequenced import SequencedStore, Versioned

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_MAX_ATTEMPTS = 64
_BASE_DELAY_S = 0.01
_MAX_DELAY_S = 1.0


def check_successor(old: object, new: object) -> None:
    """The invariants of a new version over its predecessor (manifests: see
    :func:`slatelib.core.invariants.check_manifest_successor`)."""
    if isinstance(old, Manifest) and isinstance(new, Manifest):
        check_manifest_successor(old, new)


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
    version is then returned). A new manifest must satisfy
    :func:`slatelib.core.invariants.check_manifest_successor` over the version it replaces. It may raise :class:`FencedError` to stop. It must be
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
        check_successor(cur.value, new_value)
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
