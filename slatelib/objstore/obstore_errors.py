"""Translation of obstore (and builtin) exceptions into the ``slatelib.errors`` hierarchy.

obstore raises its own classes (``obstore.exceptions.*``), a few builtins
(``FileNotFoundError`` for a missing object, ``NotImplementedError`` for an unsupported
operation, ``ValueError`` for a bad path or range) and, on a bug in the Rust code, a
``pyo3_runtime.PanicException`` (a ``BaseException``). Network failures, 5xx responses
and throttling all arrive as ``GenericError`` whose message is the only clue, so
:func:`is_transient_message` looks for the markers that reqwest/object_store print.
"""

from __future__ import annotations

import errno
import re
from typing import Literal

import obstore.exceptions as oe

from slatelib.errors import (
    AlreadyExistsError,
    ConflictError,
    CredentialsMissingError,
    InternalError,
    InvalidArgumentError,
    ObjectMissingError,
    PathIsFileError,
    SlateError,
    StorageError,
    UnavailableError,
)

Op = Literal[
    "open",
    "get",
    "get_with_meta",
    "get_range",
    "get_ranges",
    "head",
    "put",
    "put_if_absent",
    "put_if_match",
    "list",
    "delete",
    "delete_many",
]

_WRITE_OPS = frozenset({"put", "put_if_absent", "put_if_match", "delete", "delete_many"})

_TRANSIENT = re.compile(
    r"error sending request|connection (refused|reset|closed|aborted)|connect error"
    r"|kind: connect|timed out|(?<!retry_)timeout|dns error|broken pipe|unexpected eof"
    r"|incomplete message|error decoding response body|body error|status code: (5\d\d|429|408)"
    r"|slow ?down|throttl|too many requests|requesttimeout|service unavailable"
    r"|internalerror|temporarily unavailable",
    re.IGNORECASE,
)

_NO_CREDENTIALS = re.compile(
    r"169\.254\.169\.254|169\.254\.170\.2|fd00:ec2::254|error getting credentials"
    r"|failed to (get|load|fetch) credentials|no credentials",
    re.IGNORECASE,
)
"""The credential chain failed (instance metadata, ECS or web identity endpoint): obstore
has already retried the fetch itself, and no retry of the request will find credentials."""

NO_CREDENTIALS_HINT = (
    "no S3 credentials were given to this process, and the cloud's credential endpoint "
    "(instance metadata) gave none. Give them with SLATELIB_S3_ACCESS_KEY_ID and "
    "SLATELIB_S3_SECRET_ACCESS_KEY (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY) in the "
    "environment, or in a dotenv file passed with --env-file, or as the store options "
    "access_key_id/secret_access_key; on Spark executors pass --env-file or "
    "spark.executorEnv.*; on a cloud machine, attach a role")
"""What a credentials failure tells the user to do (a configuration error, exit 2)."""

_MISSING_CONTAINER = re.compile(r"NoSuchBucket|ContainerNotFound|bucket does not exist", re.I)

_NOT_A_DIRECTORY = re.compile(r"Not a directory \(os error 20\)|kind: NotADirectory")

_TRANSIENT_ERRNOS = frozenset({errno.EAGAIN, errno.EINTR, errno.EBUSY, errno.ETIMEDOUT})


def is_transient_message(message: str) -> bool:
    """True when an error message names a timeout, a connection failure, a 5xx/429/408
    status or throttling (only the text before obstore's ``Debug source:`` is read)."""
    return _TRANSIENT.search(message.split("Debug source:", 1)[0]) is not None


def is_credentials_failure(message: str) -> bool:
    """True when an error message says the credential chain could not get credentials
    (e.g. no role and no keys: the instance metadata endpoint unreachable)."""
    return _NO_CREDENTIALS.search(message.split("Debug source:", 1)[0]) is not None


def is_not_a_directory(exc: BaseException) -> bool:
    """True when the local file system refused ``exc``'s operation because a folder of the
    path is a regular file (``ENOTDIR``)."""
    if isinstance(exc, OSError) and exc.errno == errno.ENOTDIR:
        return True
    return isinstance(exc, oe.BaseError) and _NOT_A_DIRECTORY.search(str(exc)) is not None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.split("\n", 1)[0][:500] if text else type(exc).__name__


def map_error(exc: BaseException, *, op: Op, path: str, url: str) -> SlateError:
    """The ``slatelib.errors`` exception that stands for ``exc``, raised by ``op`` on
    ``path`` in the store at ``url``. The caller raises it ``from exc``.

    Returns ``exc`` itself when it already is a ``SlateError``.
    """
    if isinstance(exc, SlateError):
        return exc
    if is_not_a_directory(exc):
        # Not a storage failure: nothing exists below a file, and retrying will not help.
        return PathIsFileError(f"{url}: {op} {path!r}: a folder of the path is a file, not a "
                               "directory", path=path)
    msg = f"{url}: {op} {path!r}: {_first_line(exc)}"
    if isinstance(exc, FileNotFoundError):
        if op in _WRITE_OPS or op == "list" or is_missing_container(exc):
            return StorageError(f"{msg} (bucket, container or root directory missing?)")
        return ObjectMissingError(msg, path=path)
    if isinstance(exc, oe.AlreadyExistsError):
        return AlreadyExistsError(msg, path=path)
    if isinstance(exc, oe.PreconditionError | oe.NotModifiedError):
        if op == "put_if_absent":
            return AlreadyExistsError(msg, path=path)
        return ConflictError(msg)
    if isinstance(exc, oe.PermissionDeniedError | oe.UnauthenticatedError | PermissionError):
        if is_credentials_failure(str(exc)):
            return CredentialsMissingError(f"{url}: {NO_CREDENTIALS_HINT} (the store said: {msg})")
        return StorageError(msg)
    if isinstance(exc, oe.NotSupportedError | NotImplementedError):
        return StorageError(f"{msg} (not supported by this backend)")
    if isinstance(exc, oe.UnknownConfigurationKeyError):
        return InvalidArgumentError(msg)
    if isinstance(exc, oe.InvalidPathError):
        return InvalidArgumentError(msg)
    if isinstance(exc, oe.JoinError):
        return InternalError(msg)
    if isinstance(exc, oe.BaseError) and is_credentials_failure(str(exc)):
        return CredentialsMissingError(f"{url}: {NO_CREDENTIALS_HINT} (the store said: {msg})")
    if isinstance(exc, oe.BaseError):
        # GenericError and anything newer: only the message tells transient from not.
        return UnavailableError(msg) if is_transient_message(str(exc)) else StorageError(msg)
    if isinstance(exc, TimeoutError | ConnectionError):
        return UnavailableError(msg)
    if isinstance(exc, OSError):
        if exc.errno in _TRANSIENT_ERRNOS:
            return UnavailableError(msg)
        return StorageError(msg)
    if isinstance(exc, ValueError):
        return InvalidArgumentError(msg)
    return InternalError(f"{msg} (unexpected {type(exc).__module__}.{type(exc).__name__})")


def is_missing_container(exc: BaseException) -> bool:
    """True when a not-found error is about the bucket or container, not an object."""
    return _MISSING_CONTAINER.search(str(exc)) is not None


def is_panic(exc: BaseException) -> bool:
    """True for pyo3's ``PanicException`` (a Rust panic inside obstore)."""
    return type(exc).__name__ == "PanicException"
