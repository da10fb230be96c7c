"""An S3 endpoint for the integration tests: moto's S3 in a subprocess on 127.0.0.1.

Imported by ``tests/conftest.py`` (fixtures ``moto_endpoint`` and ``s3_bucket``); run as a
script it *is* the server: moto's own WSGI application (what ``moto_server`` serves) with
three test-only changes:

- Object writes (PUT, POST, DELETE) are applied one at a time. moto checks
  ``If-None-Match``/``If-Match`` and then stores the object in two separate steps on a
  threaded server, so two racing conditional PUTs could in principle both pass the check.
  Real S3 makes the check and the write atomic; the lock restores that (bodies are read
  before the lock is taken, so uploads still overlap).
- ``POST /_slatelib/seed`` with JSON ``{"bucket": ..., "keys": [...], "data": "..."}``
  stores many objects directly in moto's backend. moto answers about 550 PUTs per second
  whatever the client concurrency (it is bound by one Python process), so 100k objects
  through HTTP would take three minutes; listings of seeded objects go through the normal
  S3 API.
- Buckets whose name starts with ``nocond-`` (:func:`create_bucket` with
  ``conditional_writes=False``) behave like an S3-compatible server behind a proxy that
  strips conditional headers: ``If-None-Match`` and ``If-Match`` are dropped from every
  request to them, so a "conditional" PUT silently overwrites (what two-phase CAS is for).
- Buckets whose name starts with ``nobulk-`` (:func:`create_bucket` with
  ``bulk_delete=False``) answer DeleteObjects with ``501 NotImplemented``, as S3-compatible
  services without multi-object delete do.
- ListObjectsV2 without a delimiter is answered from a sorted index of the bucket's keys
  (rebuilt after any write) instead of moto's scan-and-sort of the whole bucket for every
  1000-key page, which made one listing of 100k objects take 35 s. Results, order,
  ``start-after`` and continuation tokens are the same as moto's.
- Every S3 request is counted per bucket, by kind (:func:`request_kind`: ``get``,
  ``ranged_get``, ``head``, ``put``, ``conditional_put``, ``list``, ``delete``,
  ``multi_delete``, ``other``), with the request and response body bytes.
  ``GET /_slatelib/requests?bucket=NAME`` returns them as JSON and ``DELETE`` on the same
  path resets them (:meth:`S3Bucket.requests`, :meth:`S3Bucket.reset_requests`): the
  server's own count, to check the counts that slatelib's reports carry and to compare
  request costs with the official package (``make bench-cost``).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from slatelib.objstore import ObjectStore

REGION = "us-east-1"
ACCESS_KEY = "testing"
SECRET_KEY = "testing"
SEED_PATH = "/_slatelib/seed"
REQUESTS_PATH = "/_slatelib/requests"
REQUEST_KINDS = ("get", "ranged_get", "head", "put", "conditional_put", "list", "delete",
                 "multi_delete", "other")
NO_CONDITIONAL_PREFIX = "nocond-"
NO_BULK_DELETE_PREFIX = "nobulk-"

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


@dataclass(frozen=True)
class S3Bucket:
    """A fresh bucket on the test server, with what ``open_raw_store`` needs to reach it."""

    name: str
    endpoint: str

    @property
    def url(self) -> str:
        return f"s3://{self.name}"

    @property
    def options(self) -> dict[str, str | bool]:
        return {
            "endpoint": self.endpoint,
            "region": REGION,
            "access_key_id": ACCESS_KEY,
            "secret_access_key": SECRET_KEY,
            "allow_http": True,
        }

    def open(self, prefix: str = "") -> ObjectStore:
        """An ObjectStore rooted at the bucket (or at ``prefix`` inside it)."""
        from slatelib.objstore import open_raw_store

        url = f"{self.url}/{prefix}" if prefix else self.url
        return open_raw_store(url, **self.options)

    def seed(self, keys: list[str], data: bytes = b"") -> None:
        """Create ``keys`` directly in moto's backend (fast; see the module docstring)."""
        body = json.dumps({"bucket": self.name, "keys": keys, "data": data.decode()}).encode()
        request = urllib.request.Request(self.endpoint + SEED_PATH, data=body, method="POST")
        with urllib.request.urlopen(request, timeout=120) as response:
            assert response.status == 200, response.read()

    def requests(self) -> dict[str, Any]:
        """The server's count of the requests made to this bucket since it was created or
        last reset: ``{"requests": {kind: n}, "bytes_in": n, "bytes_out": n}`` (kinds of
        :func:`request_kind`, zero counts left out; bytes of request and response bodies)."""
        return server_requests(self.endpoint, self.name)

    def reset_requests(self) -> None:
        """Zero this bucket's request counts on the server."""
        url = f"{self.endpoint}{REQUESTS_PATH}?bucket={self.name}"
        with urllib.request.urlopen(urllib.request.Request(url, method="DELETE"),
                                    timeout=30) as response:
            assert response.status == 200, response.read()


def server_requests(endpoint: str, bucket: str) -> dict[str, Any]:
    """:meth:`S3Bucket.requests` for any bucket name on the server at ``endpoint``."""
    with urllib.request.urlopen(f"{endpoint}{REQUESTS_PATH}?bucket={bucket}",
                                timeout=30) as response:
        counted: dict[str, Any] = json.loads(response.read())
        return counted


def request_kind(method: str, path: str, query: str, headers: dict[str, str]) -> str:
    """The kind of one path-style S3 request (``/bucket`` or ``/bucket/key``), as a bill
    counts it: a ListObjects page is one ``list``, a DeleteObjects batch one
    ``multi_delete``, a PUT with ``If-None-Match`` or ``If-Match`` a ``conditional_put``,
    a GET with a ``Range`` header a ``ranged_get``; each request of a multipart upload
    (create, part, complete, abort) is a ``put``. ``headers`` are WSGI names
    (``HTTP_RANGE``)."""
    from urllib.parse import parse_qs

    has_key = bool(path.lstrip("/").partition("/")[2])
    params = parse_qs(query, keep_blank_values=True)
    if method == "GET":
        if not has_key:
            return "list" if "location" not in params and "versioning" not in params else "other"
        return "ranged_get" if headers.get("HTTP_RANGE") else "get"
    if method == "HEAD":
        return "head" if has_key else "other"
    if method == "PUT" and has_key:
        if "partNumber" in params or "uploadId" in params:
            return "put"
        conditional = headers.get("HTTP_IF_NONE_MATCH") or headers.get("HTTP_IF_MATCH")
        return "conditional_put" if conditional else "put"
    if method == "POST" and not has_key and "delete" in params:
        return "multi_delete"
    if method == "POST" and has_key:  # multipart upload: create and complete
        return "put"
    if method == "DELETE" and has_key:
        return "put" if "uploadId" in params else "delete"
    return "other"


@dataclass
class MotoServer:
    """A running server subprocess."""

    endpoint: str
    process: subprocess.Popen[bytes]
    log_path: str
    _stopped: bool = field(default=False, repr=False)

    def stop(self) -> None:
        """Terminate the server (kill it if it does not exit within 10 s)."""
        if self._stopped:
            return
        self._stopped = True
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        with contextlib.suppress(OSError):
            os.remove(self.log_path)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _answers(endpoint: str) -> bool:
    try:
        with urllib.request.urlopen(endpoint + "/moto-api/", timeout=1) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def start_moto_server(timeout_s: float = 30.0, attempts: int = 3) -> MotoServer:
    """Start the server on a free port and wait until it answers.

    Raises:
        RuntimeError: it did not come up (the message holds the end of its log).
    """
    log_tail = ""
    for _ in range(attempts):
        port = _free_port()
        fd, log_path = tempfile.mkstemp(prefix="moto-", suffix=".log")
        with os.fdopen(fd, "wb") as log:
            process = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--port", str(port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        server = MotoServer(f"http://127.0.0.1:{port}", process, log_path)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and process.poll() is None:
            if _answers(server.endpoint):
                return server
            time.sleep(0.1)
        with open(log_path, errors="replace") as f:
            log_tail = f.read()[-2000:]
        server.stop()
    raise RuntimeError(f"moto server did not start; last log:\n{log_tail}")


def create_bucket(endpoint: str, *, conditional_writes: bool = True,
                  bulk_delete: bool = True) -> S3Bucket:
    """Create a bucket with a unique name on the server at ``endpoint``; with
    ``conditional_writes=False``, one whose requests lose their conditional headers; with
    ``bulk_delete=False``, one that refuses DeleteObjects."""
    import boto3

    prefix = "test-" if conditional_writes else NO_CONDITIONAL_PREFIX
    if not bulk_delete:
        prefix = NO_BULK_DELETE_PREFIX
    name = f"{prefix}{uuid.uuid4().hex[:20]}"
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
    )
    client.create_bucket(Bucket=name)
    return S3Bucket(name, endpoint)


# -- the server process --------------------------------------------------------------------


class _TestServerApp:
    """WSGI middleware: serialized object writes and the seeding endpoint."""

    def __init__(self, app: WsgiApp) -> None:
        self._app = app
        self.write_lock = threading.Lock()
        self.generation = 0  # bumped after every write, under write_lock
        self._count_lock = threading.Lock()
        self._counts: dict[str, dict[str, int]] = {}

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        if method == "POST" and environ.get("PATH_INFO") == SEED_PATH:
            return self._seed(environ, start_response)
        if environ.get("PATH_INFO") == REQUESTS_PATH:
            return self._requests(environ, start_response)
        if environ.get("PATH_INFO", "").startswith("/moto-api"):
            return self._app(environ, start_response)
        bucket = _bucket_of(environ)
        kind = request_kind(method, str(environ.get("PATH_INFO", "")),
                            str(environ.get("QUERY_STRING", "")), environ)
        if kind == "multi_delete" and bucket.startswith(NO_BULK_DELETE_PREFIX):
            out = _not_implemented(start_response)
        else:
            out = list(self._serve(method, environ, start_response))
        body_in = int(environ.get("CONTENT_LENGTH") or 0)
        self._count(bucket, kind, body_in, sum(len(chunk) for chunk in out))
        return out

    def _count(self, bucket: str, kind: str, bytes_in: int, bytes_out: int) -> None:
        with self._count_lock:
            counts = self._counts.setdefault(bucket, {})
            counts[kind] = counts.get(kind, 0) + 1
            counts["bytes_in"] = counts.get("bytes_in", 0) + bytes_in
            counts["bytes_out"] = counts.get("bytes_out", 0) + bytes_out

    def _requests(self, environ: dict[str, Any],
                  start_response: StartResponse) -> Iterable[bytes]:
        from urllib.parse import parse_qs

        bucket = parse_qs(str(environ.get("QUERY_STRING", ""))).get("bucket", [""])[0]
        with self._count_lock:
            if environ.get("REQUEST_METHOD") == "DELETE":
                self._counts.pop(bucket, None)
            counts = dict(self._counts.get(bucket, {}))
        body = json.dumps({
            "requests": {k: counts[k] for k in REQUEST_KINDS if counts.get(k)},
            "bytes_in": counts.get("bytes_in", 0),
            "bytes_out": counts.get("bytes_out", 0),
        }).encode()
        start_response("200 OK", [("Content-Type", "application/json")])
        return [body]

    def _serve(self, method: str, environ: dict[str, Any],
               start_response: StartResponse) -> Iterable[bytes]:
        if method not in ("PUT", "POST", "DELETE"):
            return self._app(environ, start_response)
        if _bucket_of(environ).startswith(NO_CONDITIONAL_PREFIX):
            environ.pop("HTTP_IF_NONE_MATCH", None)  # a proxy that strips conditions
            environ.pop("HTTP_IF_MATCH", None)
        length = environ.get("CONTENT_LENGTH")
        stream = environ["wsgi.input"]
        if length:
            body = stream.read(int(length))
        elif environ.get("wsgi.input_terminated"):  # chunked: werkzeug ends the stream
            body = stream.read()
        else:  # no body (the AWS SDK v2 sends a DELETE without Content-Length)
            body = b""
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        with self.write_lock:
            try:
                return list(self._app(environ, start_response))
            finally:
                self.generation += 1

    def _seed(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        from moto.core.models import DEFAULT_ACCOUNT_ID
        from moto.s3.models import s3_backends

        request = json.loads(environ["wsgi.input"].read(int(environ["CONTENT_LENGTH"])))
        backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
        data = request["data"].encode()
        with self.write_lock:
            try:
                for key in request["keys"]:
                    backend.put_object(request["bucket"], key, data)
            finally:
                self.generation += 1
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]


def _not_implemented(start_response: StartResponse) -> list[bytes]:
    body = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>NotImplemented</Code>'
            b"<Message>A header you provided implies functionality that is not "
            b"implemented</Message></Error>")
    start_response("501 Not Implemented", [("Content-Type", "application/xml"),
                                           ("Content-Length", str(len(body)))])
    return [body]


def _bucket_of(environ: dict[str, Any]) -> str:
    """The bucket of a path-style request (``/bucket/key``)."""
    return str(environ.get("PATH_INFO", "")).lstrip("/").partition("/")[0]


def _install_sorted_listing(app: _TestServerApp) -> None:
    """Make moto's ListObjectsV2 (no delimiter) bisect a cached sorted key index."""
    from bisect import bisect_left, bisect_right

    from moto.s3.models import FakeBucket, FakeDeleteMarker, S3Backend

    original = S3Backend.list_objects_v2
    index: dict[str, tuple[int, list[str]]] = {}

    def sorted_names(bucket: Any) -> list[str]:
        cached = index.get(bucket.name)
        if cached is None or cached[0] != app.generation:
            with app.write_lock:
                cached = (app.generation, sorted(dict.keys(bucket.keys)))
            index[bucket.name] = cached
        return cached[1]

    def list_objects_v2(
        self: Any,
        bucket: Any,
        prefix: str | None,
        delimiter: str | None,
        continuation_token: str | None,
        start_after: str | None,
        max_keys: int,
    ) -> Any:
        if delimiter or type(bucket) is not FakeBucket:
            return original(
                self, bucket, prefix, delimiter, continuation_token, start_after, max_keys
            )
        names = sorted_names(bucket)
        prefix = prefix or ""
        pos = bisect_left(names, prefix)
        after = self._pagination_tokens.get(continuation_token) if continuation_token else None
        after = after or start_after
        if after:
            pos = max(pos, bisect_right(names, after))
        keys: list[Any] = []
        while pos < len(names) and len(keys) <= max_keys and names[pos].startswith(prefix):
            try:
                key = bucket.keys[names[pos]]
            except KeyError:  # deleted after the index was read
                key = None
            if key is not None and not isinstance(key, FakeDeleteMarker):
                keys.append(key)
            pos += 1
        return self._truncate_result(keys, max_keys)

    S3Backend.list_objects_v2 = list_objects_v2  # type: ignore[method-assign]


def _serve(port: int) -> None:
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import run_simple

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    os.environ.setdefault("MOTO_PORT", str(port))
    app = _TestServerApp(DomainDispatcherApplication(create_backend_app))
    _install_sorted_listing(app)
    run_simple("127.0.0.1", port, app, threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    _serve(int(sys.argv[sys.argv.index("--port") + 1]))
