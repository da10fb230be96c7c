"""Write batches: several operations committed atomically under one sequence number.

Semantics follow 0.17.0's ``WriteBatch``: a put or a delete replaces every earlier operation
on the same key in the batch, a merge is appended to them. When the batch is committed its
operations become rows in key order, all with the batch's sequence number and creation
time; one key's operations are folded into a single row with the merge operator (0.17
refuses a batch whose merges on one key carry different TTLs).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from slatelib.core.merge import MergeOperator
from slatelib.core.retention import RetentionStats, fold_merges
from slatelib.core.row import MERGE, TOMBSTONE, VALUE, Row
from slatelib.errors import InvalidArgumentError, MergeOperatorMissingError

U32_MAX: Final = 0xFFFFFFFF
I64_MAX: Final = (1 << 63) - 1


class _NoExpiry:
    """Sentinel type of :data:`NO_EXPIRY`."""

    _instance: _NoExpiry | None = None

    def __new__(cls) -> _NoExpiry:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NO_EXPIRY"


NO_EXPIRY: Final = _NoExpiry()
"""``ttl=NO_EXPIRY``: the row never expires, even when ``default_ttl_millis`` is set."""

Ttl = int | _NoExpiry | None
"""Milliseconds until expiry, :data:`NO_EXPIRY`, or None for ``default_ttl_millis``."""

# (kind, value, ttl, expire_at_ms)
_Op = tuple[int, bytes, Ttl, "int | None"]


def _as_bytes(data: object, what: str) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise InvalidArgumentError(f"{what} must be bytes, got {type(data).__name__}")


def check_key(key: object) -> bytes:
    """A key as bytes.

    Raises:
        InvalidArgumentError: not bytes, empty, or longer than 2**32-1 bytes.
    """
    k = _as_bytes(key, "key")
    if not k:
        raise InvalidArgumentError("keys must not be empty")
    if len(k) > U32_MAX:
        raise InvalidArgumentError(f"key of {len(k)} bytes is longer than 2**32-1")
    return k


def check_value(value: object, what: str) -> bytes:
    v = _as_bytes(value, what)
    if len(v) > U32_MAX:
        raise InvalidArgumentError(f"{what} of {len(v)} bytes is longer than 2**32-1")
    return v


def check_ttl(ttl: Ttl, expire_at_ms: int | None) -> None:
    if ttl is not None and not isinstance(ttl, _NoExpiry):
        if isinstance(ttl, bool) or not isinstance(ttl, int) or ttl < 0:
            raise InvalidArgumentError(f"ttl must be milliseconds >= 0 or NO_EXPIRY, got {ttl!r}")
    if expire_at_ms is not None:
        if ttl is not None:
            raise InvalidArgumentError("give either ttl or expire_at_ms, not both")
        if isinstance(expire_at_ms, bool) or not isinstance(expire_at_ms, int):
            raise InvalidArgumentError(f"expire_at_ms must be an integer, got {expire_at_ms!r}")


class WriteBatch:
    """Operations applied atomically, with one sequence number, by ``Db.write``."""

    __slots__ = ("_ops", "_count", "_has_merge", "_bytes")

    def __init__(self) -> None:
        self._ops: dict[bytes, list[_Op]] = {}
        self._count = 0
        self._has_merge = False
        self._bytes = 0

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return bool(self._ops)

    @property
    def size_bytes(self) -> int:
        """Keys and values of the operations (for back-pressure accounting)."""
        return self._bytes

    def _replace(self, key: bytes, op: _Op) -> None:
        old = self._ops.get(key)
        if old is not None:
            self._count -= len(old)
            self._bytes -= sum(len(key) + len(o[1]) for o in old)
        self._ops[key] = [op]
        self._count += 1
        self._bytes += len(key) + len(op[1])

    def put(
        self, key: bytes, value: bytes, ttl: Ttl = None, *, expire_at_ms: int | None = None
    ) -> WriteBatch:
        """Set ``key`` to ``value`` (replacing earlier operations on ``key`` in this batch).

        ``ttl`` is milliseconds until expiry (None: the writer's ``default_ttl_millis``;
        :data:`NO_EXPIRY`: never); ``expire_at_ms`` sets an absolute Unix time instead.

        Raises:
            InvalidArgumentError: empty or oversized key or value, or a bad TTL.
        """
        k = check_key(key)
        v = check_value(value, "value")
        check_ttl(ttl, expire_at_ms)
        self._replace(k, (VALUE, v, ttl, expire_at_ms))
        return self

    def delete(self, key: bytes) -> WriteBatch:
        """Delete ``key`` (replacing earlier operations on ``key`` in this batch).

        Raises:
            InvalidArgumentError: empty or oversized key.
        """
        self._replace(check_key(key), (TOMBSTONE, b"", None, None))
        return self

    def merge(
        self, key: bytes, operand: bytes, ttl: Ttl = None, *, expire_at_ms: int | None = None
    ) -> WriteBatch:
        """Add a merge operand for ``key`` (after earlier operations on ``key``).

        Raises:
            InvalidArgumentError: empty or oversized key or operand, or a bad TTL.
        """
        k = check_key(key)
        v = check_value(operand, "merge operand")
        check_ttl(ttl, expire_at_ms)
        self._ops.setdefault(k, []).append((MERGE, v, ttl, expire_at_ms))
        self._count += 1
        self._bytes += len(k) + len(v)
        self._has_merge = True
        return self

    def keys(self) -> Iterator[bytes]:
        return iter(self._ops)


def expire_ts(ttl: Ttl, expire_at_ms: int | None, now_ms: int, default_ttl_ms: int | None) -> int | None:
    if expire_at_ms is not None:
        return expire_at_ms
    if isinstance(ttl, _NoExpiry):
        return None
    millis = default_ttl_ms if ttl is None else ttl
    if millis is None:
        return None
    expire = now_ms + millis
    return expire if expire <= I64_MAX else None


def batch_rows(
    batch: WriteBatch,
    seq: int,
    now_ms: int,
    *,
    default_ttl_ms: int | None,
    merge_operator: MergeOperator | None,
) -> list[Row]:
    """The rows a committed batch writes (key order, one row per key).

    Raises:
        InvalidArgumentError: an empty batch, or merges on one key with different TTLs.
        MergeOperatorMissingError: the batch merges and no merge operator is configured.
    """
    if not batch._ops:
        raise InvalidArgumentError("a write batch needs at least one operation")
    if batch._has_merge and merge_operator is None:
        first = next(k for k, ops in sorted(batch._ops.items()) if any(o[0] == MERGE for o in ops))
        raise MergeOperatorMissingError(first)
    rows: list[Row] = []
    for key in sorted(batch._ops):
        ops = batch._ops[key]
        if not batch._has_merge:  # one put or delete per key: nothing to fold
            kind, value, ttl, at = ops[0]
            expire = None if kind == TOMBSTONE else expire_ts(ttl, at, now_ms, default_ttl_ms)
            rows.append((key, seq, kind, value, expire, now_ms))
            continue
        assert merge_operator is not None
        entries: list[Row] = []
        for kind, value, ttl, at in reversed(ops):
            expire = None if kind == TOMBSTONE else expire_ts(ttl, at, now_ms, default_ttl_ms)
            entries.append((key, seq, kind, value, expire, now_ms))
        folded = fold_merges(entries, merge_operator, seq, RetentionStats())
        if len(folded) != 1:
            raise InvalidArgumentError(
                f"key {key!r}: merges in one batch must share one TTL "
                f"(expire times {[r[4] for r in folded]})"
            )
        rows.append(folded[0])
    return rows
