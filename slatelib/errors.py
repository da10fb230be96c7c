"""The whole slatelib exception hierarchy.

Only the kinds are API; message text is not. Each kind tells the caller what to do:

    SlateError
    ├── InvalidArgumentError      fix the call, the path or the config
    │   └── ExecutorEnvironmentError  Spark executors lack slatelib, run another build of
    │                                 it, or cannot start their Python
    ├── DataError                 persisted state is unreadable or incompatible
    │   ├── CorruptObjectError    bytes do not decode (truncated, bad flatbuffer, bad block)
    │   │   └── ChecksumMismatchError
    │   ├── UnsupportedFormatVersionError
    │   ├── UnsupportedFeatureError   valid 0.17 data that slatelib does not handle yet
    │   ├── WalStoreMissingError  the manifest's WAL tail is not in the store read (a
    │   │                         separate WAL store was not given, or the wrong one)
    │   └── ObjectMissingError
    │       ├── ManifestMissingError
    │       │   └── NotADatabaseRootError   no manifest under the path, or it is a file
    │       ├── SstMissingError
    │       └── PathIsFileError   a folder of the object's path is a file (local disk)
    ├── ConflictError             lost a CAS race: refresh and retry
    │   ├── AlreadyExistsError    a create-if-absent put found the object there
    │   └── FencedError           a newer writer/compactor epoch exists: stop, never retry
    ├── InvalidDbStateError       the database is not in a state that allows this operation
    │   ├── CompactorActiveError  another compactor may be running: compaction will not fence it
    │   └── WriterActiveError     a writer may be live: a rescale will not clone (or fence) it
    ├── UnavailableError          transient storage or network fault: back off and retry
    ├── StorageError              non-transient storage failure (permission, unsupported op)
    ├── CommitStateUnknownError   outcome unknown: re-read before any cleanup
    └── InternalError             a bug in slatelib
"""

from __future__ import annotations


class SlateError(Exception):
    """Base class of every error slatelib raises on purpose."""


class InvalidArgumentError(SlateError, ValueError):
    """A caller passed something invalid: a bad path, option, key or config value."""


class ExecutorEnvironmentError(InvalidArgumentError):
    """Spark executors cannot run the job's tasks: slatelib is missing there or is not the
    driver's build, or their Python (``spark.pyspark.python``) cannot be started. A fix of
    the deployment, not of the data: nothing was written by the tasks that failed."""


class CredentialsMissingError(InvalidArgumentError):
    """An object store needed credentials and none were configured (the cloud's credential
    chain found nothing): a configuration error (exit 2), never retried."""


class DataError(SlateError):
    """Persisted state is unreadable or incompatible with this implementation."""


class CorruptObjectError(DataError):
    """An object's bytes do not decode (truncated, malformed flatbuffer, bad block)."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        self.path = path
        super().__init__(f"{path}: {message}" if path else message)


class ChecksumMismatchError(CorruptObjectError):
    """A stored CRC-32 does not match the bytes it covers."""

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        region: str | None = None,
        block: int | None = None,
    ) -> None:
        self.region = region
        self.block = block
        super().__init__(message, path=path)


class UnsupportedFormatVersionError(DataError):
    """A format version byte that 0.17.0 does not know either."""


class UnsupportedFeatureError(DataError):
    """Valid SlateDB data that this version of slatelib refuses to process (e.g. segments)."""


class ObjectMissingError(DataError):
    """An object that must exist does not."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        self.path = path
        super().__init__(message)


class ManifestMissingError(ObjectMissingError):
    """No manifest (at all, or with the requested id)."""


class NotADatabaseRootError(ManifestMissingError):
    """No database is (or can be) at ``root``: there is no manifest under it, or ``root``
    or a folder above it is a file (``file``). Opening and creating refuse alike.

    ``path`` is ``root``.
    """

    def __init__(self, root: str, *, file: str | None = None, detail: str = "") -> None:
        self.root = root
        self.file = file
        where = repr(root or "the store root")
        if file is not None and file == root:
            text = f"{where} is a file, not a database root"
        elif file is not None:
            text = f"{where} is not a database root: {file!r} is a file, not a directory"
        else:
            text = f"no manifest under {where}: not a database root"
        super().__init__(text + detail, path=root)


class WalStoreMissingError(DataError):
    """The manifest lists WAL SSTs after ``replay_after_wal_id`` and the store being read
    holds none of them: the database keeps its WAL in an object store that was not given
    (0.17's ``with_wal_object_store``), or the wrong one was. ``first``..``last`` are the
    WAL ids, ``where`` the WAL directory that was looked in. Nothing was written.

    Not an :class:`ObjectMissingError`: replay treats those as the end of the WAL, and this
    must never be taken for that.
    """

    def __init__(self, message: str, *, first: int, last: int, where: str) -> None:
        self.first = first
        self.last = last
        self.where = where
        super().__init__(message)


class SstMissingError(ObjectMissingError):
    """An SST referenced by a manifest is missing from the store."""


class PathIsFileError(ObjectMissingError):
    """An object path runs through a file: ``file``, a folder of the path on the local file
    system, is a regular file (None when it could not be identified). Nothing exists below a
    file, and nothing can be written there.

    ``path`` is the object path that was asked for.
    """

    def __init__(self, message: str, *, path: str | None = None,
                 file: str | None = None) -> None:
        self.file = file
        super().__init__(message, path=path)


class ConflictError(SlateError):
    """Lost a compare-and-swap race. Refresh state and retry."""


class AlreadyExistsError(ConflictError):
    """A create-if-absent put found an object already at the path."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        self.path = path
        super().__init__(message)


class FencedError(ConflictError):
    """A newer writer or compactor owns the database. Never retry."""


class InvalidDbStateError(SlateError):
    """The database state forbids the operation (uninitialized, destroyed, live checkpoints)."""


class CompactorActiveError(InvalidDbStateError):
    """Another compactor (0.17's embedded or standalone one, or a coordinator) may be running
    on the database, and fencing it would stop it (an embedded compactor's whole ``Db`` with
    it). Compaction refuses before its first write; ``--takeover`` overrides once the other
    compactor is turned off."""


class WriterActiveError(InvalidDbStateError):
    """A source's writer may be live (recent WAL or manifest writes, an unexpired slatelib
    writer checkpoint): a rescale would miss every write after its checkpoint. Refused
    before the first write; ``--fence-source`` or ``--allow-live-source`` override."""


class UnavailableError(SlateError):
    """A transient storage or network fault. Safe to retry with backoff."""


class StorageError(SlateError):
    """A storage failure that retrying will not fix (permission denied, unsupported op)."""


class CommitStateUnknownError(SlateError):
    """A write's outcome is unknown. Re-read state before any cleanup."""


class InternalError(SlateError):
    """A bug in slatelib."""


class MergeOperatorMissingError(InvalidArgumentError):
    """A key holds merge operands but no merge operator is configured."""

    def __init__(self, key: bytes) -> None:
        self.key = key
        super().__init__(
            f"key {key.hex()} ({key!r}) has merge operands but no merge operator is configured "
            "(give the database's: --merge-operator NAME of slate and jobs/export.py, "
            "[compaction] merge_operator, merge_operator= in Python or the data source; a "
            "builtin such as concat, or package.module:attr)"
        )
