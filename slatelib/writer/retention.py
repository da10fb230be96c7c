"""What a memtable flush writes for each key (0.17's flush iterators), and merge folding. Pure.

A memtable flush in 0.17.0 runs the memtable's rows (key ascending, seq descending) through
two iterators before they become an L0 SST:

1. ``MergeOperatorIterator`` (only with a merge operator): a merge operand is folded with
   the older versions of its key that have the *same* ``expire_ts``, down to and including
   a base value or tombstone. The result is a value when a base was found (a tombstone base
   counts as "no value"), else a merge operand; it keeps the newest seq, the newest
   ``create_ts`` and the earliest ``expire_ts``. Operands at a seq above the snapshot
   barrier are left alone. Without a merge operator, a merge operand is an error.
2. ``RetentionIterator``: a row whose ``expire_ts <= compaction_start_ts`` (the memtable's
   last clock tick) becomes a tombstone (``expire_ts`` dropped, ``create_ts`` kept), or is
   skipped when it is a merge operand. The newest version of a key is always kept; older
   versions only while their seq is above ``retention_min_seq`` or the version just kept
   was a merge operand.

Write batches use step 1 alone to collapse one key's operations into one row.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import groupby

from slatelib.core.merge import MergeOperator
from slatelib.core.row import MERGE, TOMBSTONE, VALUE, Row
from slatelib.errors import InternalError, MergeOperatorMissingError

MERGE_BATCH_SIZE = 100


def _merge_batch(
    op: MergeOperator, key: bytes, existing: bytes | None, operands: Sequence[bytes]
) -> bytes:
    """0.17's default ``merge_batch``: fold ``operands`` (oldest first) onto ``existing``."""
    result = existing
    for operand in operands:
        result = op.merge(key, result, operand)
    if result is None:  # no operands and no existing value
        raise InternalError(f"merge of key {key!r} with no operands")
    return result


def _max_opt(a: int | None, b: int | None) -> int | None:
    return b if a is None else (a if b is None else max(a, b))


def _min_opt(a: int | None, b: int | None) -> int | None:
    return b if a is None else (a if b is None else min(a, b))


def _fold_chain(versions: Sequence[Row], start: int, op: MergeOperator) -> tuple[Row, int]:
    """Fold the operand at ``versions[start]`` with its older matching versions.

    Returns the folded row and the index of the first version not consumed.
    """
    first = versions[start]
    key, seq, first_expire = first[0], first[1], first[4]
    max_create: int | None = None
    min_expire: int | None = None
    results: list[bytes] = []
    batch: list[Row] = []
    base: Row | None = None

    def flush_batch() -> None:
        nonlocal max_create, min_expire
        batch.reverse()
        for r in batch:
            max_create = _max_opt(max_create, r[5])
            min_expire = _min_opt(min_expire, r[4])
        results.append(_merge_batch(op, key, None, [r[3] for r in batch]))
        batch.clear()

    i = start
    while i < len(versions):
        row = versions[i]
        if row[4] != first_expire:
            break
        i += 1
        if row[2] != MERGE:
            base = row
            break
        batch.append(row)
        if len(batch) >= MERGE_BATCH_SIZE:
            flush_batch()
    if batch:
        flush_batch()
    base_value: bytes | None = None
    if base is not None:
        max_create = _max_opt(max_create, base[5])
        min_expire = _min_opt(min_expire, base[4])
        if base[2] == VALUE:
            base_value = base[3]
    results.reverse()
    final = _merge_batch(op, key, base_value, results)
    kind = VALUE if base is not None else MERGE
    return (key, seq, kind, final, min_expire, max_create), i


def fold_merges(
    versions: Sequence[Row], op: MergeOperator, *, barrier_seq: int | None = None
) -> list[Row]:
    """0.17's ``MergeOperatorIterator`` over the versions of ONE key (seq descending)."""
    out: list[Row] = []
    i = 0
    n = len(versions)
    while i < n:
        row = versions[i]
        if row[2] != MERGE or (barrier_seq is not None and row[1] > barrier_seq):
            out.append(row)
            i += 1
            continue
        folded, i = _fold_chain(versions, i, op)
        out.append(folded)
    return out


def retain_versions(
    versions: Iterable[Row], *, compaction_start_ts: int, retention_min_seq: int | None
) -> list[Row]:
    """0.17's ``RetentionIterator`` for one key (no time window, tombstones kept)."""
    out: list[Row] = []
    for row in versions:
        is_merge = row[2] == MERGE
        expire = row[4]
        if expire is not None and expire <= compaction_start_ts:
            if is_merge:
                continue
            row = (row[0], row[1], TOMBSTONE, b"", None, row[5])
        out.append(row)
        keep_older = retention_min_seq is not None and row[1] > retention_min_seq
        if not (keep_older or is_merge):
            break
    return out


def l0_rows(
    rows: Iterable[Row],
    *,
    merge_operator: MergeOperator | None,
    compaction_start_ts: int,
    retention_min_seq: int | None,
) -> Iterator[Row]:
    """The rows a memtable flush writes, from the memtable's rows in compacted order.

    Raises:
        MergeOperatorMissingError: a merge operand and no merge operator.
    """
    for key, group in groupby(rows, key=lambda r: r[0]):
        versions = list(group)
        if merge_operator is not None:
            versions = fold_merges(versions, merge_operator, barrier_seq=retention_min_seq)
        elif any(r[2] == MERGE for r in versions):
            raise MergeOperatorMissingError(key)
        yield from retain_versions(
            versions, compaction_start_ts=compaction_start_ts,
            retention_min_seq=retention_min_seq,
        )
