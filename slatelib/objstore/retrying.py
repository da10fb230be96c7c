"""RetryingObjectStore: bounded retries with exponential backoff and full jitter.

Only ``UnavailableError`` is retried; ``ConflictError`` (and ``AlreadyExistsError``),
``ObjectMissingError``, ``StorageError`` and ``InvalidArgumentError`` pass straight through.

Conditional puts need care: a ``put_if_absent`` whose response was lost may have landed,
and its retry then finds "its own" object and fails with ``AlreadyExistsError``. After an
attempt that raised ``UnavailableError``, a later ``AlreadyExistsError`` is therefore
resolved by reading the object back: the same bytes mean the earlier attempt landed
(success), other bytes mean a lost race (``AlreadyExistsError``), and a failed read-back
means nobody knows (``CommitStateUnknownError``). ``put_if_match`` is resolved the same
way, returning the ETag of the object read back. Running out of attempts on a conditional
put also raises ``CommitStateUnknownError``, because any of the failed attempts may land.

Caveat: equal bytes prove "an object with our content exists", not "we wrote it". If two
writers can race with byte-identical payloads (e.g. two processes bumping the same epoch
from the same manifest) and each needs to know that it alone won, pass
``resolve_by_content=False``: the ambiguous case then raises ``CommitStateUnknownError``.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TypeVar

from slatelib.errors import (
    CommitStateUnknownError,
    ConflictError,
    InvalidArgumentError,
    SlateError,
    UnavailableError,
)
from slatelib.objstore import accounting
from slatelib.objstore.forwarding import ForwardingStore, read_range_buffer
from slatelib.objstore.object_store import (
    BytesLike,
    ObjectMeta,
    ObjectStore,
    OpName,
    check_data,
    check_prefix,
)

_log = logging.getLogger(__name__)

T = TypeVar("T")


class RetryingObjectStore(ForwardingStore):
    """Wraps any ObjectStore and retries its transient failures.

    Args:
        inner: the store to wrap.
        max_attempts: attempts per operation (>= 1), including the first.
        base_delay_s: delay cap before the second attempt; doubles per attempt.
        max_delay_s: upper bound of any delay cap.
        sleep: how to wait (tests pass a fake; nothing sleeps on the wall clock).
        rng: source of jitter; the delay is ``rng.uniform(0, cap)`` ("full jitter").
        resolve_by_content: resolve a lost conditional-put response by comparing bytes
            (see the module docstring); False raises ``CommitStateUnknownError`` instead.

    Raises:
        InvalidArgumentError: from the constructor, for a bad setting.
    """

    def __init__(
        self,
        inner: ObjectStore,
        *,
        max_attempts: int = 5,
        base_delay_s: float = 0.1,
        max_delay_s: float = 5.0,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        resolve_by_content: bool = True,
    ) -> None:
        if max_attempts < 1:
            raise InvalidArgumentError(f"max_attempts must be >= 1, got {max_attempts}")
        if base_delay_s < 0 or max_delay_s < base_delay_s:
            raise InvalidArgumentError(
                f"need 0 <= base_delay_s <= max_delay_s, got {base_delay_s}, {max_delay_s}"
            )
        super().__init__(inner)
        self._max_attempts = max_attempts
        self._base = base_delay_s
        self._max_delay = max_delay_s
        self._sleep = sleep
        self._rng = rng if rng is not None else random.Random()
        self._resolve_by_content = resolve_by_content

    def __repr__(self) -> str:
        return f"RetryingObjectStore({self._inner!r}, max_attempts={self._max_attempts})"

    def backoff_s(self, attempt: int) -> float:
        """Delay after failed attempt number ``attempt`` (1-based)."""
        cap = min(self._max_delay, self._base * (2 ** (attempt - 1)))
        return self._rng.uniform(0.0, cap)

    def _wait(self, op: OpName, path: str, attempt: int, err: UnavailableError) -> None:
        accounting.record_retry()  # every retry passes here (docs/request-accounting.md)
        delay = self.backoff_s(attempt)
        _log.warning(
            "objstore retrying [op=%s, path=%s, attempt=%d, delay_s=%.3f, error=%s]",
            op,
            path,
            attempt,
            delay,
            err,
        )
        self._sleep(delay)

    def _retry(self, op: OpName, path: str, fn: Callable[[], T]) -> T:
        attempt = 1
        while True:
            try:
                return fn()
            except UnavailableError as err:
                if attempt >= self._max_attempts:
                    raise
                self._wait(op, path, attempt, err)
                attempt += 1

    # -- idempotent operations -------------------------------------------------------------

    def get(self, path: str) -> bytes:
        """Retried :meth:`ObjectStore.get`.

        Raises:
            ObjectMissingError: no object at ``path``.
            UnavailableError: still failing after ``max_attempts``.
        """
        return self._retry("get", path, lambda: self._inner.get(path))

    def get_with_meta(self, path: str) -> tuple[bytes, ObjectMeta]:
        """Retried :meth:`ObjectStore.get_with_meta`.

        Raises:
            ObjectMissingError: no object at ``path``.
            UnavailableError: still failing after ``max_attempts``.
        """
        return self._retry("get_with_meta", path, lambda: self._inner.get_with_meta(path))

    def get_range(self, path: str, start: int, end: int) -> bytes:
        """Retried :meth:`ObjectStore.get_range`.

        Raises:
            ObjectMissingError: no object at ``path``.
            UnavailableError: still failing after ``max_attempts``.
        """
        return self._retry("get_range", path, lambda: self._inner.get_range(path, start, end))

    def get_range_buffer(self, path: str, start: int, end: int) -> memoryview | bytes:
        """Retried :func:`~slatelib.objstore.forwarding.read_range_buffer` of the inner store.

        Raises:
            ObjectMissingError: no object at ``path``.
            UnavailableError: still failing after ``max_attempts``.
        """
        return self._retry("get_range", path,
                           lambda: read_range_buffer(self._inner, path, start, end))

    def get_ranges(self, path: str, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """Retried :meth:`ObjectStore.get_ranges`.

        Raises:
            ObjectMissingError: no object at ``path``.
            UnavailableError: still failing after ``max_attempts``.
        """
        return self._retry("get_ranges", path, lambda: self._inner.get_ranges(path, ranges))

    def head(self, path: str) -> ObjectMeta:
        """Retried :meth:`ObjectStore.head`.

        Raises:
            ObjectMissingError: no object at ``path``.
            UnavailableError: still failing after ``max_attempts``.
        """
        return self._retry("head", path, lambda: self._inner.head(path))

    def put(self, path: str, data: BytesLike) -> None:
        """Retried :meth:`ObjectStore.put` (an overwrite is idempotent).

        Raises:
            UnavailableError: still failing after ``max_attempts``.
        """
        self._retry("put", path, lambda: self._inner.put(path, data))

    def delete(self, path: str) -> None:
        """Retried :meth:`ObjectStore.delete` (idempotent).

        Raises:
            UnavailableError: still failing after ``max_attempts``.
        """
        self._retry("delete", path, lambda: self._inner.delete(path))

    def delete_many(self, paths: Iterable[str]) -> None:
        """Retried :meth:`ObjectStore.delete_many` (idempotent; retries the whole batch).

        Raises:
            InvalidArgumentError: ``paths`` is a str or holds an invalid path.
            UnavailableError: still failing after ``max_attempts``.
        """
        if isinstance(paths, str):
            raise InvalidArgumentError("delete_many takes an iterable of paths, not a str")
        batch = list(paths)
        first = batch[0] if batch else ""
        self._retry("delete_many", first, lambda: self._inner.delete_many(batch))

    def list(
        self, prefix: str, *, start_after: str | None = None, end_before: str | None = None
    ) -> Iterator[ObjectMeta]:
        """:meth:`ObjectStore.list` that resumes after the last path it yielded when the
        listing fails part way (listings are sorted, so nothing is repeated or skipped).

        Raises:
            InvalidArgumentError: invalid prefix (checked at once; the rest is lazy).
            UnavailableError: still failing after ``max_attempts`` consecutive failures.
        """
        check_prefix(prefix)
        return self._list(prefix, start_after, end_before)

    def _list(
        self, prefix: str, start_after: str | None, end_before: str | None
    ) -> Iterator[ObjectMeta]:
        attempt = 1
        resume = start_after
        while True:
            try:
                for meta in self._inner.list(prefix, start_after=resume, end_before=end_before):
                    resume = meta.path
                    attempt = 1
                    yield meta
                return
            except UnavailableError as err:
                if attempt >= self._max_attempts:
                    raise
                self._wait("list", prefix, attempt, err)
                attempt += 1

    # -- conditional puts ------------------------------------------------------------------

    def put_if_absent(self, path: str, data: BytesLike) -> None:
        """:meth:`ObjectStore.put_if_absent` with retries and lost-response resolution.

        Raises:
            AlreadyExistsError: another writer's object is at ``path``.
            CommitStateUnknownError: whether our object landed cannot be established.
        """
        payload = check_data(data)

        def attempt() -> str | None:
            self._inner.put_if_absent(path, payload)
            return None

        self._conditional("put_if_absent", path, payload, attempt)

    def put_if_match(self, path: str, data: BytesLike, e_tag: str | None) -> str | None:
        """:meth:`ObjectStore.put_if_match` with retries and lost-response resolution.

        Raises:
            ConflictError: the ETag did not match (``AlreadyExistsError`` for a create).
            CommitStateUnknownError: whether our object landed cannot be established.
            StorageError: the backend cannot do conditional updates.
        """
        payload = check_data(data)
        return self._conditional(
            "put_if_match", path, payload, lambda: self._inner.put_if_match(path, payload, e_tag)
        )

    def _conditional(
        self, op: OpName, path: str, payload: bytes, fn: Callable[[], str | None]
    ) -> str | None:
        uncertain: UnavailableError | None = None
        for attempt in range(1, self._max_attempts + 1):
            try:
                return fn()
            except UnavailableError as err:
                uncertain = err
                if attempt < self._max_attempts:
                    self._wait(op, path, attempt, err)
            except ConflictError as conflict:
                if uncertain is None:
                    raise
                return self._resolve(op, path, payload, conflict)
        raise CommitStateUnknownError(
            f"{self.url}: {op} {path!r}: no answer after {self._max_attempts} attempts; "
            "an attempt may still have written the object"
        ) from uncertain

    def _resolve(
        self, op: OpName, path: str, payload: bytes, conflict: ConflictError
    ) -> str | None:
        """After a lost response then a conflict: did one of our attempts land?"""
        if not self._resolve_by_content:
            raise CommitStateUnknownError(
                f"{self.url}: {op} {path!r}: conflict after a lost response; "
                "our earlier attempt may be the object found there"
            ) from conflict
        try:
            current, meta = self.get_with_meta(path)
        except SlateError as err:
            raise CommitStateUnknownError(
                f"{self.url}: {op} {path!r}: conflict after a lost response, and reading the "
                f"object back failed: {err}"
            ) from err
        if current == payload:
            _log.info("objstore lost response resolved as success [op=%s, path=%s]", op, path)
            return meta.e_tag
        raise conflict


def put_if_absent_unique(store: ObjectStore, path: str, data: BytesLike) -> None:
    """``put_if_absent`` for payloads that only this caller can produce (a fresh ULID's
    SST, a WAL SST holding this writer's rows): an unknown outcome is resolved by reading
    the object back and comparing bytes.

    Raises:
        AlreadyExistsError: another object is at ``path``.
        CommitStateUnknownError: the outcome stays unknown (the read-back failed too).
    """
    from slatelib.errors import AlreadyExistsError, ObjectMissingError

    payload = bytes(data)
    try:
        store.put_if_absent(path, payload)
        return
    except CommitStateUnknownError as exc:
        unknown = exc
    try:
        landed = store.get(path)
    except ObjectMissingError:
        store.put_if_absent(path, payload)
        return
    except UnavailableError as exc:
        raise CommitStateUnknownError(f"{path}: outcome of create unknown") from exc
    if landed != payload:
        raise AlreadyExistsError(f"{path} exists with other content", path=path) from unknown
