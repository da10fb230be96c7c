"""Parquet files written by pyarrow, one per read partition, committed as a set. Spark-free.

The opt-in ``--parquet-writer arrow`` of the export (design:
docs/rfcs/0011-spark-datasource-and-export.md, "Export throughput"): Spark's Parquet writer
takes the data source's Arrow batches in as rows, and that row path alone costs most of the
benchmark's budget; here each task writes its partition's batches as they come.

Commit protocol: every task writes one file, named after the job and its partition index
(:func:`part_name`), into a staging folder inside the target whose name starts with ``_``
(so listings and readers skip it, :mod:`slatelib.ops.export.files`); a retried task replaces
its own file. Only when every task succeeded does :func:`commit_parts` move the files into
the target (``overwrite``: after removing the target's visible entries; ``append``: beside
them) and write ``_SUCCESS``. :func:`abort` removes the staging folder. A crash between the
removal of the old files and the last move leaves a partial overwrite, as Spark's own
``FileOutputCommitter`` can.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.fs as pafs  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]

from slatelib.errors import InvalidArgumentError, StorageError
from slatelib.ops.export.files import delete_dir, open_target

STAGING_PREFIX = "_slatelib_staging_"
MODES = ("overwrite", "append")
SUCCESS = "_SUCCESS"


def part_name(job: str, index: int) -> str:
    """The file name of partition ``index`` of export ``job``."""
    return f"part-{index:05d}-{job}.snappy.parquet"


def staging_dir(job: str) -> str:
    """The staging folder of export ``job``, relative to the target root."""
    return f"{STAGING_PREFIX}{job}"


def write_part(uri: str, job: str, index: int, schema: pa.Schema,
               batches: Iterable[pa.RecordBatch]) -> int:
    """Write ``batches`` (of ``schema``) as partition ``index``'s file in ``job``'s staging
    folder (snappy, pyarrow's defaults otherwise: dictionary and statistics on); returns
    the rows written. A partition with no rows still gets a file (it carries the schema).

    Raises:
        InvalidArgumentError: a URL pyarrow cannot open, or a batch of another schema.
        StorageError: the file cannot be written.
    """
    fs, root = open_target(uri)
    folder = f"{root}/{staging_dir(job)}"
    path = f"{folder}/{part_name(job, index)}"
    rows = 0
    try:
        fs.create_dir(folder, recursive=True)
        with fs.open_output_stream(path) as out, \
                pq.ParquetWriter(out, schema, compression="snappy") as writer:
            for batch in batches:
                if not batch.schema.equals(schema):
                    raise InvalidArgumentError(
                        f"partition {index} of export {job}: a batch of schema "
                        f"{batch.schema} where {schema} was expected")
                writer.write_batch(batch)
                rows += batch.num_rows
    except OSError as exc:
        raise StorageError(f"export target {uri!r}: writing {path}: {exc}") from exc
    return rows


def commit_parts(uri: str, job: str, indexes: Sequence[int], mode: str) -> list[str]:
    """Move the staged files of ``indexes`` into the target (see the module docstring);
    returns their paths relative to the target root.

    Raises:
        InvalidArgumentError: an unknown mode, or a staged file is missing (a task did not
            finish: nothing is moved).
        StorageError: listing, deleting or moving fails.
    """
    if mode not in MODES:
        raise InvalidArgumentError(f"mode must be one of {MODES}, got {mode!r}")
    fs, root = open_target(uri)
    folder = f"{root}/{staging_dir(job)}"
    names = [part_name(job, i) for i in indexes]
    try:
        staged = fs.get_file_info([f"{folder}/{n}" for n in names])
        missing = [n for n, info in zip(names, staged, strict=True)
                   if info.type != pafs.FileType.File]
        if missing:
            raise InvalidArgumentError(
                f"export {job}: staged file(s) {missing} missing under {uri}; nothing moved")
        if mode == "overwrite":
            for entry in fs.get_file_info(pafs.FileSelector(root)):
                if entry.base_name.startswith(("_", ".")) and entry.base_name != SUCCESS:
                    continue
                if entry.type == pafs.FileType.Directory:
                    fs.delete_dir(entry.path)
                else:
                    fs.delete_file(entry.path)
        for n in names:
            fs.move(f"{folder}/{n}", f"{root}/{n}")
        fs.delete_dir(folder)
        with fs.open_output_stream(f"{root}/{SUCCESS}"):
            pass
    except OSError as exc:
        raise StorageError(f"export target {uri!r}: committing export {job}: {exc}") from exc
    return names


def abort(uri: str, job: str) -> None:
    """Best-effort removal of ``job``'s staging folder (nothing of it was committed)."""
    delete_dir(uri, staging_dir(job))


__all__ = ["MODES", "STAGING_PREFIX", "SUCCESS", "abort", "commit_parts", "part_name",
           "staging_dir", "write_part"]
