"""Seeded random workloads for interop tests: binary keys, values of every size class, and
a layered database (several L0s, several sorted runs, WAL-only rows) written by the
official package through :mod:`tests.interop.official`.

Everything takes a ``random.Random``, so a failing case is reproduced by its seed (tests
put the seed in their parameter ids).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from tests.interop.official import (
    FAR_FUTURE_MS,
    LONG_AGO_MS,
    Delete,
    Merge,
    OfficialAdmin,
    OfficialDb,
    Op,
    Put,
)

EDGE_KEYS = (b"\x00", b"\xff", b"\x00\x00", b"\xff\xff", b"\x00\xff", b"\xff\x00", b"\x01")
"""Keys at the edges of the byte order; every key pool starts with them."""

BIG_VALUE_LEN = 70_000
"""Longer than the largest block size (64 KiB) and than one WAL block."""
BIG_RUN_KEY = b"\xff\xffbig-in-run"
BIG_WAL_KEY = b"\xff\xffbig-in-wal"
"""Keys of :func:`write_layered`'s > 64 KiB values (kept out of the random key pools, so
random deletes never remove them)."""


def random_key(rng: random.Random) -> bytes:
    """A key of 1..40 random bytes, biased towards 0x00 and 0xFF bytes."""
    n = rng.choice((1, 1, 2, 3, 5, 8, 13, 21, 40))
    alphabet = (0x00, 0xFF, 0x00, 0xFF, 0x01, 0xFE, 0x7F, 0x80)
    return bytes(rng.choice(alphabet) if rng.random() < 0.4 else rng.randrange(256)
                 for _ in range(n))


def key_pool(rng: random.Random, n: int) -> list[bytes]:
    """``n`` distinct keys: the :data:`EDGE_KEYS`, random keys, and keys that extend each
    other by a 0x00 or 0xFF byte (``k``, ``k + b"\\x00"``, ``k + b"\\xff"``)."""
    keys: set[bytes] = set(EDGE_KEYS)
    while len(keys) < n:
        k = random_key(rng)
        keys.add(k)
        if rng.random() < 0.1:
            keys.add(k + b"\x00")
            keys.add(k + b"\xff")
    out = sorted(keys)
    rng.shuffle(out)
    return out


def absent_keys(rng: random.Random, present: Sequence[bytes], n: int) -> list[bytes]:
    """``n`` keys never written: random keys and neighbours of written keys."""
    taken = set(present)
    out: set[bytes] = set()
    while len(out) < n:
        if present and rng.random() < 0.5:
            k = rng.choice(present) + bytes([rng.randrange(256)])
        else:
            k = random_key(rng) + b"\xaa"
        if k not in taken:
            out.add(k)
    return sorted(out)


def random_value(rng: random.Random, block_size: int) -> bytes:
    """Empty (15%), short, about one block, or several blocks long."""
    r = rng.random()
    if r < 0.15:
        return b""
    if r < 0.80:
        n = rng.randrange(1, 64)
    elif r < 0.94:
        n = rng.randrange(64, block_size)
    else:
        n = rng.randrange(block_size + 1, 3 * block_size)
    return rng.randbytes(n)


def random_ops(
    rng: random.Random,
    keys: Sequence[bytes],
    n: int,
    *,
    block_size: int,
    deletes: float = 0.15,
    merges: float = 0.0,
) -> list[Op]:
    """``n`` operations on keys drawn from ``keys`` (so batches overwrite, delete and merge
    earlier keys). Merges draw only from the first half of ``keys`` so that tests can keep
    TTL keys apart (see :class:`~tests.interop.official.Model`)."""
    ops: list[Op] = []
    for _ in range(n):
        r = rng.random()
        if r < deletes:
            ops.append(Delete(rng.choice(keys)))
        elif r < deletes + merges:
            ops.append(Merge(rng.choice(keys[: max(1, len(keys) // 2)]), rng.randbytes(rng.randrange(0, 9))))
        else:
            ops.append(Put(rng.choice(keys), random_value(rng, block_size)))
    return ops


def ttl_ops(rng: random.Random, keys: Sequence[bytes]) -> list[Op]:
    """Puts with an absolute TTL: every other one already expired (2000-01-01), the others
    far in the future (2100-01-01)."""
    return [
        Put(k, rng.randbytes(rng.randrange(1, 20)),
            expire_at_ms=LONG_AGO_MS if i % 2 == 0 else FAR_FUTURE_MS)
        for i, k in enumerate(keys)
    ]


@dataclass(frozen=True)
class LayeredShape:
    """What :func:`write_layered` left behind (checked by the tests, so a change in the
    official package's behaviour shows up as a failure instead of a weaker test)."""

    l0_views: int
    sorted_runs: tuple[int, ...]
    wal_only_batches: int


def write_layered(
    db: OfficialDb,
    admin: OfficialAdmin,
    rng: random.Random,
    keys: Sequence[bytes],
    *,
    block_size: int,
    batch_size: int = 120,
    merges: bool = False,
    ttl_keys: Sequence[bytes] = (),
) -> LayeredShape:
    """Write a database with data at every level, through an open official ``db``:

    1. two batches, each flushed to L0, compacted (L0-only) into sorted run 2;
    2. two more L0s; the older one compacted alone into a new run 6 (L0-only, newer run);
    3. one more L0; then the oldest L0 together with run 6 compacted into run 6 (a
       compaction that includes an existing run);
    4. one more L0 (so two L0s remain), then two WAL-only batches (the second deletes
       and overwrites keys that live in the runs).

    Values longer than 64 KiB sit at :data:`BIG_RUN_KEY` (in a sorted run) and
    :data:`BIG_WAL_KEY` (WAL only).

    TTL puts (``ttl_keys``) go into a flushed batch (the expired ones become tombstones)
    and into a WAL-only batch (expired but still readable in 0.17.0).
    """
    merge_rate = 0.1 if merges else 0.0

    def batch(n: int = batch_size, **kw: float) -> list[Op]:
        return random_ops(rng, keys, n, block_size=block_size, merges=merge_rate, **kw)

    half = len(ttl_keys) // 2
    # 1. two L0s -> run 2
    big_in_run = Put(BIG_RUN_KEY, rng.randbytes(BIG_VALUE_LEN + rng.randrange(1000)))
    db.write(batch(deletes=0.0) + [big_in_run] + ttl_ops(rng, ttl_keys[:half]))
    db.flush_memtable()
    db.write(batch())
    db.flush_memtable()
    admin.compact(destination=2)
    # 2. two L0s; the older one alone -> run 6
    db.write(batch())
    db.flush_memtable()
    db.write(batch())
    db.flush_memtable()
    admin.compact(l0=1, destination=6)
    # 3. one more L0; oldest L0 + run 6 -> run 6
    db.write(batch())
    db.flush_memtable()
    admin.compact(l0=1, runs=1)
    # 4. one more L0, then WAL-only batches
    db.write(batch())
    db.flush_memtable()
    big_in_wal = Put(BIG_WAL_KEY, rng.randbytes(BIG_VALUE_LEN + rng.randrange(1000)))
    db.write(batch(n=batch_size // 2) + [big_in_wal] + ttl_ops(rng, ttl_keys[half:]))
    db.flush_wal()
    db.write(batch(n=batch_size // 2, deletes=0.5))
    db.flush_wal()
    m = admin.manifest()
    return LayeredShape(
        l0_views=len(m.l0),
        sorted_runs=tuple(sr.id for sr in m.compacted),
        wal_only_batches=2,
    )


def random_bounds(
    rng: random.Random, keys: Sequence[bytes], n: int
) -> list[tuple[bytes | None, bytes | None]]:
    """``n`` scan ranges ``[start, end)`` with ``start < end``: written keys, absent keys,
    edge keys and open ends."""
    def pick() -> bytes | None:
        r = rng.random()
        if r < 0.15:
            return None
        if r < 0.6 and keys:
            return rng.choice(keys)
        if r < 0.75:
            return rng.choice(EDGE_KEYS)
        return random_key(rng)

    out: list[tuple[bytes | None, bytes | None]] = [(None, None)]
    while len(out) < n:
        a, b = pick(), pick()
        if a is not None and b is not None:
            if a == b:
                continue
            a, b = min(a, b), max(a, b)
        out.append((a, b))
    return out
