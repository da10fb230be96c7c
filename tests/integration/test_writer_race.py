"""Two slatelib writers race to open one database (local file system, real conditional puts).

Each writer runs bank transfers (read two balances through its own reads, write both plus a
log entry in one batch) until it is fenced. Exactly one survives; the audit then checks that
money was neither created nor destroyed and that every acknowledged transfer is in the data:
the final balances equal the opening balances plus exactly the transfers in the log.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from slatelib import Db, DbReader, WriteBatch
from slatelib.errors import FencedError
from tests.unit.writer.support import writer_settings

pytestmark = pytest.mark.integration

ACCOUNTS = [b"acct/%02d" % i for i in range(8)]
OPENING = 100
AFTER_BOTH_OPEN = 15
WAIT_S = 60


@dataclass
class Outcome:
    name: str
    acked: list[bytes] = field(default_factory=list)
    fenced: bool = False
    db: Db | None = None
    error: BaseException | None = None


def transfer(db: Db, rng: random.Random, log_key: bytes) -> None:
    src, dst = rng.sample(ACCOUNTS, 2)
    a, b = int(db.get(src) or b"0"), int(db.get(dst) or b"0")
    amount = rng.randint(0, max(0, a))
    batch = WriteBatch().put(src, b"%d" % (a - amount)).put(dst, b"%d" % (b + amount))
    batch.put(log_key, b"%s %s %d" % (src, dst, amount))
    db.write(batch)


class Race:
    """Counts writers whose open has finished (successfully or fenced)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.opened = 0

    def open_done(self) -> None:
        with self._lock:
            self.opened += 1

    def both_open(self) -> bool:
        with self._lock:
            return self.opened == 2


def racer(url: str, out: Outcome, race: Race, turn: threading.Event, after: int,
          follow: threading.Event, seed: int) -> None:
    """Open once ``turn`` is set, then transfer until fenced; set ``follow`` after ``after``
    acknowledged transfers (that starts the other writer while this one keeps going). Once
    both writers have opened, each stops on its own after a few more transfers: by then the
    older one has tried to write past the newer one's fence."""
    rng = random.Random(seed)
    since_both = 0
    try:
        assert turn.wait(WAIT_S)
        try:
            out.db = Db.open("bank", url, writer_settings(wal_max_in_flight=4))
        finally:
            race.open_done()
        if after == 0:
            follow.set()
        for n in range(5_000):
            key = b"log/%s/%05d" % (out.name.encode(), n)
            transfer(out.db, rng, key)
            out.acked.append(key)
            if n + 1 == after:
                follow.set()
            if race.both_open():
                since_both += 1
                if since_both > AFTER_BOTH_OPEN:
                    return
    except FencedError:
        out.fenced = True
    except BaseException as exc:  # noqa: BLE001
        out.error = exc


def audit(url: str) -> dict[bytes, int]:
    with DbReader.open("bank", url, mode="latest") as r:
        data = dict(r.scan())
    balances = {k: int(v) for k, v in data.items() if k.startswith(b"acct/")}
    expected = dict.fromkeys(ACCOUNTS, OPENING)
    for key, entry in data.items():
        if key.startswith(b"log/"):
            src, dst, amount = entry.split(b" ")
            expected[src] -= int(amount)
            expected[dst] += int(amount)
    assert balances == expected, "a transfer was lost or applied twice"
    assert sum(balances.values()) == OPENING * len(ACCOUNTS)
    return data


@pytest.mark.parametrize("seed", range(6))
def test_two_writers_race_exactly_one_survives_and_no_acked_transfer_is_lost(tmp_path: Path, seed: int) -> None:
    """Seed 0 opens both writers at once; the others start the second writer while the
    first one is transferring (after a seeded number of its transfers)."""
    url = f"file://{tmp_path}"
    with Db.open("bank", url, writer_settings()) as db:
        batch = WriteBatch()
        for a in ACCOUNTS:
            batch.put(a, b"%d" % OPENING)
        db.write(batch)
    after = 0 if seed == 0 else random.Random(seed).randint(1, 40)
    go_a, go_b = threading.Event(), threading.Event()
    outs = [Outcome("a"), Outcome("b")]
    race = Race()
    threads = [
        threading.Thread(target=racer, args=(url, outs[0], race, go_a, after, go_b, seed * 2)),
        threading.Thread(target=racer, args=(url, outs[1], race, go_b, 10**9, go_a, seed * 2 + 1)),
    ]
    for t in threads:
        t.start()
    go_a.set()
    if seed == 0:
        go_b.set()
    for t in threads:
        t.join(WAIT_S)
    # a racer still running after WAIT_S would look like a survivor: say so instead
    assert not any(t.is_alive() for t in threads), f"a racer did not finish in {WAIT_S}s"
    assert [o.error for o in outs] == [None, None]
    fenced = [o for o in outs if o.fenced]
    survivors = [o for o in outs if not o.fenced]
    assert len(fenced) == 1 and len(survivors) == 1, [(o.name, o.fenced) for o in outs]
    winner, loser = survivors[0], fenced[0]
    assert winner.db is not None
    winner.db.put(b"winner", winner.name.encode())
    if loser.db is not None:
        with pytest.raises(FencedError):
            loser.db.put(b"loser", b"x")
        with pytest.raises(FencedError):
            loser.db.get(b"winner")
        loser.db.close()
    winner.db.close()
    data = audit(url)
    missing = [k for o in outs for k in o.acked if k not in data]
    assert missing == []
    assert data[b"winner"] == winner.name.encode() and b"loser" not in data
