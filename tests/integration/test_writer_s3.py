"""The writer, readers, checkpoints, clones and destroy on S3 (the tests' moto server):
real conditional puts over HTTP, lost-response handling through the retrying store."""

from __future__ import annotations

import threading

import pytest

from slatelib import Db, DbReader, WriteBatch, create_checkpoint, create_clone, destroy
from slatelib.errors import FencedError, InvalidDbStateError
from slatelib.objstore import ObjectStore, RetryingObjectStore
from slatelib.objstore.registry import with_retries
from slatelib.store.manifest_store import ManifestStore
from slatelib.testing.faulty import FlakyObjectStore
from tests.interop.official import OfficialReader, s3_store
from tests.s3_server import ACCESS_KEY, REGION, SECRET_KEY, S3Bucket
from tests.unit.writer.support import writer_settings

pytestmark = pytest.mark.integration


@pytest.fixture
def s3(s3_bucket: S3Bucket) -> ObjectStore:
    return with_retries(s3_bucket.open())


def test_writer_on_s3_group_commits_flushes_and_reopens(s3: ObjectStore, s3_bucket: S3Bucket) -> None:
    db = Db.open("w/db", s3, writer_settings(wal_max_in_flight=4, l0_sst_size_bytes=4096))
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            for i in range(25):
                db.put(b"t%d/%02d" % (t, i), b"v" * 100)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    db.write(WriteBatch().delete(b"t0/00").put(b"z", b"last"))
    assert len(db.manifest.l0) >= 1  # memtables of 4 KiB flushed while writing
    db.close(flush=None)
    with Db.open("w/db", s3, writer_settings()) as again:
        assert len(list(again.scan())) == 150 and again.get(b"z") == b"last"
    official = s3_store(s3_bucket.name, endpoint=s3_bucket.endpoint, region=REGION,
                        access_key_id=ACCESS_KEY, secret_access_key=SECRET_KEY)
    with OfficialReader.open(official, "w/db") as r:
        assert len(r.scan()) == 150 and r.get(b"t0/00") is None


def test_fencing_and_lost_responses_on_s3(s3: ObjectStore, s3_bucket: S3Bucket) -> None:
    flaky = FlakyObjectStore(s3_bucket.open())
    flaky.fail_after("put_if_absent", path="/wal/", times=2, skip=9)  # data WAL answers lost
    store = RetryingObjectStore(flaky, base_delay_s=0.01, resolve_by_content=False)
    first = Db.open("f/db", store, writer_settings())
    for i in range(5):
        first.put(b"k%d" % i, b"v")  # two of these WAL writes land without an answer
    assert flaky.rules[0].fired == 2
    second = Db.open("f/db", s3, writer_settings())
    with pytest.raises(FencedError):
        first.put(b"late", b"x")
    assert dict(second.scan()) == {b"k%d" % i: b"v" for i in range(5)}
    first.close()
    second.close()


def test_reader_checkpoint_clone_and_destroy_on_s3(s3: ObjectStore) -> None:
    with Db.open("p/db", s3, writer_settings()) as db:
        db.put(b"a", b"1")
        db.flush()
        db.put(b"b", b"2")
        with DbReader.open("p/db", s3, settings=writer_settings(), auto_refresh=False) as r:
            assert r.checkpoint is not None and r.get(b"b") == b"2"
            db.put(b"c", b"3")
            assert r.refresh() and r.get(b"c") == b"3"
    cp = create_checkpoint("p/db", s3, lifetime="1h", name="s3")
    report = create_clone("p/clone", "p/db", s3, cp.id)
    assert report.created
    with DbReader.open("p/clone", s3, mode="latest") as r:
        assert dict(r.scan()) == {b"a": b"1", b"b": b"2", b"c": b"3"}
    with pytest.raises(InvalidDbStateError, match="unexpired"):
        destroy("p/db", s3, soft=False)
    assert destroy("p/clone", s3, soft=False).released_parents == ("p/db",)
    assert list(s3.list("p/clone")) == []
    destroy("p/db", s3)
    assert ManifestStore(s3, "p/db").read_latest().value.destroyed_at_s is not None
