"""What every writer of a soak run tried and what was acknowledged, and the read checks.

Every write of the harness is one key set to a value that names it: ``<writer>.<lane>.<n>``
(writer id, writing thread, per-thread counter) plus padding, or a delete. So the auditor
can tell, for any value a reader returns, which write produced it, and check:

- the value was written by a write the harness tried (never something invented, never a
  write that a zombie attempted after it was fenced: those are ``forbidden``);
- for each key, the visible version is not older than the newest acknowledged write of the
  key (versions are ordered by ``(generation, n)``: writers are opened one after the other,
  each with the next generation, and only lane 0 writes the shared "hot" keys);
- an acknowledged write whose key no later write touched is visible.

Keys: ``hot/NN`` (a few keys overwritten and deleted by every writer) and
``u/<writer>/<lane>/<n>`` (written once).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

HOT_KEYS = 12
TRIED, ACKED, FORBIDDEN = "tried", "acked", "forbidden"


class AuditFailure(AssertionError):
    """An invariant of the harness does not hold (a real bug, or a harness bug)."""


@dataclass
class Attempt:
    """One write: ``value`` None is a delete."""

    writer: str
    lane: int
    n: int
    gen: int
    key: bytes
    value: bytes | None
    status: str = TRIED

    @property
    def ident(self) -> str:
        return f"{self.writer}.{self.lane}.{self.n}"

    @property
    def order(self) -> tuple[int, int]:
        return (self.gen, self.n)


def value_for(writer: str, lane: int, n: int, pad: int) -> bytes:
    return f"{writer}.{lane}.{n}|".encode() + b"v" * pad


def ident_of(value: bytes) -> str | None:
    head, sep, _ = value.partition(b"|")
    return head.decode("ascii", "replace") if sep else None


def plan_op(seed: int, writer: str, lane: int, n: int) -> tuple[bytes, bytes | None]:
    """The ``n``-th write of ``writer``'s ``lane`` (deterministic: the parent recomputes what
    a child process wrote from the same arguments)."""
    rng = random.Random(f"{seed}/{writer}/{lane}/{n}")
    if lane == 0 and rng.random() < 0.45:
        key = b"hot/%02d" % rng.randrange(HOT_KEYS)
        if rng.random() < 0.15:
            return key, None
    else:
        key = f"u/{writer}/{lane}/{n:06d}".encode()
    return key, value_for(writer, lane, n, rng.choice((8, 40, 200, 900)))


@dataclass
class Ledger:
    """Attempts by identity, thread-safe (child-process pumps and writer threads add)."""

    attempts: dict[str, Attempt] = field(default_factory=dict)
    flushed: set[str] = field(default_factory=set)
    """Idents of acknowledged writes known to be in L0 (a memtable flush returned after)."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def mark_flushed(self, idents: Iterable[str]) -> None:
        with self._lock:
            self.flushed.update(idents)

    def flushed_snapshot(self) -> dict[str, tuple[str, Attempt]]:
        """Like :meth:`snapshot`, restricted to the writes known to be in L0."""
        with self._lock:
            return {i: (a.status, a) for i, a in self.attempts.items() if i in self.flushed}

    def tried(self, a: Attempt) -> Attempt:
        with self._lock:
            prev = self.attempts.get(a.ident)
            if prev is not None:
                return prev
            self.attempts[a.ident] = a
            return a

    def ack(self, ident: str) -> None:
        with self._lock:
            a = self.attempts[ident]
            if a.status == FORBIDDEN:
                raise AuditFailure(f"write {ident} acknowledged after its writer was fenced")
            a.status = ACKED

    def forbid(self, ident: str) -> None:
        with self._lock:
            a = self.attempts[ident]
            if a.status == ACKED:
                raise AuditFailure(f"write {ident} of a fenced writer was acknowledged")
            a.status = FORBIDDEN

    def snapshot(self) -> dict[str, tuple[str, Attempt]]:
        """ident -> (status now, attempt): the acknowledgements known at this moment."""
        with self._lock:
            return {i: (a.status, a) for i, a in self.attempts.items()}

    def counts(self) -> dict[str, int]:
        with self._lock:
            out: dict[str, int] = {}
            for a in self.attempts.values():
                out[a.status] = out.get(a.status, 0) + 1
            return out

    # -------------------------------------------------------------------- checks
    def check_read(
        self,
        seen: Mapping[bytes, bytes] | Iterable[tuple[bytes, bytes]],
        what: str,
        *,
        required: Mapping[str, tuple[str, Attempt]] | None,
        keys: Iterable[bytes] | None = None,
    ) -> None:
        """Check one read of the whole database (``seen``: key -> value).

        ``required``: the snapshot whose ACKED writes must be reflected (None: nothing is
        required, only that every visible value is a tried write). ``keys`` limits the
        requirement to those keys (a projected view)."""
        data = dict(seen)
        with self._lock:
            by_ident = dict(self.attempts)
        problems: list[str] = []
        for key, value in data.items():
            ident = ident_of(value)
            a = by_ident.get(ident or "")
            if a is None:
                problems.append(f"{key!r} = {value[:40]!r}: never attempted by any writer")
            elif a.key != key:
                problems.append(f"{key!r} holds the value of {a.ident}, written to {a.key!r}")
            elif a.status == FORBIDDEN:
                problems.append(f"{key!r} shows {a.ident}, tried by a writer already fenced")
        if required is not None:
            problems += self._missing(data, by_ident, required, keys)
        if problems:
            raise AuditFailure(f"{what}: {len(problems)} problem(s):\n  " + "\n  ".join(problems[:12]))

    @staticmethod
    def _missing(data: Mapping[bytes, bytes], by_ident: Mapping[str, Attempt],
                 required: Mapping[str, tuple[str, Attempt]],
                 keys: Iterable[bytes] | None) -> list[str]:
        allowed = None if keys is None else set(keys)
        newest: dict[bytes, Attempt] = {}
        for status, a in required.values():
            if status != ACKED or (allowed is not None and a.key not in allowed):
                continue
            cur = newest.get(a.key)
            if cur is None or a.order > cur.order:
                newest[a.key] = a
        problems = []
        for key, a in newest.items():
            value = data.get(key)
            if value is None:
                if a.value is None:
                    continue
                later_delete = any(
                    b.key == key and b.value is None and b.order > a.order
                    and b.status != FORBIDDEN for b in by_ident.values())
                if not later_delete:
                    problems.append(f"{key!r}: acknowledged {a.ident} is missing")
                continue
            shown = by_ident.get(ident_of(value) or "")
            if shown is not None and shown.order < a.order:
                problems.append(f"{key!r}: shows {shown.ident}, older than acknowledged {a.ident}")
        return problems
