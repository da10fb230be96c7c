"""put_if_absent under contention: 32 racing threads, each with its own store handle (as
separate processes would have), must produce exactly one winner per object."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from slatelib.errors import AlreadyExistsError
from slatelib.objstore import ObjectStore, StoreSpec, open_raw_store
from tests.s3_server import S3Bucket

pytestmark = pytest.mark.integration

RACERS = 32
ROUNDS = 5


def race(spec: StoreSpec, path: str, payload_size: int) -> tuple[list[int], list[BaseException]]:
    """Start RACERS threads at one barrier; return the winners and unexpected errors."""
    stores = [spec.open() for _ in range(RACERS)]
    barrier = threading.Barrier(RACERS)
    winners: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def racer(i: int) -> None:
        payload = i.to_bytes(4, "big") * (payload_size // 4)
        barrier.wait()
        try:
            stores[i].put_if_absent(path, payload)
        except AlreadyExistsError:
            return
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            with lock:
                errors.append(exc)
            return
        with lock:
            winners.append(i)

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(RACERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return winners, errors


def check_rounds(store: ObjectStore, payload_size: int) -> None:
    for rnd in range(ROUNDS):
        path = f"db/manifest/{rnd:020d}.manifest"
        winners, errors = race(store.spec, path, payload_size)
        assert errors == []
        assert len(winners) == 1, f"round {rnd}: winners {winners}"
        stored = store.get(path)
        assert stored == winners[0].to_bytes(4, "big") * (payload_size // 4)


@pytest.mark.parametrize("payload_size", [64, 256 * 1024])
def test_one_winner_among_32_racers_on_local_fs(tmp_path: Path, payload_size: int) -> None:
    check_rounds(open_raw_store(f"file://{tmp_path}/root"), payload_size)


@pytest.mark.parametrize("payload_size", [64, 256 * 1024])
def test_one_winner_among_32_racers_on_s3(s3_bucket: S3Bucket, payload_size: int) -> None:
    check_rounds(s3_bucket.open(), payload_size)


def test_one_winner_among_32_racers_on_memory() -> None:
    check_rounds(open_raw_store("memory://race/"), 64)
