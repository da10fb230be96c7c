"""Opening for write: database creation, epoch claim, WAL fence and fence window."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from slatelib.core.row import VALUE
from slatelib.errors import CorruptObjectError, FencedError, ManifestMissingError
from slatelib.format.sst import SstWriterOptions, encode_sst
from slatelib.objstore import ObjectStore
from slatelib.paths import DbPaths
from slatelib.store.manifest_store import ManifestStore, StoredManifest
from slatelib.store.wal_store import WalStore
from slatelib.testing.clock import FakeClock
from slatelib.writer.fencing import (
    WAL_FENCE_WINDOW,
    WriterClaim,
    claim_epoch,
    ensure_database,
    fence_wal,
    fill_fence_window,
    open_for_write,
)

PATH = "db"
LIFETIME = 3600.0


def wal_sst(seq: int) -> bytes:
    return encode_sst([(b"k%d" % seq, seq, VALUE, b"v", None, 1)], SstWriterOptions.wal()).to_bytes()


def claim_as_writer(manifests: ManifestStore, current: StoredManifest, clock: FakeClock) -> tuple[StoredManifest, int, uuid.UUID]:
    return claim_epoch(manifests, current, clock, checkpoint_lifetime_s=LIFETIME)


def open_db(store: ObjectStore, manifests: ManifestStore, wal: WalStore, clock: FakeClock) -> WriterClaim:
    return open_for_write(store, manifests, wal, clock, checkpoint_lifetime_s=LIFETIME)


def stores(store: ObjectStore) -> tuple[ManifestStore, WalStore]:
    return ManifestStore(store, PATH), WalStore(store, PATH)


def test_opening_a_new_database_creates_it_and_claims_epoch_one(store: ObjectStore, clock: FakeClock) -> None:
    manifests, wal = stores(store)
    claim = open_db(store, manifests, wal, clock)
    assert claim.epoch == 1 and claim.fence_wal_id == 1
    mine = claim.manifest.value.checkpoint(claim.checkpoint_id)
    assert mine is not None and mine.expire_time_s == clock.now_ms() // 1000 + LIFETIME
    assert claim.last_fence_wal_id == WAL_FENCE_WINDOW
    assert manifests.list_ids() == [1, 2]
    assert all(store.get(wal.path(i)) == b"" for i in range(1, WAL_FENCE_WINDOW + 1))
    cp = claim.manifest.value.checkpoint(claim.checkpoint_id)
    assert cp is not None and cp.manifest_id == 2 and cp.writer_epoch == 1


def test_each_open_fences_the_previous_writer(store: ObjectStore, clock: FakeClock) -> None:
    manifests, wal = stores(store)
    first = open_db(store, manifests, wal, clock)
    second = open_db(store, manifests, wal, clock)
    assert (first.epoch, second.epoch) == (1, 2)
    assert second.fence_wal_id == first.last_fence_wal_id + 1
    writer_cps = [c for c in manifests.read_latest().value.checkpoints if c.writer_epoch]
    assert [c.writer_epoch for c in writer_cps] == [2]


def test_the_fence_skips_an_id_an_older_writer_just_took(store: ObjectStore, clock: FakeClock) -> None:
    manifests, wal = stores(store)
    claimed, epoch, _ = claim_as_writer(manifests, ensure_database(manifests), clock)
    store.put_if_absent(wal.path(1), wal_sst(1))  # the old writer landed its WAL first
    assert fence_wal(store, wal, manifests, claimed.value, epoch) == 2


def test_a_newer_epoch_stops_the_fence_loop(
    store: ObjectStore, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifests, wal = stores(store)
    claimed, epoch, _ = claim_as_writer(manifests, ensure_database(manifests), clock)
    claim_as_writer(manifests, manifests.read_latest(), clock)  # a newer writer
    store.put_if_absent(wal.path(1), b"")  # ... and fenced the WAL after we listed it
    import slatelib.writer.fencing as fencing

    monkeypatch.setattr(fencing, "_wal_ids_above", lambda *args: [])  # the stale listing
    with pytest.raises(FencedError):
        fence_wal(store, wal, manifests, claimed.value, epoch)


def test_a_claim_after_ours_fences_the_open_at_its_final_refresh(
    store: ObjectStore, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifests, wal = stores(store)
    import slatelib.writer.fencing as fencing

    real = fencing.fill_fence_window

    def racing(*args: object, **kw: object) -> int:
        claim_as_writer(manifests, manifests.read_latest(), clock)  # another writer opens now
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(fencing, "fill_fence_window", racing)
    with pytest.raises(FencedError):
        open_db(store, manifests, wal, clock)


def test_a_newer_writers_fence_inside_our_window_stops_the_window_at_once(
    store: ObjectStore, clock: FakeClock
) -> None:
    """We (older) fence 1 and fill our window; a newer opener (0.17 or slatelib) placed its
    fence at 3 meanwhile and writes its WAL from 4 on. We must stop at its fence instead of
    fencing 4.. too, which would kill the newer writer as well (then neither survives)."""
    manifests, wal = stores(store)
    claimed, epoch, _ = claim_as_writer(manifests, ensure_database(manifests), clock)
    assert fence_wal(store, wal, manifests, claimed.value, epoch) == 1
    claim_as_writer(manifests, manifests.read_latest(), clock)  # the newer writer claims ...
    store.put_if_absent(wal.path(3), b"")  # ... and fences
    with pytest.raises(FencedError):
        fill_fence_window(store, wal, manifests, 1, epoch)
    store.put_if_absent(wal.path(4), wal_sst(4))  # the newer writer's first WAL write lands
    assert [i for i in range(1, WAL_FENCE_WINDOW + 1) if wal.exists(i)] == [1, 2, 3, 4]


def racing_listings(
    monkeypatch: pytest.MonkeyPatch, *before_listing: Callable[[], object]
) -> None:
    """Run ``before_listing[i]`` right before the i-th WAL listing of the fence search."""
    import slatelib.writer.fencing as fencing

    real = fencing._head_above
    calls = iter(before_listing)

    def listing(*args: Any) -> tuple[int, bool]:
        action = next(calls, None)
        if action is not None:
            action()
        return real(*args)

    monkeypatch.setattr(fencing, "_head_above", listing)


def test_a_newer_writers_fence_seen_by_our_first_listing_is_not_jumped_over(
    store: ObjectStore, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """We claim epoch 1; a newer opener (0.17 found its WAL head before claiming) claims 2
    and fences WAL 1 just before we list the WAL. Taking WAL 2 would take the newer
    writer's first WAL write, and our final refresh then fails our open too: no writer
    (F02, seen racing an official 0.17 open). The listing must be checked against the
    manifest before we place a fence after anything it shows."""
    manifests, wal = stores(store)
    claimed, epoch, _ = claim_as_writer(manifests, ensure_database(manifests), clock)

    def newer_opens() -> None:
        claim_as_writer(manifests, manifests.read_latest(), clock)
        store.put_if_absent(wal.path(1), b"")

    racing_listings(monkeypatch, newer_opens)
    with pytest.raises(FencedError):
        fence_wal(store, wal, manifests, claimed.value, epoch)
    assert not wal.exists(2)
    store.put_if_absent(wal.path(2), wal_sst(1))  # the newer writer's first WAL write lands


def test_a_newer_writers_fence_seen_after_a_taken_id_is_not_jumped_over(
    store: ObjectStore, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An older writer still writing takes WAL 2 just after our first listing; while we
    list again to jump to its head, a newer opener claims and fences WAL 3. We must stop
    instead of fencing WAL 4, the newer writer's first WAL write."""
    manifests, wal = stores(store)
    ensure_database(manifests)
    store.put_if_absent(wal.path(1), wal_sst(1))  # the older writer's last WAL
    claimed, epoch, _ = claim_as_writer(manifests, manifests.read_latest(), clock)

    real_put = store.put_if_absent

    def newer_opens() -> None:
        claim_as_writer(manifests, manifests.read_latest(), clock)
        real_put(wal.path(3), b"")

    def put(path: str, data: bytes) -> None:
        if path == wal.path(2) and not wal.exists(2):
            real_put(path, wal_sst(2))  # the older writer lands between our listing and put
        real_put(path, data)

    racing_listings(monkeypatch, lambda: None, newer_opens)
    monkeypatch.setattr(store, "put_if_absent", put)
    with pytest.raises(FencedError):
        fence_wal(store, wal, manifests, claimed.value, epoch)
    assert not wal.exists(4)


def test_unacknowledged_wal_ssts_after_a_gap_are_replaced_by_fences(store: ObjectStore, clock: FakeClock) -> None:
    """A crashed writer had WAL 2 and 3 in flight; only 3 landed. Its rows were never
    acknowledged and must not become visible behind the new fence at 2."""
    manifests, wal = stores(store)
    ensure_database(manifests)
    store.put_if_absent(wal.path(1), wal_sst(1))
    store.put_if_absent(wal.path(3), wal_sst(3))
    store.put_if_absent(wal.path(12), wal_sst(9))  # past the window: still neutralized
    claim = open_db(store, manifests, wal, clock)
    assert claim.fence_wal_id == 2 and claim.last_fence_wal_id == 12
    assert store.get(wal.path(1)) != b""
    assert [i for i in range(2, 13) if store.get(wal.path(i)) != b""] == []


def test_wal_objects_far_beyond_the_head_refuse_the_open(store: ObjectStore, clock: FakeClock) -> None:
    manifests, wal = stores(store)
    ensure_database(manifests)
    store.put_if_absent(DbPaths(PATH).wal(10_000), wal_sst(1))
    with pytest.raises(CorruptObjectError, match="refusing to open"):
        open_db(store, manifests, wal, clock)


def test_chasing_an_older_writer_reads_no_manifest_per_step(
    store: ObjectStore, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An older writer that keeps writing WAL SSTs (never empty objects) is chased without
    a manifest read per step, so a new writer catches up with a fast one (a read per step
    let a fast writer outrun the opener for thousands of WAL ids)."""
    import slatelib.writer.fencing as fencing

    manifests, wal = stores(store)
    ensure_database(manifests)
    claimed, epoch, _ = claim_as_writer(manifests, manifests.read_latest(), clock)
    real_put = store.put_if_absent
    written = [0]

    def put(path: str, data: bytes) -> None:
        if written[0] < 20:  # the older writer lands its next WAL SST first, 20 times
            written[0] += 1
            real_put(wal.path(written[0]), wal_sst(written[0]))
        real_put(path, data)

    reads = [0]
    real_refresh = fencing._refresh_epoch

    def refresh(*args: Any) -> Any:
        reads[0] += 1
        return real_refresh(*args)

    monkeypatch.setattr(store, "put_if_absent", put)
    monkeypatch.setattr(fencing, "_refresh_epoch", refresh)
    fence_id = fence_wal(store, wal, manifests, claimed.value, epoch)
    assert fence_id == 21 and store.get(wal.path(21)) == b""
    assert reads[0] == 0



def test_a_newer_writers_fence_at_the_id_we_try_is_not_jumped_over(
    store: ObjectStore, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The newer opener's zero-byte fence lands exactly at the id our first put tries: the
    taken object itself must be checked (its next id is the newer writer's first WAL)."""
    manifests, wal = stores(store)
    claimed, epoch, _ = claim_as_writer(manifests, ensure_database(manifests), clock)
    real_put = store.put_if_absent

    def put(path: str, data: bytes) -> None:
        if path == wal.path(1) and not wal.exists(1):
            claim_as_writer(manifests, manifests.read_latest(), clock)
            real_put(path, b"")  # the newer writer's fence, just before ours
        real_put(path, data)

    monkeypatch.setattr(store, "put_if_absent", put)
    with pytest.raises(FencedError):
        fence_wal(store, wal, manifests, claimed.value, epoch)
    assert not wal.exists(2)


def test_the_final_epoch_check_reuses_our_claim_only_while_it_is_the_latest(
    store: ObjectStore, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from slatelib.writer import fencing

    manifests, wal = stores(store)
    open_db(store, manifests, wal, clock)  # a previous writer: its fence makes ours refresh
    reads: list[str] = []
    real_get = store.get

    def get(path: str) -> bytes:
        if path.startswith(manifests.directory):
            reads.append(path)
        return real_get(path)

    monkeypatch.setattr(store, "get", get)
    claim = open_db(store, manifests, wal, clock)
    assert reads == [manifests.path(2)]  # ensure_database's read only: none of our claim (3)
    assert claim.manifest.id == 3 == manifests.list_ids()[-1]
    assert claim.manifest.value == manifests.read(3).value

    # A newer version (another writer's claim) is read and checked, never skipped.
    newer, _, _ = claim_as_writer(manifests, manifests.read_latest(), clock)
    with pytest.raises(FencedError):
        fencing._refresh_epoch(manifests, claim.epoch, claim.manifest)
    assert fencing._refresh_epoch(manifests, newer.value.writer_epoch, newer) is newer
    # A GC boundary at the known id makes it the full read too (which then finds none).
    store.put(manifests.boundary_path, str(newer.id).encode())
    with pytest.raises(ManifestMissingError):
        fencing._refresh_epoch(manifests, newer.value.writer_epoch, newer)
