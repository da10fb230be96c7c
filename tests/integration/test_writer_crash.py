"""A writer process killed with SIGKILL at random points, over many seeded runs.

The child process (:func:`child`) opens a database on the local file system and writes from
eight threads (group commit, several WAL SSTs in flight, small memtables so L0 flushes and
manifest commits happen all the time), printing ``ACK thread index seq`` after each write
returns. The parent kills it right after a seeded number of acknowledgements, while it keeps
writing, then reopens the database with a new writer and checks:

- every acknowledged write is present (with the sequence number it was acknowledged with);
- the state is a prefix of the writes: the sequence numbers present are exactly 1..N, and
  each thread's writes present are its first ones, without holes.

A second test kills the writer at fixed points of a memtable flush: while the L0 SST is
being uploaded, between the upload and the manifest commit, and right after the commit.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from slatelib import Db
from slatelib.objstore import ObjectStore, open_store
from slatelib.paths import DbPaths
from tests.unit.writer.support import writer_settings

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
RUNS = 80
THREADS = 8
PATH = "db"


def crash_settings() -> object:
    return writer_settings(l0_sst_size_bytes=3000, l0_max_ssts=10_000, wal_max_in_flight=4,
                           flush_interval=0.0)


class SlowWalStore:
    """Delegates to a store; WAL writes take 0 to 6 ms at random, so several are in flight and
    they land out of order (a kill then leaves a later WAL SST behind a missing one)."""

    def __init__(self, inner: ObjectStore, seed: int) -> None:
        self._inner = inner
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    def put_if_absent(self, path: str, data: bytes) -> None:
        if "/wal/" in path and data:
            with self._lock:
                delay = self._rng.choice((0.0, 0.0, 0.0005, 0.006))
            threading.Event().wait(delay)
        self._inner.put_if_absent(path, data)


def child(root: str, seed: int) -> None:  # pragma: no cover - runs in the killed subprocess
    store = SlowWalStore(open_store(f"file://{root}"), seed)
    db = Db.open(PATH, store, crash_settings())  # type: ignore[arg-type]
    lock = threading.Lock()
    out = sys.stdout

    def work(t: int) -> None:
        for i in range(1_000_000):
            seq = db.put(b"t%d/%07d" % (t, i), b"x" * 40)
            with lock:
                out.write(f"ACK {t} {i} {seq}\n")
                out.flush()
            if t == 0 and i % 37 == 36:
                db.flush()

    threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()


def run_and_kill(root: Path, kill_after: int, seed: int) -> dict[tuple[int, int], int]:
    proc = subprocess.Popen(
        [sys.executable, "-c",
         f"from tests.integration.test_writer_crash import child; child({str(root)!r}, {seed})"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    acked: dict[tuple[int, int], int] = {}
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            _, t, i, seq = line.split()
            acked[(int(t), int(i))] = int(seq)
            if len(acked) >= kill_after:
                proc.send_signal(signal.SIGKILL)
                break
    finally:
        proc.kill()
        proc.wait(30)
        proc.stdout.close()
    if len(acked) < kill_after:
        assert proc.stderr is not None
        pytest.fail(f"child died early after {len(acked)} writes: {proc.stderr.read()[-2000:]}")
    proc.stderr.close()  # type: ignore[union-attr]
    return acked


def recovered(root: Path) -> dict[tuple[int, int], int]:
    """Every write present after reopening, with its sequence number."""
    db = Db.open(PATH, f"file://{root}", crash_settings())  # type: ignore[arg-type]
    try:
        present: dict[tuple[int, int], int] = {}
        for key, seq, *_ in db._state.view().iter_rows():  # noqa: SLF001 - seqs are the point
            t, i = key[1:].split(b"/")
            present[(int(t), int(i))] = seq
        assert len(present) == len(list(db.scan()))
        return present
    finally:
        db.close(flush=None)


@pytest.mark.parametrize("chunk", range(4))
def test_sigkill_never_loses_an_acknowledged_write_and_keeps_a_prefix(tmp_path: Path, chunk: int) -> None:
    for seed in range(chunk * RUNS // 4, (chunk + 1) * RUNS // 4):
        root = tmp_path / f"run{seed}"
        root.mkdir()
        kill_after = random.Random(seed).randint(1, 400)
        acked = run_and_kill(root, kill_after, seed)
        present = recovered(root)
        lost = {k: s for k, s in acked.items() if present.get(k) != s}
        assert lost == {}, f"seed {seed}: acknowledged writes lost or changed: {sorted(lost)[:5]}"
        seqs = sorted(present.values())
        assert seqs == list(range(1, len(seqs) + 1)), f"seed {seed}: a gap in the sequence"
        for t in range(THREADS):
            mine = sorted(i for (tt, i) in present if tt == t)
            assert mine == list(range(len(mine))), f"seed {seed}: thread {t} has a hole"


class KillDuringFlush:
    """Delegates to a store; SIGKILLs its own process at one point of the first L0 flush."""

    def __init__(self, inner: ObjectStore, point: str) -> None:
        self._inner = inner
        self._point = point
        self._uploaded = False

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    def put_if_absent(self, path: str, data: bytes) -> None:
        if "/compacted/" in path:
            if self._point == "during_upload":
                os.kill(os.getpid(), signal.SIGKILL)
            self._inner.put_if_absent(path, data)
            self._uploaded = True
            if self._point == "before_commit":
                os.kill(os.getpid(), signal.SIGKILL)
            return
        self._inner.put_if_absent(path, data)
        if "/manifest/" in path and self._uploaded and self._point == "after_commit":
            os.kill(os.getpid(), signal.SIGKILL)


def flush_child(root: str, point: str) -> None:  # pragma: no cover - runs in the killed subprocess
    store = KillDuringFlush(open_store(f"file://{root}"), point)
    db = Db.open(PATH, store, writer_settings())  # type: ignore[arg-type]
    for i in range(30):
        db.put(b"k%03d" % i, b"v%d" % i)
        sys.stdout.write(f"ACK {i}\n")
        sys.stdout.flush()
    db.flush()
    sys.stdout.write("FLUSHED\n")


@pytest.mark.parametrize("point", ["during_upload", "before_commit", "after_commit"])
def test_a_writer_killed_mid_flush_loses_nothing(tmp_path: Path, point: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "from tests.integration.test_writer_crash import flush_child; "
         f"flush_child({str(tmp_path)!r}, {point!r})"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert proc.stdout.split() == [x for i in range(30) for x in ("ACK", str(i))]
    uploaded = list((tmp_path / DbPaths(PATH).compacted_dir).glob("*.sst"))
    assert len(uploaded) == (0 if point == "during_upload" else 1)
    with Db.open(PATH, f"file://{tmp_path}", writer_settings()) as db:
        assert dict(db.scan()) == {b"k%03d" % i: b"v%d" % i for i in range(30)}
        assert len(db.manifest.l0) == (1 if point == "after_commit" else 0)
        db.put(b"after", b"1")
    with Db.open(PATH, f"file://{tmp_path}", writer_settings()) as db:
        assert len(list(db.scan())) == 31
