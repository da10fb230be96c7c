"""The options of the ``slatedb`` Spark data source, parsed and checked. Pure (no Spark).

| option | meaning |
|---|---|
| ``db`` | database URL (required), e.g. ``s3://bucket/tenants/a/db`` |
| ``store_root`` | the URL the store was opened at when the database was created, if it is not the bucket (``file:///``): clones name their sources relative to it |
| ``wal_store`` | the URL of the object store that keeps the database's WAL (0.17's ``with_wal_object_store``); the database path is the same in it |
| ``checkpoint`` | a checkpoint id to read; without one a temporary checkpoint is created (``checkpoint_lifetime``) and deleted once every partition is read |
| ``since_checkpoint`` | read the changes from this (older) checkpoint to the one read: a ``_change`` column (``upsert`` / ``delete``) first, one row per changed key (deletes carry the old row) |
| ``checkpoint_lifetime`` | lifetime of that temporary checkpoint (default ``1h``) |
| ``start`` / ``end`` | read keys in ``[start, end)``; plain text or ``hex:...`` |
| ``merge_operator`` | ``concat`` or ``package.module:attr`` (needed when the database holds merge operands) |
| ``columns`` | ``key,value`` (default), any of ``seq``, ``expire_ts``, ``create_ts``, or ``all`` |
| ``decode`` | ``binary`` (default) or ``utf8``: keys and values as text |
| ``partitions`` | how many byte-balanced key ranges at most (default ``8``) |
| ``min_partition_bytes`` | no range below this many input bytes (default 16 MiB) |
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from slatelib.config import parse_duration
from slatelib.core.ranges import BytesRange
from slatelib.errors import InvalidArgumentError
from slatelib.ids import parse_uuid
from slatelib.objstore.url import join_store_url, split_db_url, split_store_url
from slatelib.ops.export.arrow_rows import DECODINGS, parse_columns
from slatelib.ops.export.scan import DEFAULT_MIN_PARTITION_BYTES

OPTIONS = ("db", "store_root", "wal_store", "checkpoint", "since_checkpoint", "checkpoint_lifetime", "start", "end",
           "merge_operator", "columns", "decode", "partitions", "min_partition_bytes")
DEFAULT_PARTITIONS = 8
DEFAULT_LIFETIME = "1h"


def parse_key(text: str, what: str) -> bytes:
    """A key given as plain text (UTF-8) or ``hex:...``.

    Raises:
        InvalidArgumentError: malformed hex.
    """
    if text.startswith("hex:"):
        try:
            return bytes.fromhex(text[4:])
        except ValueError as exc:
            raise InvalidArgumentError(f"option {what}: malformed hex key {text!r}") from exc
    return text.encode("utf-8")


def split_db(url: str, store_root: str | None) -> tuple[str, str]:
    """``(store URL, database path)`` of ``url``, split at ``store_root`` when given.

    Raises:
        InvalidArgumentError: a malformed URL, or one not under ``store_root``.
    """
    if not store_root:
        return split_db_url(url)
    base, full = split_store_url(url, what="option db")
    root_base, root_path = split_store_url(store_root, what="option store_root")
    inside = not root_path or full.startswith(root_path + "/")
    if base != root_base or not inside:
        raise InvalidArgumentError(f"option db {url!r} is not under store_root {store_root!r}")
    return join_store_url(root_base, root_path), full[len(root_path):].lstrip("/")


def _int(opts: Mapping[str, str], name: str, default: int) -> int:
    raw = opts.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise InvalidArgumentError(f"option {name} must be an integer, got {raw!r}") from exc
    if value < 1:
        raise InvalidArgumentError(f"option {name} must be at least 1, got {value}")
    return value


@dataclass(frozen=True)
class ReadOptions:
    """What a read of the data source was asked for."""

    db: str
    store_url: str
    path: str
    checkpoint: str | None
    since_checkpoint: str | None
    checkpoint_lifetime_s: float
    key_range: BytesRange
    merge_operator: str | None
    columns: tuple[str, ...]
    decode: str
    partitions: int
    min_partition_bytes: int
    wal_store: str = ""

    @staticmethod
    def parse(options: Mapping[str, str]) -> ReadOptions:
        """Parse the data source's options (names case-insensitive, as Spark passes them).

        Raises:
            InvalidArgumentError: a missing ``db``, an unknown option or a bad value (the
                message names the option).
        """
        opts = {k.lower(): v for k, v in options.items() if k.lower() != "path"}
        unknown = sorted(set(opts) - set(OPTIONS))
        if unknown:
            raise InvalidArgumentError(f"unknown slatedb option(s) {unknown}; known: {OPTIONS}")
        db = opts.get("db") or options.get("path")
        if not db:
            raise InvalidArgumentError("the slatedb data source needs option db (a database URL)")
        store_url, path = split_db(db, opts.get("store_root"))
        cp = opts.get("checkpoint") or None
        since = opts.get("since_checkpoint") or None
        for value in (cp, since):
            if value is not None:
                parse_uuid(value)
        start = opts.get("start")
        end = opts.get("end")
        rng = BytesRange.half_open(None if not start else parse_key(start, "start"),
                                   None if not end else parse_key(end, "end"))
        decode = (opts.get("decode") or "binary").lower()
        if decode not in DECODINGS:
            raise InvalidArgumentError(f"option decode must be one of {DECODINGS}, got {decode!r}")
        lifetime = parse_duration(opts.get("checkpoint_lifetime") or DEFAULT_LIFETIME,
                                  what="option checkpoint_lifetime")
        if lifetime < 1:
            raise InvalidArgumentError("option checkpoint_lifetime must be at least 1s")
        return ReadOptions(
            db=db, store_url=store_url, path=path, checkpoint=cp, since_checkpoint=since,
            checkpoint_lifetime_s=lifetime, key_range=rng,
            merge_operator=opts.get("merge_operator") or None,
            columns=parse_columns(opts.get("columns")), decode=decode,
            partitions=_int(opts, "partitions", DEFAULT_PARTITIONS),
            min_partition_bytes=_int(opts, "min_partition_bytes", DEFAULT_MIN_PARTITION_BYTES),
            wal_store=(opts.get("wal_store") or "").strip(),
        )
