"""What two-phase CAS leaves under the final object names is an ordinary 0.17 database: the
official reader reads it, right after a writer was killed between two steps of a two-phase
write (the interrupted write is simply not there yet, like a write still in flight) and
after slatelib's reader, writer, compaction and GC finished the interrupted write. A
temporary object left next to its final name by the kill does not disturb it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from slatelib import Db, DbReader
from slatelib.objstore import open_store
from slatelib.objstore.two_phase import TwoPhaseObjectStore
from slatelib.ops.compaction import run_compaction
from slatelib.ops.gc.collect import collect_garbage
from tests.integration.test_two_phase_db import CHILD, MAINTENANCE_CHILD, acked, cas_for
from tests.interop.official import read_all
from tests.unit.writer.support import writer_settings

pytestmark = pytest.mark.interop

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("backend", "kind", "phase"), [("sqlite", "wal", "recorded"),
                                                        ("sqlite", "manifest", "copied"),
                                                        ("postgresql", "manifest", "recorded")])
def test_the_official_reader_reads_a_two_phase_database(
        request: pytest.FixtureRequest, tmp_path: Path, backend: str, kind: str,
        phase: str) -> None:
    root = tmp_path / "root"
    cas = cas_for(backend, request, tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, f"file://{root}", cas, kind, phase, str(tmp_path / "acks")],
        capture_output=True, text=True, timeout=60, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 9, done.stdout + done.stderr
    assert acked(tmp_path / "acks") == [0, 1, 2]
    acknowledged = [(b"k%d" % i, b"v%d" % i) for i in range(3)]

    # Killed mid-write, before any recovery: a copy of the database reads as 0.17 would.
    shutil.copytree(root / "db", tmp_path / "copy" / "db")
    seen = read_all(tmp_path / "copy", "db")
    assert [kv for kv in seen if kv[0] in dict(acknowledged)] == acknowledged

    # slatelib finishes the interrupted write, compacts and collects through two-phase CAS.
    store = open_store(f"file://{root}", cas=cas, conditional_writes=False)
    assert isinstance(store, TwoPhaseObjectStore)
    interrupted = store.records("db", committed=False)  # the kill left its record behind
    assert len(interrupted) == 1 and f"/{kind}/" in interrupted[0].destination, interrupted
    with DbReader.open("db", store, mode="latest") as reader:
        expected = dict(reader.scan())
    with Db.open("db", store, writer_settings()) as db:
        db.put(b"later", b"x")
        db.flush()
    expected[b"later"] = b"x"
    assert run_compaction("db", store, settings=writer_settings(), policy="l0").status == \
        "committed"
    collect_garbage("db", store, min_age=0, force=True, dry_run=False)
    store.collect(min_age_s=0)
    assert store.records("db", committed=False) == []
    assert sorted(read_all(root, "db")) == sorted(expected.items())
    names = {p.relative_to(root).as_posix() for p in (root / "db").rglob("*") if p.is_file()}
    assert all(".manifest." not in n and ".sst." not in n for n in names), names

    # The official reader wrote a checkpoint manifest natively (no record): slatelib's next
    # two-phase writes step over it rather than overwrite it.
    with Db.open("db", store, writer_settings()) as db:
        db.put(b"last", b"y")
        db.flush()
    assert dict(read_all(root, "db"))[b"last"] == b"y"


@pytest.mark.parametrize(("job", "kind", "phase"), [("compact", "manifest", "recorded"),
                                                    ("compact", "compacted", "copied"),
                                                    ("gc", "gc", "recorded")])
def test_the_official_reader_reads_after_a_killed_compaction_or_gc(
        tmp_path: Path, job: str, kind: str, phase: str) -> None:
    root = tmp_path / "root"
    url, cas = f"file://{root}", f"sqlite://{tmp_path}/cas.sqlite"
    store = open_store(url, cas=cas, conditional_writes=False)
    expected: dict[bytes, bytes] = {}
    with Db.open("db", store, writer_settings()) as db:
        for n in range(3):
            for i in range(30):
                db.put(b"k%02d" % i, b"v%d" % n)
                expected[b"k%02d" % i] = b"v%d" % n
            db.flush()
    if job == "gc":
        run_compaction("db", store, settings=writer_settings(), policy="l0")
    done = subprocess.run([sys.executable, "-c", MAINTENANCE_CHILD, url, cas, job, kind, phase],
                          capture_output=True, text=True, timeout=60, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 9, done.stdout + done.stderr
    shutil.copytree(root / "db", tmp_path / "copy" / "db")  # as the kill left it
    assert dict(read_all(tmp_path / "copy", "db")) == expected
    run_compaction("db", store, settings=writer_settings(), policy="l0")
    collect_garbage("db", store, min_age=0, force=True, dry_run=False)
    assert dict(read_all(root, "db")) == expected
