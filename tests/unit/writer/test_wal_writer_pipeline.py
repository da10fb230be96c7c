"""Group commit: cutting WAL SSTs, acknowledging strictly in WAL order, failure propagation.

WAL writes are driven by a gate: each write blocks until the test releases its WAL id, so
the order in which writes finish is chosen by the test, not by timing.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import Future

import pytest

from slatelib.core.row import VALUE, Row
from slatelib.errors import (
    CommitStateUnknownError,
    FencedError,
    InvalidDbStateError,
    UnavailableError,
)
from slatelib.testing.clock import FakeClock
from slatelib.writer.wal_writer import (
    WalJob,
    WalPipeline,
    committer_wait_s,
    should_cut,
    writes_that_fit,
)

WAIT_S = 10


class Gate:
    def __init__(self) -> None:
        self.release: defaultdict[int, threading.Event] = defaultdict(threading.Event)
        self.started: defaultdict[int, threading.Event] = defaultdict(threading.Event)
        self.fail: dict[int, BaseException] = {}
        self.written: dict[int, list[Row]] = {}

    def write(self, wal_id: int, rows: list[Row]) -> None:
        self.started[wal_id].set()
        assert self.release[wal_id].wait(WAIT_S), f"WAL {wal_id} never released"
        if wal_id in self.fail:
            raise self.fail[wal_id]
        self.written[wal_id] = rows

    def wait_started(self, wal_id: int) -> None:
        assert self.started[wal_id].wait(WAIT_S), f"WAL {wal_id} never started"


def row(seq: int) -> Row:
    return (b"k%d" % seq, seq, VALUE, b"v", None, 1)


@pytest.fixture
def gate() -> Gate:
    return Gate()


@pytest.fixture
def acks() -> list[int]:
    return []


def make(gate: Gate, acks: list[int], fatal: list[BaseException], **kw: object) -> WalPipeline:
    def on_durable(job: WalJob) -> None:
        acks.append(job.wal_id)

    opts: dict[str, object] = {"max_in_flight": 4, "flush_interval_s": None, "batch_max_bytes": 1 << 20,
                                   "clock": FakeClock()}
    opts.update(kw)
    return WalPipeline(write=gate.write, first_wal_id=5, on_durable=on_durable,
                       on_fatal=fatal.append, **opts)  # type: ignore[arg-type]


@pytest.fixture
def pipeline(gate: Gate, acks: list[int]) -> Iterator[tuple[WalPipeline, list[BaseException]]]:
    fatal: list[BaseException] = []
    p = make(gate, acks, fatal, batch_max_bytes=1)  # every append becomes its own WAL SST
    yield p, fatal
    for e in gate.release.values():
        e.set()
    p.abort(InvalidDbStateError("test over"))


def append(p: WalPipeline, seq: int, nbytes: int = 10) -> Future[None]:
    return p.append([row(seq)], (seq, 1), nbytes)


def seqs(gate: Gate, wal_id: int) -> list[int]:
    return [r[1] for r in gate.written[wal_id]]


@pytest.mark.parametrize("kw, cut", [
    ({"buffered_bytes": 0, "in_flight": 0}, False),
    ({"buffered_bytes": 5, "in_flight": 0}, True),
    ({"buffered_bytes": 5, "in_flight": 4}, False),
    ({"buffered_bytes": 5, "in_flight": 1}, False),
    ({"buffered_bytes": 100, "in_flight": 1}, True),
    ({"buffered_bytes": 5, "in_flight": 1, "buffered_age_s": 0.2}, True),
    ({"buffered_bytes": 5, "in_flight": 1, "flush_requested": True}, True),
    ({"buffered_bytes": 5, "in_flight": 1, "buffered_age_s": 9.0, "flush_interval_s": None}, False),
])
def test_when_the_buffer_is_cut(kw: dict[str, object], cut: bool) -> None:
    args: dict[str, object] = {"buffered_bytes": 0, "buffered_age_s": 0.0, "in_flight": 0,
                                   "max_in_flight": 4, "batch_max_bytes": 100, "flush_interval_s": 0.1,
                                   "flush_requested": False}
    args.update(kw)
    assert should_cut(**args) is cut  # type: ignore[arg-type]



@pytest.mark.parametrize("kw, wait", [
    ({"waiting_age_s": None}, None),  # nothing waits for the timer: woken by appends
    ({"waiting_age_s": 0.03}, 0.07),  # the oldest waiting write's timer
    ({"waiting_age_s": 0.5}, 0.001),  # overdue, a slot is free: the committer cuts at once
    ({"waiting_age_s": 0.5, "in_flight": 4}, None),  # saturated: woken by a finishing WAL
    ({"waiting_age_s": 0.5, "flush_interval_s": None}, None),
])
def test_how_long_the_committer_sleeps(kw: dict[str, object], wait: float | None) -> None:
    args: dict[str, object] = {"waiting_age_s": None, "in_flight": 1, "max_in_flight": 4,
                               "flush_interval_s": 0.1}
    args.update(kw)
    got = committer_wait_s(**args)  # type: ignore[arg-type]
    assert got == (None if wait is None else pytest.approx(wait))

def test_a_later_wal_finishing_first_waits_for_the_earlier_one(
    gate: Gate, acks: list[int], pipeline: tuple[WalPipeline, list[BaseException]]
) -> None:
    p, _ = pipeline
    first = append(p, 1)
    gate.wait_started(5)
    second = append(p, 2)
    gate.wait_started(6)
    gate.release[6].set()
    with pytest.raises(TimeoutError):
        second.result(timeout=0.2)
    assert acks == [] and p.last_acked_wal_id == 4
    gate.release[5].set()
    first.result(WAIT_S)
    second.result(WAIT_S)
    assert acks == [5, 6] and p.last_acked_wal_id == 6


def test_a_failed_wal_fails_its_callers_and_never_acknowledges_a_later_one(
    gate: Gate, acks: list[int], pipeline: tuple[WalPipeline, list[BaseException]]
) -> None:
    p, fatal = pipeline
    first = append(p, 1)
    gate.wait_started(5)
    second = append(p, 2)
    gate.wait_started(6)
    gate.release[6].set()  # WAL 6 lands
    gate.fail[5] = UnavailableError("disk on fire")
    gate.release[5].set()
    with pytest.raises(UnavailableError, match="disk on fire"):
        first.result(WAIT_S)
    with pytest.raises(CommitStateUnknownError, match="WAL 6 may have been written"):
        second.result(WAIT_S)
    assert 6 in gate.written and acks == []
    assert len(fatal) == 1 and isinstance(fatal[0], UnavailableError)
    with pytest.raises(InvalidDbStateError, match="writer stopped after an error"):
        append(p, 3)


def test_fencing_fails_every_unacknowledged_write_with_fenced(
    gate: Gate, acks: list[int], pipeline: tuple[WalPipeline, list[BaseException]]
) -> None:
    p, _ = pipeline
    ok = append(p, 1)
    gate.release[5].set()
    ok.result(WAIT_S)
    taken = append(p, 2)
    gate.wait_started(6)
    later = append(p, 3)
    gate.wait_started(7)
    gate.fail[6] = FencedError("WAL id 6 is taken")
    gate.release[7].set()
    gate.release[6].set()
    for fut in (taken, later):
        with pytest.raises(FencedError):
            fut.result(WAIT_S)
    assert acks == [5]
    with pytest.raises(FencedError):
        append(p, 4)


def test_writes_arriving_during_a_wal_write_share_the_next_wal(gate: Gate, acks: list[int]) -> None:
    fatal: list[BaseException] = []
    p = make(gate, acks, fatal)  # large threshold, no interval: cut only when idle
    try:
        first = append(p, 1)
        gate.wait_started(5)
        others = [append(p, s) for s in (2, 3, 4)]
        gate.release[5].set()
        gate.release[6].set()
        for f in (first, *others):
            f.result(WAIT_S)
        assert [r[1] for r in gate.written[6]] == [2, 3, 4]
        assert acks == [5, 6]
    finally:
        p.close()


def test_the_flush_interval_cuts_a_buffer_while_another_wal_is_in_flight(gate: Gate, acks: list[int]) -> None:
    clock = FakeClock()
    fatal: list[BaseException] = []
    p = make(gate, acks, fatal, flush_interval_s=0.05, clock=clock)
    try:
        append(p, 1)
        gate.wait_started(5)
        second = append(p, 2)
        assert not gate.started[6].wait(0.2)  # the interval has not passed on the fake clock
        clock.advance(0.06)
        gate.wait_started(6)  # cut while WAL 5 is still in flight: two in flight
        gate.release[6].set()
        gate.release[5].set()
        second.result(WAIT_S)
        assert acks == [5, 6]
    finally:
        p.close()


def test_wait_durable_returns_once_everything_appended_is_acknowledged(gate: Gate, acks: list[int]) -> None:
    fatal: list[BaseException] = []
    p = make(gate, acks, fatal)
    try:
        append(p, 1)
        gate.wait_started(5)
        append(p, 2)
        done = threading.Event()
        t = threading.Thread(target=lambda: (p.wait_durable(), done.set()))
        t.start()
        assert not done.wait(0.1)
        gate.release[5].set()
        gate.release[6].set()
        t.join(WAIT_S)
        assert done.is_set() and acks == [5, 6]
    finally:
        p.close()


@pytest.mark.parametrize("sizes, cap, taken", [
    ([], 100, 0),
    ([40, 40], 100, 2),
    ([40, 40, 40], 100, 2),
    ([100, 1], 100, 1),
    ([250, 40], 100, 1),  # larger than the cap: a WAL SST of its own
    ([40, 250], 100, 1),
    ([1] * 10, 5, 5),
])
def test_how_many_pending_writes_the_next_wal_takes(sizes: list[int], cap: int, taken: int) -> None:
    assert writes_that_fit(sizes, cap) == taken


def test_writes_piled_up_behind_a_wal_are_split_at_the_byte_cap(gate: Gate, acks: list[int]) -> None:
    fatal: list[BaseException] = []
    p = make(gate, acks, fatal, max_in_flight=1, batch_max_bytes=100)
    try:
        first = append(p, 1)
        gate.wait_started(5)  # in flight: everything below piles up in the buffer
        sizes = {2: 40, 3: 40, 4: 40, 5: 250, 6: 40, 7: 40}
        futs = {seq: append(p, seq, n) for seq, n in sizes.items()}
        durable = threading.Event()
        waiter = threading.Thread(target=lambda: (p.wait_durable(), durable.set()))
        waiter.start()
        gate.release[5].set()
        first.result(WAIT_S)
        gate.wait_started(6)
        assert not futs[2].done() and not durable.is_set()
        for wal_id in (6, 7, 8):
            gate.release[wal_id].set()
            gate.wait_started(wal_id + 1)
        futs[5].result(WAIT_S)  # WAL 8 (the write above the cap, alone)
        assert not futs[6].done() and not durable.is_set()
        gate.release[9].set()
        waiter.join(WAIT_S)
        assert durable.is_set() and all(f.result(0) is None for f in futs.values())
        assert {w: seqs(gate, w) for w in (6, 7, 8, 9)} == {6: [2, 3], 7: [4], 8: [5], 9: [6, 7]}
        assert acks == [5, 6, 7, 8, 9] and 10 not in gate.started
    finally:
        p.close()


def test_a_split_buffer_goes_out_whole_and_is_acknowledged_in_wal_order(
    gate: Gate, acks: list[int]
) -> None:
    fatal: list[BaseException] = []
    p = make(gate, acks, fatal, max_in_flight=2, batch_max_bytes=100)
    try:
        append(p, 1)
        append(p, 2, 100)  # at the cap: cut at once, two WAL SSTs in flight
        gate.wait_started(6)
        futs = [append(p, 3, 60), append(p, 4, 60), append(p, 5, 30)]
        gate.release[6].set()
        gate.wait_started(7)  # a slot is free: the first 60 bytes
        gate.release[5].set()
        gate.wait_started(8)  # the rest (90 bytes, under the cap) is due too: no waiting
        gate.release[8].set()
        with pytest.raises(TimeoutError):
            futs[2].result(timeout=0.2)
        assert acks == [5, 6] and not futs[0].done()
        gate.release[7].set()
        for f in futs:
            f.result(WAIT_S)
        assert acks == [5, 6, 7, 8] and (seqs(gate, 7), seqs(gate, 8)) == ([3], [4, 5])
    finally:
        p.close()


def test_a_failed_wal_of_a_split_buffer_fails_the_later_parts_unacknowledged(
    gate: Gate, acks: list[int]
) -> None:
    fatal: list[BaseException] = []
    p = make(gate, acks, fatal, max_in_flight=2, batch_max_bytes=100)
    try:
        append(p, 1)
        gate.wait_started(5)
        a, b = append(p, 2, 100), append(p, 3, 100)
        gate.wait_started(6)
        gate.fail[6] = UnavailableError("lost")
        gate.release[7].set()  # if b is cut into WAL 7 before the failure is seen, it lands
        gate.release[6].set()
        gate.release[5].set()
        with pytest.raises(UnavailableError):
            a.result(WAIT_S)
        with pytest.raises((CommitStateUnknownError, InvalidDbStateError)):
            b.result(WAIT_S)
        assert acks == [5]
    finally:
        for e in gate.release.values():
            e.set()
        p.abort(InvalidDbStateError("test over"))
