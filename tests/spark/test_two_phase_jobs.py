"""The compaction and GC jobs on a store without conditional writes, with ``[object_store]
cas`` set: the driver and the executors (which reopen the store from its ``StoreSpec``)
make every CAS through two-phase CAS; the native conditional writes are refused, so any
CAS that bypassed it would fail the job."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slatelib import Db, DbReader
from slatelib.config import ObjectStoreSettings, Settings
from slatelib.jobs.compact import build_parser as compact_parser
from slatelib.jobs.compact import run as run_compact
from slatelib.jobs.gc import build_parser as gc_parser
from slatelib.jobs.gc import run as run_gc_job
from slatelib.objstore import open_store
from slatelib.objstore.registry import set_store_defaults
from slatelib.objstore.two_phase import TwoPhaseObjectStore, is_temporary
from tests.unit.writer.support import writer_settings

pytestmark = pytest.mark.spark


@pytest.fixture
def cas(tmp_path: Path) -> Iterator[str]:
    url = f"sqlite://{tmp_path}/cas.sqlite"
    set_store_defaults(ObjectStoreSettings(cas=url, conditional_writes=False))
    try:
        yield url
    finally:
        set_store_defaults(None)


def test_compaction_and_gc_jobs_go_through_two_phase_cas(spark: Any, tmp_path: Path,
                                                         cas: str) -> None:
    url = f"file://{tmp_path}/root"
    store = open_store(url)
    assert isinstance(store, TwoPhaseObjectStore)
    expected: dict[bytes, bytes] = {}
    with Db.open("db", url, writer_settings()) as db:
        for batch in range(4):
            for i in range(50):
                key, value = b"k%03d" % ((i * 7 + batch) % 120), b"v%d-%d" % (batch, i)
                db.put(key, value)
                expected[key] = value
            db.flush()
    settings = Settings()
    args = compact_parser().parse_args(["--db", f"{url}/db", "--policy", "l0",
                                        "--parallelism", "2"])
    report, code = run_compact(spark, settings, args)
    (result,) = report["databases"]
    assert code == 0 and result["outcome"] == "committed", result
    # The job's store is file:/// with the database at tmp/.../root/db: its records are
    # the same as those of this handle rooted at .../root.
    outputs = [f"db/compacted/{sst}.sst" for sst in result["outputs"]["ssts"]]
    records = store.records("db")
    assert outputs
    for output in outputs:  # written on the executors, through two-phase CAS
        rec = store.record(output)
        assert rec is not None and rec.committed

    args = gc_parser().parse_args(["--db", f"{url}/db", "--no-dry-run", "--min-age", "0s",
                                   "--force"])
    report, code = run_gc_job(spark, settings, args)
    assert code == 0, report
    remaining = {m.path for m in store.list("db")}
    left = store.records()
    assert all(any(r.destination.endswith("/" + p) for p in remaining) for r in left)
    assert len(left) < len(records)  # GC took the records of what it deleted with it
    assert [m.path for m in store.inner.list("") if is_temporary(m.path)] == []
    with DbReader.open("db", url, mode="latest") as reader:
        assert dict(reader.scan()) == expected
