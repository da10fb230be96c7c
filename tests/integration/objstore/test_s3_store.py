"""ObstoreObjectStore against S3 (moto server): every operation, error mapping, paths."""

from __future__ import annotations

import pickle
import random
import socket
import string
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from slatelib.errors import (
    AlreadyExistsError,
    ConflictError,
    InvalidArgumentError,
    ObjectMissingError,
    StorageError,
    UnavailableError,
)
from slatelib.objstore import FORBIDDEN_PATH_CHARS, ObjectStore, open_raw_store
from tests.s3_server import S3Bucket

pytestmark = pytest.mark.integration


@pytest.fixture
def s3(s3_bucket: S3Bucket) -> ObjectStore:
    return s3_bucket.open()


def paths(store: ObjectStore, prefix: str = "", **bounds: str) -> list[str]:
    return [m.path for m in store.list(prefix, **bounds)]


def test_put_get_head_and_overwrite(s3: ObjectStore) -> None:
    s3.put("db/a.bin", b"hello")
    meta = s3.head("db/a.bin")
    assert (meta.path, meta.size) == ("db/a.bin", 5)
    assert meta.e_tag and meta.last_modified_ms > 1_600_000_000_000
    s3.put("db/a.bin", b"bye")
    assert s3.get("db/a.bin") == b"bye"
    assert s3.get_with_meta("db/a.bin") == (b"bye", s3.head("db/a.bin"))


def test_missing_objects(s3: ObjectStore) -> None:
    for call in (lambda: s3.get("x"), lambda: s3.head("x"), lambda: s3.get_range("x", 0, 2)):
        with pytest.raises(ObjectMissingError) as info:
            call()
        assert info.value.path == "x"


def test_ranges_including_past_the_end(s3: ObjectStore) -> None:
    data = bytes(range(256)) * 8
    s3.put("o", data)
    assert s3.get_range("o", 10, 20) == data[10:20]
    assert s3.get_range("o", 2040, 3000) == data[2040:]
    assert s3.get_range("o", 2048, 3000) == b""
    assert s3.get_range("o", 5000, 6000) == b""
    ranges = [(0, 4), (1000, 1010), (2046, 2100), (3000, 3010), (7, 7)]
    assert s3.get_ranges("o", ranges) == [data[s:e] for s, e in ranges]


def test_put_if_absent_and_put_if_match(s3: ObjectStore) -> None:
    s3.put_if_absent("m/1", b"first")
    with pytest.raises(AlreadyExistsError) as info:
        s3.put_if_absent("m/1", b"second")
    assert info.value.path == "m/1"
    e1 = s3.put_if_match("gc/boundary", b"v1", None)
    with pytest.raises(AlreadyExistsError):
        s3.put_if_match("gc/boundary", b"v1", None)
    e2 = s3.put_if_match("gc/boundary", b"v2", e1)
    assert e2 == s3.head("gc/boundary").e_tag != e1
    with pytest.raises(ConflictError):
        s3.put_if_match("gc/boundary", b"v3", e1)
    with pytest.raises(ConflictError):
        s3.put_if_match("gc/missing", b"v", e1)
    assert s3.get("gc/boundary") == b"v2"
    assert s3.get("m/1") == b"first"


def test_delete_and_bulk_delete_are_idempotent(s3: ObjectStore) -> None:
    names = [f"d/{i:04d}" for i in range(1203)]
    for name in names[:20]:
        s3.put(name, b"")
    s3.delete("d/0000")
    s3.delete("d/0000")
    s3.delete_many(names)  # more than one DeleteObjects batch, most keys missing
    assert paths(s3, "d") == []


def test_list_sorted_directory_prefix_and_bounds(s3: ObjectStore) -> None:
    for p in ["db/wal/2", "db/wal/10", "db/m/1", "db-clone/x", "db.txt", "dbx/y", "db"]:
        s3.put(p, b"")
    assert paths(s3, "db") == ["db/m/1", "db/wal/10", "db/wal/2"]
    assert paths(s3, "db-clone") == ["db-clone/x"]
    assert paths(s3, "db", start_after="db/m/1") == ["db/wal/10", "db/wal/2"]
    assert paths(s3, "db", end_before="db/wal/2") == ["db/m/1", "db/wal/10"]
    assert paths(s3, "db", start_after="db/m", end_before="db/wal/1~") == ["db/m/1", "db/wal/10"]
    assert paths(s3) == sorted(
        ["db/wal/2", "db/wal/10", "db/m/1", "db-clone/x", "db.txt", "dbx/y", "db"]
    )


def test_prefix_rooted_store_sees_only_its_prefix(s3_bucket: S3Bucket) -> None:
    whole = s3_bucket.open()
    whole.put("tenant/db/x", b"1")
    whole.put("tenant-2/db/x", b"2")
    rooted = s3_bucket.open("tenant")
    assert paths(rooted) == ["db/x"]
    assert rooted.get("db/x") == b"1"
    rooted.put_if_absent("db/y", b"3")
    assert whole.get("tenant/db/y") == b"3"


def test_allowed_characters_round_trip_exactly(s3: ObjectStore) -> None:
    rnd = random.Random(5)
    alphabet = [
        ch
        for ch in string.printable
        if " " <= ch <= "~" and ch not in FORBIDDEN_PATH_CHARS and ch != "/"
    ]
    written = ["sp/a b", "sp/x+y=z", "sp/semi;comma,", "sp/at@dollar$amp&", "sp/ lead", "sp/trail "]
    for i in range(150):
        seg = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 8)))
        written.append(f"sp/{i:03d}/{seg if seg not in ('.', '..') else 'x'}")
    for p in written:
        s3.put(p, p.encode())
    assert paths(s3, "sp") == sorted(written)
    for p in written[:10]:
        assert s3.head(p).path == p and s3.get(p) == p.encode()


@pytest.mark.parametrize("bad", ["a//b", "../x", "x/..", "p%20q", "caf\u00e9", "x#1", "A:"])
def test_invalid_paths_are_rejected_before_any_request(s3: ObjectStore, bad: str) -> None:
    with pytest.raises(InvalidArgumentError):
        s3.put(bad, b"")
    assert paths(s3) == []


def test_spec_reopens_the_same_bucket_from_a_pickle(s3_bucket: S3Bucket) -> None:
    store = s3_bucket.open()
    store.put("k", b"v")
    reopened = pickle.loads(pickle.dumps(store.spec)).open()
    assert reopened.get("k") == b"v"


def test_missing_bucket_is_a_storage_error(s3_bucket: S3Bucket) -> None:
    store = open_raw_store(f"s3://no-such-bucket-{s3_bucket.name[-8:]}", **s3_bucket.options)
    for call in (
        lambda: store.get("k"),
        lambda: store.put("k", b""),
        lambda: store.put_if_absent("k", b""),
        lambda: list(store.list("")),
        lambda: store.delete("k"),
    ):
        with pytest.raises(StorageError):
            call()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_unreachable_endpoint_is_unavailable(s3_bucket: S3Bucket) -> None:
    options = {**s3_bucket.options, "endpoint": f"http://127.0.0.1:{_closed_port()}"}
    store = open_raw_store(s3_bucket.url, **options, max_retries=0, connect_timeout="2s")
    for call in (
        lambda: store.get("k"),
        lambda: store.put_if_absent("k", b""),
        lambda: list(store.list("")),
    ):
        with pytest.raises(UnavailableError):
            call()


class _Always503(BaseHTTPRequestHandler):
    requests: list[str] = []

    def _reply(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        type(self).requests.append(self.command)
        self.send_response(503)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_PUT = do_HEAD = _reply  # noqa: N815

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture
def always_503() -> Iterator[str]:
    _Always503.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Always503)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_conditional_puts_are_never_retried_inside_obstore(always_503: str) -> None:
    store = open_raw_store(
        "s3://bucket", endpoint=always_503, region="us-east-1", access_key_id="k",
        secret_access_key="s", allow_http=True, max_retries=2,
    )  # fmt: skip
    with pytest.raises(UnavailableError):
        store.put("k", b"v")
    assert _Always503.requests == ["PUT"] * 3  # obstore retried the plain put twice
    _Always503.requests.clear()
    with pytest.raises(UnavailableError):
        store.put_if_absent("k", b"v")
    assert _Always503.requests == ["PUT"]  # a lost response must surface, not be retried
    _Always503.requests.clear()
    with pytest.raises(UnavailableError):
        store.put_if_match("k", b"v", '"etag"')
    assert _Always503.requests == ["PUT"]
