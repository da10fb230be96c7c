"""The writer with a separate WAL store (0.17's ``with_wal_object_store``), and the guard
that keeps it from moving ``replay_after_wal_id`` over WAL data it cannot read."""

from __future__ import annotations

import pytest

from slatelib import Db, DbReader
from slatelib.errors import WalStoreMissingError
from slatelib.objstore import ObjectStore, with_wal_store
from slatelib.paths import DbPaths
from slatelib.store.manifest_store import ManifestStore
from slatelib.testing.clock import FakeClock
from tests.unit.writer.support import memory_store, writer_settings

PATH = "db"


def _objects(store: ObjectStore) -> dict[str, bytes]:
    return {m.path: store.get(m.path) for m in store.list("")}


def _write_wal_only(main: ObjectStore, wal: ObjectStore, clock: FakeClock) -> None:
    db = Db.open(PATH, main, writer_settings(), clock=clock, wal_store=wal)
    db.put(b"a", b"1")
    db.flush()
    db.put(b"b", b"2")
    db.put(b"c", b"3")
    db.close(flush="wal")


def test_wal_objects_go_to_the_wal_store_and_the_rest_to_the_main_store(clock: FakeClock) -> None:
    main, wal = memory_store(), memory_store()
    _write_wal_only(main, wal, clock)
    paths = DbPaths.of(PATH)
    assert not [p for p in _objects(main) if p.startswith(paths.wal_dir + "/")]
    wal_objects = sorted(_objects(wal))
    assert wal_objects and all(p.startswith(paths.wal_dir + "/") for p in wal_objects)
    m = ManifestStore(main, PATH).read_latest().value
    assert m.wal_id_last_seen > m.replay_after_wal_id  # the close recorded the WAL tail
    with DbReader.open(PATH, main, mode="latest", wal_store=wal) as r:
        assert list(r.scan()) == [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]
    reopened = Db.open(PATH, main, writer_settings(), clock=clock, wal_store=wal)
    try:
        assert reopened.get(b"c") == b"3"
    finally:
        reopened.close(flush=None)


def test_the_writer_refuses_without_the_wal_store_and_writes_nothing(clock: FakeClock) -> None:
    main, wal = memory_store(), memory_store()
    _write_wal_only(main, wal, clock)
    before_main, before_wal = _objects(main), _objects(wal)
    m = ManifestStore(main, PATH).read_latest().value
    with pytest.raises(WalStoreMissingError, match="--wal-store") as info:
        Db.open(PATH, main, writer_settings(), clock=clock)
    assert (info.value.first, info.value.last) == (m.replay_after_wal_id + 1, m.wal_id_last_seen)
    with pytest.raises(WalStoreMissingError, match="given is not the one"):
        Db.open(PATH, main, writer_settings(), clock=clock, wal_store=memory_store())
    assert _objects(main) == before_main and _objects(wal) == before_wal
    # the acknowledged WAL-only writes are still there for the right WAL store
    with DbReader.open(PATH, main, mode="latest", wal_store=wal) as r:
        assert r.get(b"b") == b"2" and r.get(b"c") == b"3"


def test_readers_refuse_without_the_wal_store_in_every_mode(clock: FakeClock) -> None:
    main, wal = memory_store(), memory_store()
    _write_wal_only(main, wal, clock)
    before = _objects(main)
    for mode in ("latest", "managed"):
        with pytest.raises(WalStoreMissingError):
            DbReader.open(PATH, main, mode=mode, settings=writer_settings(), auto_refresh=False)
    assert _objects(main) == before  # the managed reader did not write its checkpoint


def test_the_store_can_carry_its_wal_store_and_settings_name_one(clock: FakeClock) -> None:
    main, wal = memory_store(), memory_store()
    _write_wal_only(main, wal, clock)
    with DbReader.open(PATH, with_wal_store(main, wal), mode="latest") as r:
        assert r.get(b"c") == b"3"
    from dataclasses import replace

    from slatelib.config import ObjectStoreSettings
    s = writer_settings()
    named = replace(s, object_store=ObjectStoreSettings(wal_store=wal.url))
    with DbReader.open(PATH, main, mode="latest", settings=named) as r:
        assert r.get(b"c") == b"3"
    with pytest.raises(WalStoreMissingError):  # "" : explicitly none, over the settings
        DbReader.open(PATH, main, mode="latest", settings=named, wal_store="")
