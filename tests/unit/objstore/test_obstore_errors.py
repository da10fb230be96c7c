"""Mapping of obstore/builtin exceptions to slatelib.errors."""

from __future__ import annotations

import errno

import obstore.exceptions as oe
import pytest

from slatelib.errors import (
    AlreadyExistsError,
    ConflictError,
    CredentialsMissingError,
    InternalError,
    InvalidArgumentError,
    ObjectMissingError,
    SlateError,
    StorageError,
    UnavailableError,
)
from slatelib.exit_codes import exit_code_for
from slatelib.objstore.obstore_errors import Op, is_panic, is_transient_message, map_error

CONNECT = (
    "Generic S3 error: Error performing GET http://127.0.0.1:5999/b/x in 101ms, after 1 "
    "retries, max_retries: 1, retry_timeout: 3s  - HTTP error: error sending request"
)
HTTP_503 = (
    "Generic S3 error: Error performing PUT http://h/b/x in 2ms - Server returned non-2xx "
    "status code: 503 Service Unavailable: <Error><Code>SlowDown</Code></Error>"
)
HTTP_416 = (
    "Generic S3 error: Error performing GET http://h/b/x in 2ms - Server returned non-2xx "
    "status code: 416 Range Not Satisfiable\n\nDebug source:\nretry_timeout: 180s, kind: Connect"
)
NO_BUCKET = "Object at location x not found: ... <Code>NoSuchBucket</Code> ..."


class PanicException(BaseException):
    """Same name as pyo3's class, which cannot be imported."""


CASES: list[tuple[BaseException, Op, type[SlateError]]] = [
    (FileNotFoundError("Object at location x not found"), "get", ObjectMissingError),
    (FileNotFoundError("Object at location x not found"), "head", ObjectMissingError),
    (FileNotFoundError(NO_BUCKET), "get", StorageError),
    (FileNotFoundError(NO_BUCKET), "put", StorageError),
    (FileNotFoundError("not found"), "put_if_absent", StorageError),
    (oe.AlreadyExistsError("exists"), "put_if_absent", AlreadyExistsError),
    (oe.PreconditionError("412"), "put_if_absent", AlreadyExistsError),
    (oe.PreconditionError("412"), "put_if_match", ConflictError),
    (oe.NotModifiedError("304"), "get", ConflictError),
    (oe.PermissionDeniedError("403"), "get", StorageError),
    (oe.UnauthenticatedError("401"), "put", StorageError),
    (oe.NotSupportedError("no"), "put_if_match", StorageError),
    (NotImplementedError("PutMode::Update"), "put_if_match", StorageError),
    (oe.UnknownConfigurationKeyError("bogus"), "open", InvalidArgumentError),
    (oe.InvalidPathError("bad"), "get", InvalidArgumentError),
    (ValueError("Could not parse path"), "get", InvalidArgumentError),
    (oe.JoinError("task"), "get", InternalError),
    (oe.GenericError(CONNECT), "get", UnavailableError),
    (oe.GenericError(HTTP_503), "put", UnavailableError),
    (oe.GenericError(HTTP_416), "get_range", StorageError),
    (oe.GenericError("Unable to rename file: Is a directory (os error 21)"), "put", StorageError),
    (TimeoutError("timed out"), "get", UnavailableError),
    (ConnectionResetError("reset"), "get", UnavailableError),
    (OSError(errno.EAGAIN, "again"), "put", UnavailableError),
    (OSError(errno.EEXIST, "File exists"), "open", StorageError),
    (PermissionError(errno.EACCES, "denied"), "put", StorageError),
    (PanicException("range start must not be greater than end"), "get_ranges", InternalError),
    (TypeError("unexpected"), "get", InternalError),
]


@pytest.mark.parametrize(("exc", "op", "kind"), CASES, ids=lambda x: type(x).__name__)
def test_map_error_kind(exc: BaseException, op: Op, kind: type[SlateError]) -> None:
    mapped = map_error(exc, op=op, path="db/x", url="s3://b")
    assert type(mapped) is kind
    assert "s3://b" in str(mapped) and "db/x" in str(mapped)


def test_missing_object_and_already_exists_carry_the_path() -> None:
    missing = map_error(FileNotFoundError("nf"), op="get", path="a/b", url="memory:///")
    exists = map_error(oe.AlreadyExistsError("e"), op="put_if_absent", path="a/b", url="u")
    assert isinstance(missing, ObjectMissingError) and missing.path == "a/b"
    assert isinstance(exists, AlreadyExistsError) and exists.path == "a/b"


def test_message_keeps_only_the_first_line() -> None:
    mapped = map_error(oe.GenericError("first\n\nDebug source:\nlots"), op="get", path="p", url="u")
    assert "Debug source" not in str(mapped)


def test_slate_errors_pass_through_unchanged() -> None:
    err = ConflictError("mine")
    assert map_error(err, op="get", path="p", url="u") is err


def test_transient_markers_ignore_the_debug_section_and_retry_timeout() -> None:
    assert is_transient_message(CONNECT)
    assert is_transient_message("operation timed out")
    assert is_transient_message("status code: 429 Too Many Requests")
    assert not is_transient_message(HTTP_416)
    assert not is_transient_message("Server returned non-2xx status code: 403 Forbidden")


def test_is_panic_recognizes_pyo3_panics_by_name() -> None:
    assert is_panic(PanicException("boom"))
    assert not is_panic(RuntimeError("boom"))


NO_ROLE = (
    "Generic S3 error: Error performing PUT http://169.254.169.254/latest/api/token in 1.9s, "
    "after 10 retries, max_retries: 10, retry_timeout: 180s  - HTTP error: error sending "
    "request"
)


def test_a_credential_chain_without_credentials_is_not_retried_and_says_why() -> None:
    """An executor given no keys and no role: obstore already retried the metadata endpoint
    ten times; the request must not be retried again (it would take minutes to fail)."""
    err = map_error(oe.GenericError(NO_ROLE), op="get_range", path="db/x.sst", url="s3://b")
    assert type(err) is CredentialsMissingError  # a configuration error: exit 2, no retry
    assert exit_code_for(err) == 2
    text = str(err)
    assert text.startswith("s3://b: no S3 credentials")
    assert "SLATELIB_S3_ACCESS_KEY_ID" in text and "--env-file" in text
    assert "spark.executorEnv" in text and "get_range 'db/x.sst': Generic S3 error" in text
    # a plain connection failure to the endpoint stays transient
    assert type(map_error(oe.GenericError(CONNECT), op="get", path="x", url="s3://b")) \
        is UnavailableError
