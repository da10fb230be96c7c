"""The slatelib writer, reader, compaction and GC on a local store whose conditional writes
are refused (``conditional_writes = false``), with every CAS going through two-phase CAS
(SQLite and PostgreSQL).

- A writer process is killed (``os._exit``, no cleanup) between every pair of steps of a
  two-phase write, of a WAL SST and of a manifest; then the next reader, the next writer,
  a compaction and GC each find the database whole: every acknowledged write is there, no
  write is committed twice, and nothing of the protocol is left over.
- Two writers race through two-phase CAS (the bank-transfer audit of test_writer_race).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from slatelib import Db, DbReader
from slatelib.config import ObjectStoreSettings
from slatelib.errors import SlateError
from slatelib.objstore import ObjectStore, open_store
from slatelib.objstore.registry import set_store_defaults
from slatelib.objstore.two_phase import PHASES, TwoPhaseObjectStore, is_temporary
from slatelib.objstore.url import split_store_url
from slatelib.ops.compaction import run_compaction
from slatelib.ops.gc.collect import collect_garbage
from slatelib.store.manifest_store import ManifestStore
from tests.integration import test_writer_race
from tests.pg_server import PgServer
from tests.unit.writer.support import writer_settings

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

CHILD = r"""
import json, os, sys
from slatelib import Db
from slatelib.objstore import open_store
from tests.unit.writer.support import writer_settings

url, cas, kind, phase, acks = sys.argv[1:6]
store = open_store(url, cas=cas, conditional_writes=False)
armed = False

def hook(seen, path):
    if armed and seen == phase and f"/{kind}/" in path:
        os._exit(9)  # the process dies here: no cleanup, no flush, no close

store.on_phase = hook
db = Db.open("db", store, writer_settings())
with open(acks, "a") as out:
    for i in range(3):
        db.put(b"k%d" % i, b"v%d" % i)
        out.write(json.dumps([i]) + "\n"); out.flush(); os.fsync(out.fileno())
    if kind == "compacted":
        armed = True
        db.flush()  # the L0 SST upload
    armed = True
    if kind == "manifest":
        db.flush()  # an L0 SST, then the manifest CAS
    else:
        db.put(b"k3", b"v3")  # the next WAL SST
    out.write(json.dumps([3]) + "\n"); out.flush(); os.fsync(out.fileno())
print("NOT KILLED")
"""


def cas_for(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The cas URL of ``backend``: a SQLite file in ``tmp_path``, or the session's
    PostgreSQL server (records are keyed by absolute location, so tests share it)."""
    if backend == "sqlite":
        return f"sqlite://{tmp_path}/cas.sqlite"
    assert backend == "postgresql", backend
    server: PgServer = request.getfixturevalue("pg_server")
    return server.url()


@pytest.fixture(params=["sqlite", "postgresql"])
def cas_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return cas_for(request.param, request, tmp_path)


def acked(acks: Path) -> list[int]:
    if not acks.exists():
        return []
    return [json.loads(line)[0] for line in acks.read_text().splitlines()]


def incomplete(store: TwoPhaseObjectStore) -> list[str]:
    return [relative(store, r.destination) for r in store.records(committed=False)]


def relative(store: TwoPhaseObjectStore, location: str) -> str:
    """A record's absolute location as a path of ``store``."""
    base = split_store_url(store.spec.url)[1]
    assert location.startswith(base + "/")
    return location[len(base) + 1:]


def open_2pc(url: str, cas: str) -> TwoPhaseObjectStore:
    store = open_store(url, cas=cas, conditional_writes=False)
    assert isinstance(store, TwoPhaseObjectStore)
    return store


@pytest.mark.parametrize("kind", ["wal", "manifest", "compacted"])
@pytest.mark.parametrize("phase", PHASES)
def test_a_writer_killed_between_phases_loses_nothing(tmp_path: Path, cas_url: str, kind: str,
                                                      phase: str) -> None:
    url = f"file://{tmp_path}/root"
    acks = tmp_path / "acks"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", CHILD, url, cas_url, kind, phase, str(acks)],
                          capture_output=True, text=True, timeout=60, env=env, cwd=REPO)
    assert done.returncode == 9, done.stdout + done.stderr  # killed where asked
    before = acked(acks)
    assert before == [0, 1, 2]  # the killed write was never acknowledged
    store = open_2pc(url, cas_url)
    interrupted = incomplete(store)
    assert (interrupted != []) == (phase in ("recorded", "copied")), interrupted

    # The next reader sees every acknowledged write (its listings finish the interrupted one).
    with DbReader.open("db", store, mode="latest") as reader:
        data = dict(reader.scan())
    assert {k: data[k] for k in (b"k0", b"k1", b"k2")} == {b"k0": b"v0", b"k1": b"v1",
                                                          b"k2": b"v2"}
    durable = phase != "temp_written"
    if kind == "wal":
        # A recorded WAL SST is durable: the reader replays it like any other.
        assert (b"k3" in data) == durable
    # A reader that found the copied object itself may leave its record to a writer.
    # A reader that found the copied object itself, or never looks at an unreferenced L0
    # SST, leaves the record to a writer or GC.
    left = incomplete(store)
    assert left == [] or (left == interrupted and (phase == "copied" or kind == "compacted"))

    # The next writer: fences the killed one, keeps everything, writes on.
    with Db.open("db", store, writer_settings()) as db:
        assert db.get(b"k2") == b"v2"
        db.put(b"after", b"crash")
        db.flush()
    # Nothing committed twice: every manifest id and WAL id has one object and one record.
    paths = [m.path for m in store.list("db")]
    assert len(paths) == len(set(paths))
    records = store.records("db", committed=True)
    if kind != "compacted":
        assert incomplete(store) == []
    assert {relative(store, r.destination) for r in records} <= set(paths)

    # Compaction and GC: deleted objects take their records with them.
    settings = writer_settings()
    assert run_compaction("db", store, settings=settings, policy="l0").status == "committed"
    collect_garbage("db", store, min_age=0, force=True, dry_run=False)
    assert incomplete(store) == []  # GC's listings finished what was left
    store.collect(min_age_s=0)
    with DbReader.open("db", store, mode="latest") as reader:
        after = dict(reader.scan())
    assert after[b"after"] == b"crash"
    assert {k: after[k] for k in (b"k0", b"k1", b"k2")} == {k: data[k] for k in
                                                          (b"k0", b"k1", b"k2")}
    remaining = {m.path for m in store.list("db")}
    records = store.records()
    assert {relative(store, r.destination) for r in records} <= remaining  # none outlives
    # its object
    assert [m.path for m in store.inner.list("") if is_temporary(m.path)] == []
    latest = ManifestStore(store, "db").read_latest()
    assert store.record(f"db/manifest/{latest.id:020d}.manifest") is not None


@pytest.fixture
def two_phase_defaults(request: pytest.FixtureRequest, tmp_path: Path,
                       backend: str) -> Iterator[str]:
    cas = cas_for(backend, request, tmp_path)
    set_store_defaults(ObjectStoreSettings(cas=cas, conditional_writes=False))
    try:
        yield cas
    finally:
        set_store_defaults(None)


@pytest.mark.parametrize(("backend", "seed"), [("sqlite", 0), ("sqlite", 3),
                                               ("postgresql", 0)])
def test_two_writers_race_through_two_phase_cas(tmp_path: Path, two_phase_defaults: str,
                                                backend: str, seed: int) -> None:
    # [object_store] cas and conditional_writes = false, as the CLI and jobs register them:
    # the race test's plain URLs now open two-phase stores.
    probe: ObjectStore = open_store(f"file://{tmp_path}")
    assert isinstance(probe, TwoPhaseObjectStore)
    test_writer_race.test_two_writers_race_exactly_one_survives_and_no_acked_transfer_is_lost(
        tmp_path, seed)
    records = probe.records("bank")
    wal = [r for r in records if "/wal/" in r.destination]
    manifests = [r for r in records if "/manifest/" in r.destination]
    assert len(wal) > 10 and len(manifests) >= 3 and all(r.committed for r in records)


MAINTENANCE_CHILD = r"""
import os, sys
from slatelib.objstore import open_store
from slatelib.ops.compaction import run_compaction
from slatelib.objstore.two_phase import TwoPhaseObjectStore
from slatelib.ops.gc.collect import collect_garbage
from tests.unit.writer.support import writer_settings

url, cas, job, kind, phase = sys.argv[1:6]
store = open_store(url, cas=cas, conditional_writes=False)

def hook(self, seen, path):
    if seen == phase and f"/{kind}/" in path:
        os._exit(9)

# Every two-phase store of this process, also those that compaction tasks reopen from the
# store's spec, dies at that point.
TwoPhaseObjectStore._phase = hook
if job == "compact":
    run_compaction("db", store, settings=writer_settings(), policy="l0")
else:
    collect_garbage("db", store, min_age=0, force=True, dry_run=False)
print("NOT KILLED")
"""


MAINTENANCE_KILLS = [("sqlite", job, kind, phase)
                     for job, kind in [("compact", "compacted"), ("compact", "manifest"),
                                       ("compact", "compactions"), ("gc", "gc")]
                     for phase in PHASES]
# On PostgreSQL, one compaction kill and one GC kill: a manifest CAS left recorded (the next
# compaction's conflicting insert recovers it) and a GC boundary file left copied (the
# next listing commits its record).
MAINTENANCE_KILLS += [("postgresql", "compact", "manifest", "recorded"),
                      ("postgresql", "gc", "gc", "copied")]


@pytest.mark.parametrize(("backend", "job", "kind", "phase"), MAINTENANCE_KILLS)
def test_compaction_and_gc_killed_between_phases_lose_nothing(
        request: pytest.FixtureRequest, tmp_path: Path, backend: str, job: str, kind: str,
        phase: str) -> None:
    url, cas = f"file://{tmp_path}/root", cas_for(backend, request, tmp_path)
    store = open_2pc(url, cas)
    expected = {}
    with Db.open("db", store, writer_settings()) as db:
        for n in range(3):
            for i in range(20):
                db.put(b"k%02d" % i, b"v%d" % n)
                expected[b"k%02d" % i] = b"v%d" % n
            db.flush()
    if job == "gc":  # something for GC to delete, so that it moves its boundaries
        assert run_compaction("db", store, settings=writer_settings(),
                              policy="l0").status == "committed"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", MAINTENANCE_CHILD, url, cas, job, kind, phase],
                          capture_output=True, text=True, timeout=60, env=env, cwd=REPO)
    assert done.returncode == 9, done.stdout + done.stderr  # killed where asked

    store = open_2pc(url, cas)
    # Killed after step 2 and before step 4: the cas store holds the incomplete record.
    assert (incomplete(store) != []) == (phase in ("recorded", "copied")), incomplete(store)
    with DbReader.open("db", store, mode="latest") as reader:
        assert dict(reader.scan()) == expected
    # The next compaction and GC take over and finish; nothing is lost or left behind.
    report = run_compaction("db", store, settings=writer_settings(), policy="l0")
    assert report.status in ("committed", "nothing_to_do"), report.status
    collect_garbage("db", store, min_age=0, force=True, dry_run=False)
    assert incomplete(store) == []
    store.collect(min_age_s=0)
    with Db.open("db", store, writer_settings()) as db:
        assert {k: db.get(k) for k in expected} == expected
    assert [m.path for m in store.inner.list("") if is_temporary(m.path)] == []
    remaining = {m.path for m in store.list("db")}
    assert {relative(store, r.destination) for r in store.records()} <= remaining


def test_the_cas_store_going_away_stops_writes_cleanly_and_a_new_writer_resumes(
        tmp_path: Path, pg_server: PgServer) -> None:
    url = f"file://{tmp_path}/root"
    store = open_2pc(url, pg_server.url())
    db = Db.open("db", store, writer_settings())
    db.put(b"a", b"1")
    pg_server.stop()
    try:
        with pytest.raises(SlateError) as err:
            db.put(b"b", b"2")
        assert "cas store postgresql://" in repr(err.value) + repr(err.value.__cause__)
        # Reads go on while the cas store is down.
        with DbReader.open("db", open_2pc(url, pg_server.url()), mode="latest") as reader:
            assert dict(reader.scan()) == {b"a": b"1"}
    finally:
        pg_server.start()
    try:
        db.close(flush=None)
    except SlateError:
        pass  # the stopped writer may report its failure again
    with Db.open("db", open_2pc(url, pg_server.url()), writer_settings()) as again:
        assert again.get(b"a") == b"1" and again.get(b"b") is None  # never acknowledged
        again.put(b"c", b"3")
    with DbReader.open("db", store, mode="latest") as reader:
        assert dict(reader.scan()) == {b"a": b"1", b"c": b"3"}
    assert incomplete(store) == []
