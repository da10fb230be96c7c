"""The export target as files: what is there, and the Parquet files an export wrote.

Targets are URLs that pyarrow's file systems open (``file:///...``, ``s3://bucket/...``, or a
local path). Listing skips hidden and bookkeeping entries (names starting with ``_`` or
``.``: ``_delta_log/``, ``_SUCCESS``, Spark's ``_temporary/``), so the Parquet files found
are the data files; their row counts come from the Parquet footers.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow.fs as pafs  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]

from slatelib.errors import InvalidArgumentError, StorageError

ABSENT = "absent"
EMPTY = "empty"
DELTA = "delta"
OTHER = "other"
DELTA_LOG = "_delta_log"


@dataclass(frozen=True)
class DataFile:
    """A Parquet file below the target root: its path relative to the root, size, rows and
    modification time (Unix ms)."""

    path: str
    size: int
    rows: int
    mtime_ms: int


def open_target(uri: str) -> tuple[pafs.FileSystem, str]:
    """The file system and root path of a target URL.

    Raises:
        InvalidArgumentError: a URL pyarrow cannot open.
    """
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
    visible = [e for e in entries if not e.base_name.startswith((".", "_"))]
    return EMPTY if not visible else OTHER


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
