"""Creating objects that only this writer can produce (WAL SSTs, fresh-ULID L0 SSTs)."""

from __future__ import annotations

import logging

from slatelib.clock import Clock
from slatelib.errors import AlreadyExistsError, CommitStateUnknownError, UnavailableError
from slatelib.objstore import ObjectStore

log = logging.getLogger(__name__)

UPLOAD_ATTEMPTS = 4
_BASE_DELAY_S = 0.1


def put_new_object(
    store: ObjectStore, path: str, data: bytes, *, clock: Clock, attempts: int = UPLOAD_ATTEMPTS
) -> None:
    """Create ``path`` holding ``data`` with create-if-absent, retrying transient failures.

    After an attempt whose outcome is unknown, finding an object there is resolved by
    reading it back: the same bytes are ours (the payload is unique to this writer: a WAL
    SST with our sequence numbers, an SST under a fresh ULID), other bytes mean the path
    was taken by someone else.

    Raises:
        AlreadyExistsError: another object is at ``path``.
        UnavailableError / CommitStateUnknownError: still failing after ``attempts``.
    """
    uncertain = False
    for attempt in range(1, attempts + 1):
        try:
            store.put_if_absent(path, data)
            return
        except AlreadyExistsError:
            if uncertain and store.get(path) == data:
                log.info("upload landed despite a lost response [path=%s]", path)
                return
            raise
        except (UnavailableError, CommitStateUnknownError) as exc:
            uncertain = True
            if attempt >= attempts:
                raise
            log.warning("upload failed, retrying [path=%s, attempt=%d, error=%s]", path, attempt, exc)
            clock.sleep(_BASE_DELAY_S * (2 ** (attempt - 1)))
