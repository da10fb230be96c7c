"""The export target as files: what is there, and the Parquet files an export wrote.

Targets are URLs that pyarrow's file systems open (``file:///...`` or a local path), or S3
targets (``s3://bucket/...``, ``s3a://bucket/...``), opened with pyarrow's S3 file system
configured from the S3 settings of slatelib's own stores
(:mod:`slatelib.ops.export.s3_target`); a missing bucket is refused by :func:`target_state`. Listing skips hidden and bookkeeping entries (names starting with ``_`` or
``.``: ``_delta_log/``, ``_SUCCESS``, Spark's ``_temporary/``), so the Parquet files found
are the data files; their row counts come from the Parquet footers.

An incremental export stages its change rows as Parquet in a hidden folder of the target
(:func:`new_changes_dir`: ``_slatelib-changes-<16 hex>``), invisible to the listing above,
to Delta readers and to ``VACUUM``; :func:`staged_files`, :func:`read_staged` and
:func:`count_values` read it back batch by batch, never as one table.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]
import pyarrow.fs as pafs  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]

from slatelib.errors import InvalidArgumentError, StorageError
from slatelib.objstore.registry import s3_access
from slatelib.ops.export.s3_target import split_s3_target, target_filesystem

ABSENT = "absent"
EMPTY = "empty"
DELTA = "delta"
OTHER = "other"
DELTA_LOG = "_delta_log"
CHANGES_PREFIX = "_slatelib-changes-"
"""Name prefix of an incremental export's staging folder inside the target."""
STAGED_BATCH_ROWS = 65_536
"""Rows per batch when staged change files are read back."""


@dataclass(frozen=True)
class DataFile:
    """A Parquet file below the target root: its path relative to the root, size, rows and
    modification time (Unix ms)."""

    path: str
    size: int
    rows: int
    mtime_ms: int


def open_target(uri: str) -> tuple[pafs.FileSystem, str]:
    """The file system and root path of a target URL: an S3 target (``s3://``, ``s3a://``)
    through pyarrow's S3 file system configured as slatelib's own S3 stores are
    (:mod:`slatelib.ops.export.s3_target`), anything else as pyarrow opens it.

    Raises:
        InvalidArgumentError: a URL pyarrow cannot open, or malformed S3 settings.
    """
    s3 = split_s3_target(uri)
    if s3 is not None:
        bucket, key = s3
        return target_filesystem(s3_access()), f"{bucket}/{key}".rstrip("/")
    try:
        fs, root = pafs.FileSystem.from_uri(uri)
    except (ValueError, OSError) as exc:
        raise InvalidArgumentError(f"export target {uri!r}: {exc}") from exc
    return fs, root.rstrip("/")


def _hidden(rel: str) -> bool:
    return any(part.startswith(("_", ".")) for part in rel.split("/"))


def target_state(uri: str) -> str:
    """:data:`ABSENT`, :data:`EMPTY` (a directory with no visible entry), :data:`DELTA` (it
    has ``_delta_log/``) or :data:`OTHER` (anything else: a file, or other data).

    Raises:
        InvalidArgumentError: a URL pyarrow cannot open.
        StorageError: the target cannot be listed.
    """
    fs, root = open_target(uri)
    try:
        _check_bucket(uri, fs, root)
        info = fs.get_file_info(root)
        if info.type == pafs.FileType.NotFound:
            return ABSENT
        if info.type != pafs.FileType.Directory:
            return OTHER
        if fs.get_file_info(f"{root}/{DELTA_LOG}").type == pafs.FileType.Directory:
            return DELTA
        entries = fs.get_file_info(pafs.FileSelector(root))
    except OSError as exc:
        raise StorageError(f"export target {uri!r}: {exc}") from exc
    return directory_state(e.base_name for e in entries)


def directory_state(names: Iterable[str]) -> str:
    """A directory without ``_delta_log/`` by its entries' names: :data:`EMPTY` when every
    one is hidden (``_``/``.``: Spark's ``_SUCCESS``, an aborted ``_temporary/``), else
    :data:`OTHER`."""
    return EMPTY if all(n.startswith((".", "_")) for n in names) else OTHER


def _check_bucket(uri: str, fs: pafs.FileSystem, root: str) -> None:
    """Refuse an S3 target whose bucket is missing (the export would fail in Spark's
    tasks, after the checkpoint was made).

    Raises:
        InvalidArgumentError: no such bucket.
        OSError: the bucket cannot be read (e.g. access denied).
    """
    if not isinstance(fs, pafs.S3FileSystem):
        return
    bucket = root.split("/", 1)[0]
    if fs.get_file_info(bucket).type == pafs.FileType.NotFound:
        raise InvalidArgumentError(
            f"export target {uri!r}: bucket {bucket!r} does not exist at the S3 endpoint "
            "(SLATELIB_S3_ENDPOINT / AWS_ENDPOINT_URL / [object_store] endpoint): create it "
            "first, or check --to")


def parquet_files(uri: str, under: str = "") -> dict[str, DataFile]:
    """Every visible ``*.parquet`` file below the target (or below ``under`` inside it),
    by path relative to the target root, with its row count from the footer.

    Raises:
        InvalidArgumentError: a URL pyarrow cannot open.
        StorageError: listing or a footer fails.
    """
    fs, root = open_target(uri)
    base = f"{root}/{under.strip('/')}" if under.strip("/") else root
    try:
        if fs.get_file_info(base).type != pafs.FileType.Directory:
            return {}
        infos = fs.get_file_info(pafs.FileSelector(base, recursive=True))
        out: dict[str, DataFile] = {}
        for info in infos:
            if info.type != pafs.FileType.File or not info.path.endswith(".parquet"):
                continue
            rel = info.path[len(root):].lstrip("/")
            if _hidden(rel):
                continue
            with fs.open_input_file(info.path) as f:
                rows = pq.ParquetFile(f).metadata.num_rows
            mtime = info.mtime_ns // 1_000_000 if info.mtime_ns is not None else 0
            out[rel] = DataFile(rel, int(info.size or 0), int(rows), int(mtime))
    except OSError as exc:
        raise StorageError(f"export target {uri!r}: {exc}") from exc
    return out


def delete_dir(uri: str, under: str) -> None:
    """Best-effort removal of ``under`` inside the target (files no commit references)."""
    fs, root = open_target(uri)
    try:
        fs.delete_dir(f"{root}/{under.strip('/')}")
    except OSError:
        pass


def new_changes_dir() -> str:
    """A fresh staging folder name for one incremental export's change rows
    (:data:`CHANGES_PREFIX` + 16 random hex digits: hidden, and never an earlier run's)."""
    return f"{CHANGES_PREFIX}{uuid.uuid4().hex[:16]}"


def staged_files(uri: str, under: str) -> list[DataFile]:
    """Every ``*.parquet`` file below ``under`` (a staging folder, hidden or not) inside
    the target, sorted by path, with row counts from the footers.

    Raises:
        InvalidArgumentError: a URL pyarrow cannot open, or an empty ``under``.
        StorageError: listing or a footer fails.
    """
    if not under.strip("/"):
        raise InvalidArgumentError(f"export target {uri!r}: no staging folder given")
    fs, root = open_target(uri)
    base = f"{root}/{under.strip('/')}"
    try:
        if fs.get_file_info(base).type != pafs.FileType.Directory:
            return []
        out: list[DataFile] = []
        for info in fs.get_file_info(pafs.FileSelector(base, recursive=True)):
            if info.type != pafs.FileType.File or not info.path.endswith(".parquet"):
                continue
            rel = info.path[len(root):].lstrip("/")
            if _hidden(rel[len(under.strip("/")):]):  # Spark's _temporary/, .crc files
                continue
            with fs.open_input_file(info.path) as f:
                rows = pq.ParquetFile(f).metadata.num_rows
            mtime = info.mtime_ns // 1_000_000 if info.mtime_ns is not None else 0
            out.append(DataFile(rel, int(info.size or 0), int(rows), int(mtime)))
    except OSError as exc:
        raise StorageError(f"export target {uri!r}: {exc}") from exc
    return sorted(out, key=lambda f: f.path)


def _iter_batches(uri: str, files: list[DataFile], columns: list[str],
                  batch_rows: int) -> Iterator[pa.RecordBatch]:
    """``columns`` of ``files``, one file after the other, ``batch_rows`` rows at a time,
    decoding page by page (no pre-buffering of a whole row group: Spark writes row groups
    of up to 128 MiB)."""
    fs, root = open_target(uri)
    for f in files:
        with fs.open_input_file(f"{root}/{f.path}") as handle:
            parquet = pq.ParquetFile(handle, pre_buffer=False, buffer_size=1 << 20)
            yield from parquet.iter_batches(batch_size=batch_rows, columns=columns,
                                            use_threads=False)


def read_staged(uri: str, files: list[DataFile], schema: pa.Schema, *,
                batch_rows: int = STAGED_BATCH_ROWS) -> pa.RecordBatchReader:
    """A stream over the staged ``files`` (from :func:`staged_files`) with exactly
    ``schema``'s columns and types, cast batch by batch (Spark may widen types or drop
    non-null flags): about one batch of ``batch_rows`` rows (plus the Parquet pages being
    decoded) in memory at a time, whatever the total.

    Raises (while reading):
        StorageError: a file cannot be read, or lacks one of ``schema``'s columns, or a
            value does not fit ``schema`` (a null in a non-null column).
    """

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            for batch in _iter_batches(uri, files, list(schema.names), batch_rows):
                yield batch.select(schema.names).cast(schema)
        except (OSError, pa.ArrowException, KeyError, ValueError) as exc:
            raise StorageError(f"export target {uri!r}: staged change files: {exc}") from exc

    return pa.RecordBatchReader.from_batches(schema, batches())


def count_values(uri: str, files: list[DataFile], column: str) -> dict[str, int]:
    """How often each value of the string ``column`` occurs in the staged ``files``,
    reading that one column batch by batch.

    Raises:
        StorageError: a file cannot be read or lacks ``column``.
    """
    counts: dict[str, int] = {}
    try:
        for batch in _iter_batches(uri, files, [column], STAGED_BATCH_ROWS):
            if batch.num_columns != 1:
                raise KeyError(f"no column {column!r}")
            for item in pc.value_counts(batch.column(0)).to_pylist():
                value = str(item["values"])
                counts[value] = counts.get(value, 0) + int(item["counts"])
    except (OSError, pa.ArrowException, KeyError, ValueError) as exc:
        raise StorageError(f"export target {uri!r}: staged change files: {exc}") from exc
    return counts
