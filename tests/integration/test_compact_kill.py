"""``slate compact`` as a real process, SIGKILLed at every write, and two of them at once.

The database is written by official 0.17.0 (compactor off, the ``Concat`` merge operator):
four L0 SSTs of puts, overwrites, deletes and merge operands, plus rows only in the WAL.

Kill points are deterministic: the child process (:func:`child`) counts the writes that
reach the object store adapter (every ``put``/``put_if_absent``/``put_if_match``/
``delete``) and SIGKILLs itself right before write ``n`` (or right after the last one),
then runs the unmodified ``slate`` command line. A first run without a kill lists the
writes of one compaction (fence, ``compactions/`` claim and record, output SSTs, the
Compacted mark, the commit CAS, the Completed mark), so every phase gets its own kill. A few
more runs of the real ``slate`` console script are killed after seeded random delays.

After each kill:

- the latest manifest decodes (ours and the official admin) and both readers (our
  ``DbReader`` and the official one) return exactly what they returned before;
- ``slate compact`` run again completes and the data is still identical;
- ``slate gc --min-age 0s --force --no-dry-run`` then deletes nothing that the manifest or a
  checkpoint references: every referenced SST exists, every checkpoint reads the same data,
  and the official reader still reads everything.

Two compaction processes on one database: the first is paused right before one of its
driver writes, a second ``slate compact`` runs to completion (fencing the first), then the
first resumes, fails with a fenced error and exit code 3, and the second's run is the one
the manifest holds; and two started at the same moment race for the fence.

With 0.17.0 itself: its compactor recovers a job killed right before its commit CAS (it
commits the outputs our job recorded as Compacted, SlateDB RFC-0025), and an official writer that
opens the database and flushes an L0 while our job is paused before its CAS keeps that L0
(the commit rebases) and keeps writing on top of our run.

The kill checks also run ``slate gc`` right after the kill, before the rerun. GC keeps the
orphaned outputs of a killed job for now (0.17's rule: unreferenced SSTs newer than the
last compacted L0 may be L0 uploads in flight); they go once a later L0 is compacted.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from slatelib import DbReader
from slatelib.cli import main as slate
from slatelib.core.compactions import CompactionStatus
from slatelib.core.manifest import Manifest
from slatelib.ids import ulid_to_str
from slatelib.objstore import ObjectStore, open_store
from slatelib.paths import DbPaths
from slatelib.store.compactions_store import CompactionsStore
from slatelib.store.manifest_store import ManifestStore
from tests.interop.official import (
    Concat,
    DbSettings,
    Delete,
    Model,
    OfficialAdmin,
    OfficialDb,
    OfficialReader,
    Put,
    run,
)
from tests.interop.workload import key_pool, random_ops

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
PATH = "db"
BLOCK = 1024
CONF = f"""
[sst]
block_size = {BLOCK}
min_filter_keys = 10
[compaction]
min_range_bytes = 1
max_sst_size = "12KiB"
merge_operator = "concat"
"""
COMPACT = ["compact", "--policy", "full", "--parallelism", "2"]
WRITES = ("put", "put_if_absent", "put_if_match", "delete", "delete_many")


# ------------------------------------------------------------------ the killed process
def child(kill_at: int, when: str, argv: list[str]) -> None:  # pragma: no cover - subprocess
    """Run ``slate argv`` with every store write logged to stderr as ``WRITE n op path``;
    ``when`` = "kill" SIGKILLs the process right before write ``kill_at``, "kill-after"
    right after it, "pause" prints ``PAUSED`` before it and waits for a line on stdin."""
    from slatelib.objstore.obstore_store import ObstoreObjectStore

    lock = threading.Lock()
    counter = [0]

    def hooked(name: str) -> Callable[..., Any]:
        original = getattr(ObstoreObjectStore, name)

        def write(self: object, path: object, *args: object, **kwargs: object) -> Any:
            with lock:
                n = counter[0]
                counter[0] += 1
                sys.stderr.write(f"WRITE {n} {name} {path}\n")
                sys.stderr.flush()
            if n == kill_at and when == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            if n == kill_at and when == "pause":
                sys.stderr.write("PAUSED\n")
                sys.stderr.flush()
                sys.stdin.readline()
            result = original(self, path, *args, **kwargs)
            if n == kill_at and when == "kill-after":
                os.kill(os.getpid(), signal.SIGKILL)
            return result

        return write

    for name in WRITES:
        setattr(ObstoreObjectStore, name, hooked(name))
    sys.exit(slate(argv))


def db_report(stdout: str) -> dict[str, Any]:
    """The one database's entry of ``slate compact``'s JSON report (the job's shape: the
    compaction's own status is the entry's ``outcome``)."""
    report = json.loads(stdout)
    assert report["job"] == "compact" and report["status"] == "success", report
    [db] = report["databases"]
    return dict(db)


def child_cmd(kill_at: int, when: str, argv: list[str]) -> list[str]:
    return [sys.executable, "-c", "from tests.integration.test_compact_kill import child; "
            f"child({kill_at}, {when!r}, {argv!r})"]


def child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


@dataclass(frozen=True)
class Write:
    index: int
    op: str
    path: str

    @property
    def kind(self) -> str:
        for part in ("/manifest/", "/compactions/", "/compacted/", "/wal/", "/slatelib/claims/"):
            if part in self.path:
                return part.strip("/").replace("slatelib/", "")
        return "other"


def writes_of(stderr: str) -> list[Write]:
    out = []
    for line in stderr.splitlines():
        if line.startswith("WRITE "):
            _, n, op, path = line.split(" ", 3)
            out.append(Write(int(n), op, path))
    return out


# ------------------------------------------------------------------------- the database
@dataclass(frozen=True)
class Template:
    root: Path
    expected: list[tuple[bytes, bytes]]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    root = tmp_path_factory.mktemp("compact-kill-template")
    rng = random.Random(4)
    keys = key_pool(rng, 120)
    model = Model()
    with OfficialDb.open(root, PATH, DbSettings(block_size=BLOCK, compactor=False),
                         model=model, merge_operator=Concat()) as db:
        for _ in range(4):
            db.write(random_ops(rng, keys, 70, block_size=BLOCK, deletes=0.2, merges=0.2))
            db.flush_memtable()
        db.write(random_ops(rng, keys, 20, block_size=BLOCK, deletes=0.3, merges=0.3))
        db.flush_wal()  # rows only in the WAL: outside every compaction
    (root / "slate.toml").write_text(CONF)
    expected = list(model.live().items())
    assert len(ManifestStore(open_store(f"file://{root}"), PATH).read_latest().value.l0) == 4
    assert official_scan(root) == expected == our_scan(root)
    return Template(root, expected)


def fresh_copy(template: Template, dest: Path) -> Path:
    shutil.copytree(template.root, dest)
    return dest


def store_of(root: Path) -> ObjectStore:
    return open_store(f"file://{root}")


def cli_args(root: Path, *command: str) -> list[str]:
    return ["--db", f"file://{root}/{PATH}", "--conf", str(root / "slate.toml"),
            "--merge-operator", "concat", *command]


def official_scan(root: Path) -> list[tuple[bytes, bytes]]:
    with OfficialReader.open(root, PATH, merge_operator=Concat()) as r:
        return r.scan()


def our_scan(root: Path, checkpoint: str | None = None) -> list[tuple[bytes, bytes]]:
    with DbReader.open(PATH, store_of(root), mode="latest", checkpoint=checkpoint,
                       merge_operator="concat") as r:
        return list(r.scan())


def latest(root: Path) -> Manifest:
    return ManifestStore(store_of(root), PATH).read_latest().value


def in_process(*argv: str) -> int:
    return slate(list(argv))


def check_intact(root: Path, expected: list[tuple[bytes, bytes]], what: str) -> None:
    latest(root)  # decodes (raises otherwise)
    OfficialAdmin(root, PATH).manifest()
    assert our_scan(root) == expected, f"{what}: our reader sees other data"
    assert official_scan(root) == expected, f"{what}: the official reader sees other data"


def check_gc_keeps_what_is_referenced(root: Path, expected: list[tuple[bytes, bytes]],
                                      what: str, *, writes_since: bool = False) -> None:
    """``slate gc --min-age 0s --force --no-dry-run``, then every SST of the manifest and of
    every checkpoint still exists, both readers agree on each checkpoint (and see
    ``expected`` there unless there were ``writes_since`` the template), and both read
    ``expected`` at the latest state."""
    argv = cli_args(root, "gc", "--min-age", "0s", "--force", "--no-dry-run")
    assert in_process(*argv) == 0, f"{what}: gc failed"
    store = store_of(root)
    present = {meta.path for meta in store.list(DbPaths(PATH).compacted_dir)}
    m = latest(root)
    manifests = ManifestStore(store, PATH)
    for cp in m.checkpoints:
        pinned = manifests.read(cp.manifest_id).value
        missing = {DbPaths(PATH).compacted(i) for i in pinned.referenced_sst_ids()} - present
        assert missing == set(), f"{what}: GC deleted SSTs of checkpoint {cp.id}: {missing}"
        pinned_rows = our_scan(root, str(cp.id))
        with OfficialReader.open(root, PATH, merge_operator=Concat(),
                                 checkpoint=str(cp.id)) as r:
            assert r.scan() == pinned_rows, f"{what}: readers differ at checkpoint {cp.id}"
        assert writes_since or pinned_rows == expected, f"{what}: checkpoint {cp.id} changed"
    missing = {DbPaths(PATH).compacted(i) for i in m.referenced_sst_ids()} - present
    assert missing == set(), f"{what}: GC deleted live SSTs {missing}"
    check_intact(root, expected, f"{what}, after GC")


def check_recovers(root: Path, expected: list[tuple[bytes, bytes]], what: str, *,
                   writes_since: bool = False) -> None:
    """Data intact; GC right after the crash keeps everything referenced; a rerun completes
    with identical data and closes every open compaction; GC again keeps everything."""
    check_intact(root, expected, what)
    check_gc_keeps_what_is_referenced(root, expected, f"{what}, GC before the rerun",
                                      writes_since=writes_since)
    assert in_process(*cli_args(root, *COMPACT)) == 0, f"{what}: the rerun failed"
    m = latest(root)
    assert m.l0 == () and len(m.compacted) == 1, f"{what}: rerun left {m.l0}, {m.compacted}"
    active = [c for c in CompactionsStore(store_of(root), PATH).read_latest().value
              .recent_compactions
              if c.status not in (CompactionStatus.COMPLETED, CompactionStatus.FAILED)]
    assert active == [], f"{what}: compactions left open: {active}"
    check_intact(root, expected, f"{what}, after the rerun")
    check_gc_keeps_what_is_referenced(root, expected, f"{what}, GC after the rerun",
                                      writes_since=writes_since)


@pytest.fixture(scope="module")
def one_run(template: Template, tmp_path_factory: pytest.TempPathFactory) -> list[Write]:
    """The writes of one uninterrupted compaction (the kill points)."""
    root = fresh_copy(template, tmp_path_factory.mktemp("compact-kill-count") / "d")
    proc = subprocess.run(child_cmd(-1, "none", cli_args(root, *COMPACT)), cwd=REPO,
                          capture_output=True, text=True, timeout=60, env=child_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert db_report(proc.stdout)["outcome"] == "committed"
    return writes_of(proc.stderr)


# ------------------------------------------------------------------------------- tests
def test_a_compaction_killed_before_or_after_each_write_loses_nothing_and_recovers(
    template: Template, one_run: list[Write], tmp_path: Path,
) -> None:
    kinds = [w.kind for w in one_run]
    # claim record (claiming), fence manifest, claim record (claimed), compactions claim,
    # record, outputs, Compacted, commit, Completed
    assert kinds[:5] == ["claims", "manifest", "claims", "compactions", "compactions"], kinds
    assert kinds.count("compacted") >= 2 and kinds[-3:] == ["compactions", "manifest",
                                                           "compactions"], kinds
    points = [(w.index, when) for w in one_run for when in ("kill", "kill-after")]
    for n, when in points:
        what = f"{when} at write {n} ({one_run[n].kind})"
        root = fresh_copy(template, tmp_path / f"{when}-{n}")
        proc = subprocess.run(child_cmd(n, when, cli_args(root, *COMPACT)), cwd=REPO,
                              capture_output=True, text=True, timeout=60, env=child_env())
        assert proc.returncode == -signal.SIGKILL, f"{what}: {proc.stderr[-3000:]}"
        assert n in {w.index for w in writes_of(proc.stderr)}, what
        check_recovers(root, template.expected, what)


def test_the_slate_command_killed_at_random_moments_of_its_run_loses_nothing(
    template: Template, tmp_path: Path,
) -> None:
    """The installed ``slate`` script, no hook: killed a seeded random 0-12 ms after it
    logs that it fenced the other compactors (the whole compaction takes about 10 ms
    after that), so the kills land in the record, execute and commit phases."""
    slate_bin = Path(sys.executable).parent / "slate"
    rng = random.Random(20261122)
    outcomes = []
    for attempt in range(6):
        root = fresh_copy(template, tmp_path / f"random-{attempt}")
        proc = subprocess.Popen([str(slate_bin), "-v", *cli_args(root, *COMPACT)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                env=child_env())
        assert proc.stderr is not None
        try:
            for line in proc.stderr:
                if "compactor fenced" in line:
                    break
            delay = rng.uniform(0.0, 0.012)
            try:
                proc.wait(delay)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGKILL)
            proc.wait(30)
        finally:
            proc.kill()
            proc.wait(30)
            proc.stderr.close()
        outcomes.append(proc.returncode)
        check_recovers(root, template.expected, f"kill {attempt} after {delay * 1000:.1f} ms "
                       f"(rc {proc.returncode})")
    assert -signal.SIGKILL in outcomes, outcomes


@pytest.mark.parametrize("phase", ["compacted_mark", "commit"])
def test_two_compaction_processes_the_second_fences_the_first(
    template: Template, one_run: list[Write], tmp_path: Path, phase: str,
) -> None:
    kinds = [w.kind for w in one_run]
    pause_at = len(kinds) - (3 if phase == "compacted_mark" else 2)
    assert kinds[pause_at] == ("compactions" if phase == "compacted_mark" else "manifest")
    root = fresh_copy(template, tmp_path / "d")
    first = subprocess.Popen(child_cmd(pause_at, "pause", cli_args(root, *COMPACT)),
                             cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=child_env())
    assert first.stderr is not None and first.stdin is not None
    try:
        log = []
        for line in first.stderr:
            log.append(line)
            if line.strip() == "PAUSED":
                break
        assert log and log[-1].strip() == "PAUSED", "".join(log)[-3000:]
        second = subprocess.run(child_cmd(-1, "none", cli_args(root, *COMPACT)), cwd=REPO,
                                capture_output=True, text=True, timeout=60, env=child_env())
        assert second.returncode == 0, second.stderr[-3000:]
        report = db_report(second.stdout)
        assert report["outcome"] == "committed" and report["compactor_epoch"] == 2
        first.stdin.write("\n")
        first.stdin.flush()
        out, err = first.communicate(timeout=60)
    finally:
        first.kill()
        first.wait(30)
    assert first.returncode == 3, err[-3000:]
    assert "fenced" in err.lower(), err[-3000:]
    assert not any(w.kind == "manifest" for w in writes_of(err)), "the fenced job wrote"
    m = latest(root)
    assert m.compactor_epoch == 2
    assert [ulid_to_str(v.sst_id) for r in m.compacted for v in r.views] == report["outputs"]["ssts"]
    check_recovers(root, template.expected, f"two jobs ({phase})")


def test_two_compaction_processes_started_together_never_both_commit_one_plan(
    template: Template, tmp_path: Path,
) -> None:
    """Both race for the fence: each ends committed (0) or fenced (3), at least one
    commits, the manifest holds the run of the job with the newest epoch (a job fenced
    before its commit commits nothing; one that committed first was compacted again by the
    newer one), and the data is intact."""
    for attempt in range(3):
        root = fresh_copy(template, tmp_path / f"race-{attempt}")
        procs = [subprocess.Popen(child_cmd(-1, "none", cli_args(root, *COMPACT)), cwd=REPO,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=child_env()) for _ in range(2)]
        results = [(p.returncode, out, err) for p in procs
                   for out, err in [p.communicate(timeout=60)]]
        codes = sorted(code for code, _, _ in results)
        assert codes in ([0, 0], [0, 3]), [err[-2000:] for _, _, err in results]
        reports = [db_report(out) for code, out, _ in results if code == 0]
        assert all(r["outcome"] == "committed" for r in reports), reports
        m = latest(root)
        newest = max(reports, key=lambda r: r["compactor_epoch"])
        assert [ulid_to_str(v.sst_id) for r in m.compacted for v in r.views] == \
            newest["outputs"]["ssts"]
        for code, _, err in results:
            if code == 3:
                assert "fenced" in err.lower(), err[-2000:]
        check_recovers(root, template.expected, f"race {attempt} (exit codes {codes})")


def test_official_compactor_commits_the_outputs_of_a_job_killed_before_its_cas(
    template: Template, one_run: list[Write], tmp_path: Path,
) -> None:
    """0.17's coordinator commits the Compacted entries it inherits (SlateDB RFC-0025 recovery):
    our job killed between recording its outputs and its manifest CAS, then an official
    ``Db`` with its compactor on opens the database, commits our outputs as our run, and
    reads, keeps writing and reopens with the data intact."""
    commit = len(one_run) - 2
    assert one_run[commit].kind == "manifest"
    root = fresh_copy(template, tmp_path / "d")
    proc = subprocess.run(child_cmd(commit, "kill", cli_args(root, *COMPACT)), cwd=REPO,
                          capture_output=True, text=True, timeout=60, env=child_env())
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    [entry] = CompactionsStore(store_of(root), PATH).read_latest().value.recent_compactions
    assert entry.status == CompactionStatus.COMPACTED and entry.output_ssts
    outputs = [o.id for o in entry.output_ssts]
    with OfficialDb.open(root, PATH, DbSettings(block_size=BLOCK), merge_operator=Concat()) as db:
        deadline = time.monotonic() + 20
        while latest(root).l0 and time.monotonic() < deadline:
            run(asyncio.sleep(0.05))
        m = latest(root)
        assert m.l0 == () and [[v.sst_id for v in r.views] for r in m.compacted] == [outputs]
        assert m.compactor_epoch == 2
        assert db.scan() == template.expected
        db.write([Put(b"after", b"1")])
    assert our_scan(root) == official_scan(root) == sorted([*template.expected,
                                                           (b"after", b"1")])
    [entry] = CompactionsStore(store_of(root), PATH).read_latest().value.recent_compactions
    assert entry.status == CompactionStatus.COMPLETED


def test_an_official_writer_flushing_during_the_job_keeps_its_l0s_and_keeps_writing(
    template: Template, one_run: list[Write], tmp_path: Path,
) -> None:
    """Our job paused right before its commit CAS while an official writer opens the
    database and flushes a new L0; the resumed commit rebases onto it (the new L0 stays),
    and the still-open official writer then flushes again on top of our run."""
    commit = len(one_run) - 2
    root = fresh_copy(template, tmp_path / "d")
    job = subprocess.Popen(child_cmd(commit, "pause", cli_args(root, *COMPACT)), cwd=REPO,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env=child_env())
    assert job.stderr is not None and job.stdin is not None
    model = Model(dict(template.expected))
    keys = [k for k, _ in template.expected[:40]]
    try:
        for line in job.stderr:
            if line.strip() == "PAUSED":
                break
        with OfficialDb.open(root, PATH, DbSettings(block_size=BLOCK, compactor=False),
                             model=model, merge_operator=Concat()) as db:
            db.write([Put(k, b"new-" + k) for k in keys[:20]] + [Delete(k) for k in keys[20:]])
            db.flush_memtable()
            flushed = latest(root).l0[0]
            job.stdin.write("\n")
            job.stdin.flush()
            out, err = job.communicate(timeout=60)
            assert job.returncode == 0, err[-3000:]
            report = db_report(out)
            assert report["outcome"] == "committed" and report["rebases"] >= 1
            m = latest(root)
            assert m.l0 == (flushed,) and len(m.compacted) == 1
            db.write([Put(b"after-commit", b"1"), Delete(keys[0])])
            db.flush_memtable()
            assert db.scan() == list(model.live().items())
    finally:
        job.kill()
        job.wait(30)
    assert len(latest(root).l0) == 2
    assert our_scan(root) == official_scan(root) == list(model.live().items())
    check_recovers(root, list(model.live().items()), "writer during the job",
                   writes_since=True)
