"""Retention: which versions a compaction writes out, as 0.17.0 decides it. Pure.

Input is a *window* of merged rows: key ascending, and every version of each key present
(windows never split a key). For each key, newest version first (0.17's
``MergeOperatorIterator`` then ``RetentionIterator``, with ``filter_tombstone =
is_dest_last_run``, ``retention_min_seq = recent_snapshot_min_seq`` and the compaction
clock = ``last_l0_clock_tick``):

1. With a merge operator, operands at or below ``min_seq`` are folded with the older
   versions that share their ``expire_ts``, in batches of 100 (``merge_batch``), onto the
   first value or tombstone below them, which they consume: the result is a value (a base
   was found) or one merge operand (none was), with the first operand's seq, the newest
   create_ts and their expire_ts. Operands above ``min_seq`` stay as they are (a snapshot
   may still need them). Without an operator every operand is kept unfolded (0.17 fails
   the compaction instead).
2. Walking the versions: an entry whose ``expire_ts <= clock`` is expired: an expired
   merge operand is dropped, an expired value becomes a tombstone with the same seq and
   create_ts. Each entry is kept; the walk stops after the first entry that is neither
   above ``min_seq`` nor a merge operand (the version a snapshot at ``min_seq`` reads), so
   every older version is dropped.
3. In the bottom run, trailing tombstones are dropped (nothing older can exist below).

Two versions of a key with the same seq (only possible in hand-made or unioned data) keep
the one from the newest source.

:func:`retain_window` is the batch entry point: it finds, with C-level passes over the
window, the few keys that need any of this (several versions, expiry, tombstones in the
bottom run, operands to fold) and copies every other row through untouched.

This module is the reference. ``slatelib/csrc/pipe.h`` applies the same steps per key in its
merge loop (through :func:`slatelib.format.native_merge.retained_batches`) and calls
:func:`retain_versions` for a key with merge operands when an operator is configured; the
merge matrix in tests/unit/core/test_retention.py runs against both.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from itertools import compress, islice, repeat
from operator import eq, is_not, itemgetter

from slatelib.core.merge import MergeOperator
from slatelib.core.row import MERGE, TOMBSTONE, VALUE, Row

MERGE_BATCH_SIZE = 100
"""0.17's ``MERGE_BATCH_SIZE``: operands folded per ``merge_batch`` call."""

_key = itemgetter(0)
_kind = itemgetter(2)
_expire = itemgetter(4)


def _neg_seq(row: Row) -> int:
    return -row[1]


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """The retention parameters of one compaction (see the module docstring)."""

    min_seq: int
    bottom: bool
    clock_tick: int
    merge_operator: MergeOperator | None = None


@dataclass
class RetentionStats:
    """Counters of what retention did (summed over windows and tasks)."""

    rows_in: int = 0
    rows_out: int = 0
    versions_dropped: int = 0
    tombstones_dropped: int = 0
    expired_to_tombstone: int = 0
    expired_merges_dropped: int = 0
    merge_operands_folded: int = 0

    def add(self, other: RetentionStats) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _fold(op: MergeOperator, key: bytes, existing: bytes | None,
          operands: Iterable[bytes]) -> bytes:
    """0.17's default ``merge_batch``: ``merge`` applied left to right."""
    value = existing
    for operand in operands:
        value = op.merge(key, value, operand)
    assert value is not None
    return value


def _max_ts(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None or a >= b else b


def fold_merges(versions: list[Row], op: MergeOperator, barrier: int,
                stats: RetentionStats) -> list[Row]:
    """Step 1 for one key (versions newest first).

    Raises:
        Exception: whatever the merge operator raises.
    """
    out: list[Row] = []
    i, n = 0, len(versions)
    key = versions[0][0]
    while i < n:
        first = versions[i]
        if first[2] != MERGE or first[1] > barrier:
            out.append(first)
            i += 1
            continue
        expire = first[4]
        results: list[bytes] = []
        batch: list[bytes] = []
        base: Row | None = None
        create: int | None = None
        j = i
        while j < n:
            row = versions[j]
            if row[4] != expire:
                break
            j += 1
            if row[2] != MERGE:
                base = row
                break
            batch.append(row[3])
            create = _max_ts(create, row[5])
            if len(batch) >= MERGE_BATCH_SIZE:
                results.append(_fold(op, key, None, reversed(batch)))
                batch = []
        if batch:
            results.append(_fold(op, key, None, reversed(batch)))
        base_value = None
        if base is not None:
            create = _max_ts(create, base[5])
            base_value = base[3] if base[2] == VALUE else None
        value = _fold(op, key, base_value, reversed(results))
        out.append((key, first[1], VALUE if base is not None else MERGE, value, expire, create))
        stats.merge_operands_folded += j - i - 1
        i = j
    return out


def retain_versions(versions: list[Row], policy: RetentionPolicy,
                    stats: RetentionStats) -> list[Row]:
    """Steps 1-3 for the versions of one key, newest first.

    Raises:
        Exception: whatever the merge operator raises.
    """
    if policy.merge_operator is not None:
        versions = fold_merges(versions, policy.merge_operator, policy.min_seq, stats)
    key = versions[0][0]
    tick, min_seq = policy.clock_tick, policy.min_seq
    out: list[Row] = []
    consumed = 0
    for row in versions:
        consumed += 1
        kind = row[2]
        expire = row[4]
        if expire is not None and expire <= tick:
            if kind == MERGE:
                stats.expired_merges_dropped += 1
                continue
            row = (key, row[1], TOMBSTONE, b"", None, row[5])
            stats.expired_to_tombstone += 1
            kind = TOMBSTONE
        out.append(row)
        if not (row[1] > min_seq or kind == MERGE):
            break
    stats.versions_dropped += len(versions) - consumed
    if policy.bottom:
        while out and out[-1][2] == TOMBSTONE:
            out.pop()
            stats.tombstones_dropped += 1
    return out


def _group(rows: list[Row]) -> list[Row]:
    """One key's versions newest first, one per seq (the first source wins a tie)."""
    rows.sort(key=_neg_seq)
    out = [rows[0]]
    for row in islice(rows, 1, None):
        if row[1] != out[-1][1]:
            out.append(row)
    return out


def _interesting(rows: list[Row], keys: list[bytes], policy: RetentionPolicy) -> list[int]:
    """Sorted indices of rows that belong to a key needing retention work."""
    n = len(rows)
    marks: set[int] = set()
    dup = list(compress(range(n - 1), map(eq, keys, islice(keys, 1, None))))
    if dup:
        marks.update(dup)
        marks.update(i + 1 for i in dup)
    expires = list(map(_expire, rows))
    if expires.count(None) != n:
        marks.update(compress(range(n), map(is_not, expires, repeat(None))))
    want_tomb = policy.bottom
    want_merge = policy.merge_operator is not None
    if want_tomb or want_merge:
        kinds = list(map(_kind, rows))
        if want_tomb and TOMBSTONE in kinds:
            marks.update(compress(range(n), map(eq, kinds, repeat(TOMBSTONE))))
        if want_merge and MERGE in kinds:
            marks.update(compress(range(n), map(eq, kinds, repeat(MERGE))))
    return sorted(marks)


def retain_window(rows: list[Row], policy: RetentionPolicy, stats: RetentionStats) -> list[Row]:
    """The rows of one window that the compaction writes out, in storage order.

    Returns ``rows`` itself when no key needs retention work.

    Raises:
        Exception: whatever the merge operator raises.
    """
    n = len(rows)
    stats.rows_in += n
    if n == 0:
        return rows
    keys = list(map(_key, rows))
    marks = _interesting(rows, keys, policy)
    if not marks:
        stats.rows_out += n
        return rows
    out: list[Row] = []
    done = 0
    for i in marks:
        if i < done:
            continue
        key = keys[i]
        end = i + 1
        while end < n and keys[end] == key:
            end += 1
        out.extend(rows[done:i])
        group = rows[i:end]
        versions = _group(group) if len(group) > 1 else group
        stats.versions_dropped += len(group) - len(versions)
        out.extend(retain_versions(versions, policy, stats))
        done = end
    out.extend(rows[done:])
    stats.rows_out += len(out)
    return out
