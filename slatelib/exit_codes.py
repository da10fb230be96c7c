"""The one table of process exit codes, shared by ``slate`` and every job.

Each code names what an operator or a retry policy should do next::

    0  success            done
    1  error              anything else (a bug, an unexpected library error)
    2  invalid_input      fix the command line, the path or the configuration (also: an
                          object store that needs credentials and was given none)
    3  fenced             a newer writer or compactor took over: stop, never retry
    4  conflict           lost a race (a source disappeared, the commit kept conflicting)
    5  data_error         damaged, missing or unsupported data, or not a database root
    6  io_failure         storage unavailable or failing (retry with backoff), or an
                          outcome that stayed unknown
    7  compactor_active   another compactor may be running on the database: compaction
                          refuses to fence it (run it in worker mode, or pass --takeover
                          once the other compactor is turned off)

:func:`exit_code_for` maps an exception to its code; :data:`EXIT_NAMES` gives the name that
job reports print as a database's ``status``.
"""

from __future__ import annotations

from slatelib.errors import (
    CommitStateUnknownError,
    CompactorActiveError,
    ConflictError,
    DataError,
    FencedError,
    InvalidArgumentError,
    InvalidDbStateError,
    StorageError,
    UnavailableError,
)

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_FENCED = 3
EXIT_CONFLICT = 4
EXIT_DATA = 5
EXIT_UNAVAILABLE = 6
EXIT_COMPACTOR_ACTIVE = 7

EXIT_NAMES: dict[int, str] = {
    EXIT_OK: "success",
    EXIT_ERROR: "error",
    EXIT_USAGE: "invalid_input",
    EXIT_FENCED: "fenced",
    EXIT_CONFLICT: "conflict",
    EXIT_DATA: "data_error",
    EXIT_UNAVAILABLE: "io_failure",
    EXIT_COMPACTOR_ACTIVE: "compactor_active",
}

# Most specific first: an error matches the first kind it is an instance of.
_BY_KIND: tuple[tuple[type[BaseException], int], ...] = (
    (CompactorActiveError, EXIT_COMPACTOR_ACTIVE),
    (FencedError, EXIT_FENCED),
    (ConflictError, EXIT_CONFLICT),
    (InvalidArgumentError, EXIT_USAGE),
    (DataError, EXIT_DATA),
    (InvalidDbStateError, EXIT_DATA),
    (UnavailableError, EXIT_UNAVAILABLE),
    (StorageError, EXIT_UNAVAILABLE),
    (CommitStateUnknownError, EXIT_UNAVAILABLE),
)


def exit_code_for(exc: BaseException) -> int:
    """The exit code of a run that failed with ``exc`` (1 for anything unclassified)."""
    for kind, code in _BY_KIND:
        if isinstance(exc, kind):
            return code
    return EXIT_ERROR


def exit_name(code: int) -> str:
    """The report name of ``code`` (``"error"`` for a code outside the table)."""
    return EXIT_NAMES.get(code, "error")
