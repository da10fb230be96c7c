"""Checking a rescale: the targets' ranges tile the source's key space, and every target
holds exactly what its parts hold (live keys, key + value bytes and an order-independent
digest, :class:`RangeStats`). Pure.

Digests add up (mod 2^128) over disjoint sets of rows, so a target's digest can be compared
with the sum over its source ranges, and both can be computed in chunks in parallel.

:meth:`RangeStats.of` is the reference; ``slatelib._speedups.range_stats`` computes the same
three numbers in C (the rescale check uses it when the extension is built:
``slatelib.ops.rescale.validate.range_stats``), with the same per-row hash, so the two paths
agree bit for bit.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from slatelib.core.manifest import Manifest, SstHandle
from slatelib.core.ranges import BoundKind, BytesRange
from slatelib.errors import InvalidDbStateError

DIGEST_MOD = 1 << 128


def check_tiling(ranges: Sequence[BytesRange], whole: BytesRange | None = None) -> None:
    """The ranges tile ``whole`` (default: every key) exactly: ``whole``'s start, then each
    range ending where the next begins (excluded end, included start at the same key), then
    ``whole``'s end; no range empty.

    Raises:
        InvalidDbStateError: a gap, an overlap or an empty range (named).
    """
    whole = whole or BytesRange.all()
    if not ranges:
        raise InvalidDbStateError("no ranges: nothing tiles the key space")
    if ranges[0].start != whole.start or ranges[-1].end != whole.end:
        raise InvalidDbStateError(
            f"ranges {ranges[0]} .. {ranges[-1]} do not span {whole}")
    for i, r in enumerate(ranges):
        if r.is_empty():
            raise InvalidDbStateError(f"range {i} {r} is empty")
        if i + 1 < len(ranges):
            nxt = ranges[i + 1].start
            end = r.end
            ok = (end.kind == BoundKind.EXCLUDED and nxt.kind == BoundKind.INCLUDED
                  and end.key == nxt.key) or (
                  end.kind == BoundKind.INCLUDED and nxt.kind == BoundKind.EXCLUDED
                  and end.key == nxt.key)
            if not ok:
                raise InvalidDbStateError(
                    f"range {i} {r} and range {i + 1} {ranges[i + 1]} leave a gap or overlap")


def row_digest(key: bytes, value: bytes) -> int:
    """A 128-bit hash of one ``(key, value)``: BLAKE2b-128 of ``len(key)`` (4 bytes, little
    endian) + key + value, read as a little-endian integer. Digests of disjoint sets add up
    (mod 2^128), so a shard's digest equals the digest of its range of the source.
    :meth:`RangeStats.of` and ``_speedups.range_stats`` inline exactly this."""
    h = hashlib.blake2b(len(key).to_bytes(4, "little"), digest_size=16)
    h.update(key)
    h.update(value)
    return int.from_bytes(h.digest(), "little")


@dataclass(frozen=True)
class RangeStats:
    """Live keys in a range, their key + value bytes and digest."""

    keys: int = 0
    nbytes: int = 0
    digest: int = 0

    @staticmethod
    def of(rows: Iterable[tuple[bytes, bytes]]) -> RangeStats:
        """The stats of ``rows`` (pure Python; :func:`row_digest` inlined, reduced once)."""
        keys = size = digest = 0
        blake2b = hashlib.blake2b
        from_bytes = int.from_bytes
        for k, v in rows:
            keys += 1
            size += len(k) + len(v)
            h = blake2b(len(k).to_bytes(4, "little"), digest_size=16)
            h.update(k)
            h.update(v)
            digest += from_bytes(h.digest(), "little")
        return RangeStats(keys, size, digest % DIGEST_MOD)

    def __add__(self, other: RangeStats) -> RangeStats:
        return RangeStats(self.keys + other.keys, self.nbytes + other.nbytes,
                          (self.digest + other.digest) % DIGEST_MOD)

    def to_dict(self) -> dict[str, Any]:
        return {"keys": self.keys, "bytes": self.nbytes, "digest": f"{self.digest:032x}"}


def compare_stats(target: str, expected: RangeStats, actual: RangeStats) -> str | None:
    """None when ``target`` holds exactly what its sources' ranges hold, else why not."""
    if expected == actual:
        return None
    return (f"{target}: holds {actual.keys} keys / {actual.nbytes} bytes (digest "
            f"{actual.digest:032x}), its sources' ranges {expected.keys} keys / "
            f"{expected.nbytes} bytes (digest {expected.digest:032x})")


def committed_problem(m: Manifest, outputs: Sequence[SstHandle], sources: Iterable[str],
                      ) -> str | None:
    """None when target manifest ``m`` references exactly ``outputs`` (the SSTs its
    compaction tasks wrote and checked, in key order): no L0, one sorted run whose views are
    those SSTs whole and in that order, with the same handles, no other SST, no segment, no
    SST of a database in ``sources`` left, initialized and not destroyed; else what differs
    (the first difference found).
    Pure."""
    if not m.initialized or m.destroyed_at_s is not None:
        return "it is not initialized" if not m.initialized else "it is destroyed"
    if m.l0:
        return f"it has {len(m.l0)} L0 views"
    if m.segments:
        return f"it has {len(m.segments)} segments"
    if len(m.compacted) != 1:
        return f"it has {len(m.compacted)} sorted runs, not one"
    views = m.compacted[0].views
    ids = [v.sst_id for v in views]
    want = [h.id for h in outputs]
    if ids != want:
        extra = len(set(ids) - set(want))
        missing = len(set(want) - set(ids))
        return (f"its sorted run's SSTs are not the checked outputs ({len(ids)} SSTs, "
                f"{extra} not checked, {missing} checked ones missing, or another order)")
    clipped = [v for v in views if v.visible_range is not None]
    if clipped:
        return f"{len(clipped)} views of its sorted run are clipped"
    if len(m.ssts) != len(outputs) or any(m.sst_map.get(h.id) != h for h in outputs):
        return "its SST handles are not the checked outputs' handles"
    names = set(sources)
    left = [e.path for e in m.external_dbs if e.path in names and e.sst_ids]
    if left:
        return f"it still references SSTs of {sorted(left)}"
    return None


__all__ = ["DIGEST_MOD", "RangeStats", "check_tiling", "committed_problem", "compare_stats",
           "row_digest"]
