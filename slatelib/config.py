"""Settings: frozen dataclasses and the one function that loads them.

Layering (later wins): defaults in this module (mirrored in ``conf/base.toml``), then each
TOML file passed to :func:`load_settings` in order, then ``SLATELIB_<SECTION>__<KEY>``
environment variables (e.g. ``SLATELIB_WRITER__FLUSH_INTERVAL=50ms``). Unknown keys are
errors that name the file (or variable) and the key; an unknown ``SLATELIB_*__*`` variable's
error also names the closest known variable. Any other ``SLATELIB_*`` variable that nothing
reads (``SLATELIB_S3_ENDPIONT``) gets one warning per process naming the closest known name
(:func:`warn_unknown_env`); the S3 options reader checks the same way.

``[object_store]`` holds NON-secret object-store options (endpoint, region, ...): the store
layer (:mod:`slatelib.objstore.backends`) uses each one only when neither an explicit store option
nor an environment variable (``SLATELIB_S3_*``, ``AWS_*``, ``GOOGLE_*``, ``AZURE_*``) sets it:
the environment wins, as it does over every file here. Secrets stay in the environment or the
credential chain. ``[spark]`` is applied by the jobs when they build their SparkSession
(``slatelib/spark/session.py``; spark-submit's own options win). :func:`load_env_file` loads a
dotenv-style file (``--env-file``) into the environment before any of this is read.

Names and units follow SlateDB 0.17's ``Settings`` where the meaning matches
(``flush_interval = "100ms"``, ``l0_sst_size_bytes``, ``min_filter_keys``, ...): durations
are humantime strings ("100ms", "7days 30min 10s") held as float seconds, sizes accept
integers or strings with a binary unit ("64MiB").
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import math
import os
import re
import tomllib
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slatelib.errors import InvalidArgumentError

ENV_PREFIX = "SLATELIB_"

log = logging.getLogger(__name__)

OTHER_ENV_NAMES: frozenset[str] = frozenset({
    # read by slatelib.objstore.backends (S3 options and credentials)
    "SLATELIB_S3_ENDPOINT", "SLATELIB_S3_REGION", "SLATELIB_S3_ALLOW_HTTP",
    "SLATELIB_S3_VIRTUAL_HOSTED_STYLE_REQUEST", "SLATELIB_S3_ACCESS_KEY_ID",
    "SLATELIB_S3_SECRET_ACCESS_KEY", "SLATELIB_S3_SESSION_TOKEN",
    # read by slatelib.objstore.registry: the two-phase CAS store of every store opened
    "SLATELIB_CAS_URL",
    # read by load_settings: [object_store] wal_store
    "SLATELIB_WAL_STORE",
    # read by slatelib.format.native, slatelib/spark/session.py and the Airflow tests
    "SLATELIB_NO_NATIVE", "SLATELIB_SPARK_MASTER", "SLATELIB_SPARK_LOG_LEVEL",
    "SLATELIB_AIRFLOW_PYTHON",
})
"""``SLATELIB_*`` environment variables other than the ``SLATELIB_<SECTION>__<KEY>`` settings:
the known names :func:`warn_unknown_env` does not warn about."""

_warned_env: set[str] = set()
_S3_SECTION = ENV_PREFIX + "S3__"

_DURATION_UNITS = {
    "ns": 1e-9, "nsec": 1e-9, "us": 1e-6, "usec": 1e-6, "ms": 1e-3, "msec": 1e-3,
    "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hr": 3600.0, "hrs": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
    "w": 604800.0, "week": 604800.0, "weeks": 604800.0,
    "M": 2630016.0, "month": 2630016.0, "months": 2630016.0,
    "y": 31557600.0, "year": 31557600.0, "years": 31557600.0,
}
_DURATION_PART = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]+)\s*")
_SIZE_UNITS = {
    "": 1, "b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4, "k": 1024, "m": 1024**2,
    "g": 1024**3,
}


def parse_duration(text: str | float | int, *, what: str = "duration") -> float:
    """Seconds in a humantime duration such as ``"7days 30min 10s"`` or ``"100ms"``.

    Plain numbers are seconds. Units are case-sensitive and digits ASCII, as in humantime
    (0.17's parser): ``"5M"`` is five months, ``"5MS"`` and ``"5Min"`` are refused.

    Raises:
        InvalidArgumentError: the text is not a duration.
    """
    if isinstance(text, bool):
        raise InvalidArgumentError(f"{what}: expected a duration, got {text!r}")
    if isinstance(text, int | float):
        if not math.isfinite(text) or text < 0:
            raise InvalidArgumentError(f"{what}: not a finite duration >= 0: {text!r}")
        return float(text)
    s = text.strip()
    if not s:
        raise InvalidArgumentError(f"{what}: empty duration")
    if s.startswith("-"):
        raise InvalidArgumentError(f"{what}: must not be negative: {text!r}")
    try:
        number = float(s)
    except ValueError:
        pass
    else:  # "inf", "nan" and "1e400" are floats but no durations
        return number if math.isfinite(number) and number >= 0 else _bad_duration(what, text)
    total = 0.0
    pos = 0
    while pos < len(s):
        m = _DURATION_PART.match(s, pos)
        if not m or m.end() == pos:
            _bad_duration(what, text)
        assert m is not None
        unit = m.group(2)
        factor = _DURATION_UNITS.get(unit)  # case-sensitive, as humantime ("M" is months)
        if factor is None:
            raise InvalidArgumentError(f"{what}: unknown duration unit {unit!r} in {text!r}")
        total += float(m.group(1)) * factor
        pos = m.end()
    return total if math.isfinite(total) else _bad_duration(what, text)


def _bad_duration(what: str, text: object) -> float:
    raise InvalidArgumentError(
        f"{what}: cannot parse duration {text!r} (examples: '100ms', '5s', '7days 30min 10s')"
    )


def parse_size(text: str | int, *, what: str = "size") -> int:
    """Bytes in ``64MiB``, ``4096``, ``1GB``.

    Raises:
        InvalidArgumentError: not a size.
    """
    if isinstance(text, bool):
        raise InvalidArgumentError(f"{what}: expected a size, got {text!r}")
    if isinstance(text, int):
        if text < 0:
            raise InvalidArgumentError(f"{what}: negative size {text}")
        return text
    m = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).lower() not in _SIZE_UNITS:
        raise InvalidArgumentError(f"{what}: cannot parse size {text!r} (examples: 4096, '64MiB')")
    return int(m.group(1)) * _SIZE_UNITS[m.group(2).lower()]


# Field metadata markers.
DURATION: Mapping[str, Any] = types.MappingProxyType({"kind": "duration"})
SIZE: Mapping[str, Any] = types.MappingProxyType({"kind": "size"})
TABLE: Mapping[str, Any] = types.MappingProxyType({"kind": "table"})
"""A TOML table of string keys and scalar values, held as sorted ``(key, value)`` string
pairs (hashable); from the environment, a JSON object."""


DEFAULT_SST_BLOCK_SIZE = 4096
DEFAULT_SST_CODEC = "none"
DEFAULT_MIN_FILTER_KEYS = 1000
DEFAULT_FILTER_BITS_PER_KEY = 10


@dataclass(frozen=True)
class SstSettings:
    """Settings that change SST bytes (0.17: ``with_sst_block_size``, ``compression_codec``,
    ``min_filter_keys``, ``with_filter_policies``).

    A key left out (None) is *not set*: SSTs slatelib's writer and bulk load create use the
    0.17 default (the ``DEFAULT_*`` constants above: 4096-byte blocks, no compression, 1000
    keys, one whole-key ``_bf`` filter of 10 bits per key), and a compaction keeps the
    database's own value, read from its input SSTs (docs/rfcs/0019-compaction-sst-options.md).
    A key given in a file, the environment or a flag is *set*, even to the default value,
    and applies to every SST slatelib writes.

    ``filter_policies``: comma-separated filter names, each with an optional
    ``@<bits per key>`` (``"_bf@10,_bf:p=fixed4:wh=0"``; ``""``: no filters).
    ``prefix_extractors``: extractor name -> ``fixed:<N>`` or ``package.module:attr``, for
    the prefix bloom filters (``_bf:p=<name>``) of the database.
    """

    block_size: int | None = field(default=None, metadata=SIZE)
    compression_codec: str | None = None
    min_filter_keys: int | None = None
    filter_bits_per_key: int | None = None
    filter_policies: str | None = None
    prefix_extractors: tuple[tuple[str, str], ...] = field(default=(), metadata=TABLE)


@dataclass(frozen=True)
class ReaderSettings:
    """Read path: prefetch and caching, and the checkpoint protocol of ``DbReader``.

    A scan reads each SST in ranged GETs of consecutive blocks (up to 1 MiB each) and keeps
    at most ``prefetch_blocks`` of those GETs in flight per SST it is scanning, so a scan
    holds about ``sources * prefetch_blocks * 1 MiB`` of blocks plus ``block_cache_bytes``
    (decoded blocks and every SST's index and bloom filter, as in 0.17's block cache; keep
    it above the size of one SST's index). ``io_threads`` run those GETs.
    """

    manifest_poll_interval: float = field(default=1.0, metadata=DURATION)
    checkpoint_lifetime: float = field(default=600.0, metadata=DURATION)
    max_memtable_bytes: int = field(default=64 * 1024 * 1024, metadata=SIZE)
    prefetch_blocks: int = 8
    io_threads: int = 8
    block_cache_bytes: int = field(default=64 * 1024 * 1024, metadata=SIZE)


@dataclass(frozen=True)
class WriterSettings:
    """The embedded writer (names as in 0.17 ``Settings``).

    ``checkpoint_lifetime`` (slatelib only): expiry of the writer checkpoint, refreshed once
    half of it has passed (docs/rfcs/0005-writer-wal-and-fencing.md); at least 10 s and 4 x
    ``manifest_poll_interval``.
    """

    flush_interval: float | None = field(default=0.1, metadata=DURATION)
    l0_sst_size_bytes: int = field(default=64 * 1024 * 1024, metadata=SIZE)
    l0_max_ssts: int = 8
    max_unflushed_bytes: int = field(default=1024 * 1024 * 1024, metadata=SIZE)
    wal_batch_max_bytes: int = field(default=4 * 1024 * 1024, metadata=SIZE)
    wal_max_in_flight: int = 1
    manifest_poll_interval: float = field(default=1.0, metadata=DURATION)
    default_ttl_millis: int | None = None
    checkpoint_lifetime: float = field(default=3600.0, metadata=DURATION)


@dataclass(frozen=True)
class BulkLoadSettings:
    target_sst_size: int = field(default=64 * 1024 * 1024, metadata=SIZE)
    sort_memory_bytes: int = field(default=256 * 1024 * 1024, metadata=SIZE)


@dataclass(frozen=True)
class CompactionSettings:
    """Compaction planning and execution (0.17 names: ``compactor_options`` and its
    ``scheduler_options``/``worker``)."""

    policy: str = "size-tiered"  # 0.17's scheduler: sorted runs stay bounded; l0/full explicit
    min_compaction_sources: int = 4
    max_compaction_sources: int = 8
    include_size_threshold: float = 4.0
    sorted_run_consolidation_threshold: int = 0  # 0.17's scheduler option; 0: off
    max_sst_size: int = field(default=256 * 1024 * 1024, metadata=SIZE)
    parallelism: int = 0  # 0: the Spark default parallelism (or CPU count without Spark)
    max_fetch_tasks: int = 4
    bytes_to_fetch: int = field(default=2 * 1024 * 1024, metadata=SIZE)
    merge_operator: str | None = None
    checkpoint_lifetime: float = field(default=900.0, metadata=DURATION)
    manifest_update_timeout: float = field(default=300.0, metadata=DURATION)
    min_range_bytes: int = field(default=32 * 1024 * 1024, metadata=SIZE)
    tasks_per_slot: int = 1
    task_attempts: int = 3
    db_concurrency: int = 2  # databases of one job run at once (driver threads)


@dataclass(frozen=True)
class WorkerSettings:
    """Worker mode (``jobs/compact.py --worker``): executing the compactions an official 0.17
    coordinator schedules (0.17 names: ``compactor_options.worker`` and
    ``worker_heartbeat_timeout``)."""

    max_concurrent_compactions: int = 4  # jobs held at once by the whole application
    compactions_poll_interval: float = field(default=1.0, metadata=DURATION)
    heartbeat_interval: float = field(default=5.0, metadata=DURATION)
    worker_heartbeat_timeout: float = field(default=30.0, metadata=DURATION)
    """The coordinators' setting (0.17 default 30s): heartbeats must come well within it."""
    discover_interval: float = field(default=60.0, metadata=DURATION)
    status_interval: float = field(default=10.0, metadata=DURATION)
    status_file: str = ""  # "" : no status file unless --status-file is given


@dataclass(frozen=True)
class ServiceSettings:
    """Service mode (``jobs/compact.py --service``): a long-running size-tiered scheduler
    over many databases that have no compactor of their own."""

    poll_interval: float = field(default=5.0, metadata=DURATION)
    status_interval: float = field(default=10.0, metadata=DURATION)
    status_file: str = ""  # "" : no status file unless --status-file is given
    status_history: str = ""  # "" : no history unless --status-history is given
    discover_interval: float = field(default=60.0, metadata=DURATION)
    error_backoff: float = field(default=30.0, metadata=DURATION)


@dataclass(frozen=True)
class GcDirectorySettings:
    """One directory's GC options: 0.17's ``GarbageCollectorDirectoryOptions`` (``interval``,
    ``min_age``, ``dry_run``) plus ``enabled`` (0.17 disables a directory by setting its
    ``*_options`` to None, which TOML cannot say). ``min_age`` and ``dry_run`` unset
    (None) take ``[gc] min_age`` / ``[gc] dry_run`` (the WAL fence: ``wal_fence_dry_run``);
    ``interval`` is accepted and reported, a one-shot run ignores it as 0.17's
    ``run_gc_once`` does (docs/rfcs/0013-gc-options.md)."""

    enabled: bool = True
    interval: float | None = field(default=None, metadata=DURATION)
    min_age: float | None = field(default=None, metadata=DURATION)
    dry_run: bool | None = None


@dataclass(frozen=True)
class GcScheduleSettings:
    """0.17's ``GarbageCollectorScheduleOptions`` (clone detach) plus ``enabled``."""

    enabled: bool = True
    interval: float | None = field(default=None, metadata=DURATION)


@dataclass(frozen=True)
class GcSettings:
    """Garbage collection (0.17 names: ``garbage_collector_options``; its per-directory
    ``*_options`` are the sub-tables ``[gc.manifest_options]`` ..., its
    ``boundary_files_enabled`` is ``boundary_files_enabled``)."""

    min_age: float = field(default=300.0, metadata=DURATION)
    min_age_floor: float = field(default=300.0, metadata=DURATION)
    db_delete_grace: float = field(default=86400.0, metadata=DURATION)
    dry_run: bool = True
    wal_fence_dry_run: bool = True
    boundary_files_enabled: bool = True
    manifest_options: GcDirectorySettings = GcDirectorySettings()
    wal_options: GcDirectorySettings = GcDirectorySettings()
    wal_fence_options: GcDirectorySettings = GcDirectorySettings()
    compacted_options: GcDirectorySettings = GcDirectorySettings()
    compactions_options: GcDirectorySettings = GcDirectorySettings()
    detach_options: GcScheduleSettings = GcScheduleSettings()
    delete_concurrency: int = 16  # delete requests in flight per task (batches of 1000)
    list_partitions: int = 0  # max key ranges per directory; 0: 4 x Spark parallelism, <= 64
    driver_listing_max: int = 1000  # wal/ or compacted/ this small is decided on the driver
    db_concurrency: int = 4  # databases of one job collected at once (driver threads)


@dataclass(frozen=True)
class RetrySettings:
    max_attempts: int = 6
    base_delay: float = field(default=0.05, metadata=DURATION)
    max_delay: float = field(default=2.0, metadata=DURATION)


@dataclass(frozen=True)
class ObjectStoreSettings:
    """Non-secret object-store options: fallbacks for when neither an explicit store option
    nor an environment variable sets the option (the environment wins; secrets never go
    here). Empty strings and unset booleans (None) mean "not set". Which schemes use what:

    - ``s3://``: ``endpoint`` (an S3-compatible server such as MinIO; ``http://`` infers
      ``allow_http``), ``region``, ``allow_http``, ``virtual_hosted_style_request``;
    - ``gs://``: ``gcs_base_url`` (an emulator), ``gcs_service_account_path`` (the path of
      the key file, not the key), ``allow_http``;
    - ``az://``: ``endpoint``, ``azure_account_name``, ``azure_use_emulator`` (Azurite),
      ``allow_http``;
    - every cloud scheme: ``timeout``, ``connect_timeout`` (e.g. ``"30s"``), and the HTTP
      client's own retries of a request, ``max_retries`` and ``retry_timeout`` (obstore's
      defaults, 10 and 3 minutes, when unset; slatelib's ``[retry]`` retries on top);
    - every scheme: ``cas``, the transactional store of two-phase CAS
      (``sqlite:///ABSOLUTE/PATH`` or ``postgresql://HOST/DB``; ``SLATELIB_CAS_URL`` wins, "" :
      native conditional writes), and ``conditional_writes = false`` to refuse the store's
      own conditional writes (docs/rfcs/0012-two-phase-cas.md);
    - ``wal_store``: the URL of the object store that keeps the databases' WAL SSTs, as
      0.17's ``with_wal_object_store`` (:mod:`slatelib.objstore.wal_routing`; "" : the
      WAL is in the database's own store). ``SLATELIB_WAL_STORE`` wins over it, and
      ``--wal-store`` / ``wal_store=`` over both. It is not a store option: it names a
      second store.
    """

    endpoint: str = ""
    region: str = ""
    allow_http: bool | None = None
    virtual_hosted_style_request: bool | None = None
    timeout: str = ""
    connect_timeout: str = ""
    gcs_base_url: str = ""
    gcs_service_account_path: str = ""
    azure_account_name: str = ""
    azure_use_emulator: bool | None = None
    max_retries: int | None = None
    retry_timeout: float | None = field(default=None, metadata=DURATION)
    cas: str = ""
    conditional_writes: bool | None = None
    wal_store: str = ""


@dataclass(frozen=True)
class SparkSettings:
    """What the jobs apply when they build their SparkSession (``slatelib/spark/session.py``), both
    under ``spark-submit`` and started from Python (``slate-spark``): anything spark-submit
    was given (``--master``, ``--name``, ``--conf``, ``spark-defaults.conf``) wins.

    ``master`` ("" : spark-submit's, else ``SLATELIB_SPARK_MASTER``, else ``local[*]``),
    ``app_name`` ("" : the job's, e.g. ``slatelib-compact``), ``log_level`` of Spark's own
    logging ("" : WARN; ``SLATELIB_SPARK_LOG_LEVEL`` wins) and ``conf``, extra Spark
    properties (``[spark.conf]``, e.g. ``"spark.executor.memory" = "4g"``).
    """

    master: str = ""
    app_name: str = ""
    log_level: str = ""
    conf: tuple[tuple[str, str], ...] = field(default=(), metadata=TABLE)

    def conf_dict(self) -> dict[str, str]:
        return dict(self.conf)


@dataclass(frozen=True)
class Settings:
    sst: SstSettings = SstSettings()
    reader: ReaderSettings = ReaderSettings()
    writer: WriterSettings = WriterSettings()
    bulk_load: BulkLoadSettings = BulkLoadSettings()
    compaction: CompactionSettings = CompactionSettings()
    worker: WorkerSettings = WorkerSettings()
    service: ServiceSettings = ServiceSettings()
    gc: GcSettings = GcSettings()
    retry: RetrySettings = RetrySettings()
    object_store: ObjectStoreSettings = ObjectStoreSettings()
    spark: SparkSettings = SparkSettings()


def _table(value: Any, where: str) -> tuple[tuple[str, str], ...]:
    if isinstance(value, str):
        import json

        try:
            value = json.loads(value)
        except ValueError:
            raise InvalidArgumentError(
                f"{where}: expected a table (a JSON object in the environment), got {value!r}"
            ) from None
    if not isinstance(value, Mapping):
        raise InvalidArgumentError(f"{where}: expected a table, got {value!r}")
    out: dict[str, str] = {}
    for key, item in value.items():
        if isinstance(item, bool):
            out[str(key)] = "true" if item else "false"
        elif isinstance(item, str | int | float):
            out[str(key)] = str(item)
        else:
            raise InvalidArgumentError(
                f"{where}.{key}: expected a string, number or boolean, got {item!r}")
    return tuple(sorted(out.items()))


def _coerce(value: Any, f: dataclasses.Field[Any], where: str) -> Any:
    kind = f.metadata.get("kind")
    hint = f.type if isinstance(f.type, str) else str(f.type)
    optional = "None" in hint
    if value is None or (optional and isinstance(value, str) and value.strip().lower() == "null"):
        if optional:
            return None
        raise InvalidArgumentError(f"{where}: may not be null")
    if kind == "table":
        return _table(value, where)
    if kind == "duration":
        return parse_duration(value, what=where)
    if kind == "size":
        return parse_size(value, what=where)
    if hint.startswith("int"):
        if isinstance(value, bool):
            raise InvalidArgumentError(f"{where}: expected an integer, got {value!r}")
        try:
            return int(value)
        except (TypeError, ValueError):
            raise InvalidArgumentError(f"{where}: expected an integer, got {value!r}") from None
    if hint.startswith("float"):
        try:
            return float(value)
        except (TypeError, ValueError):
            raise InvalidArgumentError(f"{where}: expected a number, got {value!r}") from None
    if hint.startswith("bool"):
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "1", "yes", "false", "0", "no"):
            return value.lower() in ("true", "1", "yes")
        raise InvalidArgumentError(f"{where}: expected true or false, got {value!r}")
    if hint.startswith("str"):
        if not isinstance(value, str):
            raise InvalidArgumentError(f"{where}: expected a string, got {value!r}")
        return value
    raise InvalidArgumentError(f"{where}: unsupported setting type {hint}")


def _section_types(cls: type[Any]) -> dict[str, type[Any]]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _apply(obj: Any, data: Mapping[str, Any] | str, where: str) -> Any:
    if isinstance(data, str):  # a sub-table from the environment: a JSON object
        import json

        try:
            data = json.loads(data)
        except ValueError:
            raise InvalidArgumentError(
                f"{where}: expected a table (a JSON object in the environment), got {data!r}"
            ) from None
    if not isinstance(data, Mapping):
        raise InvalidArgumentError(f"{where}: expected a table, got {data!r}")
    fields = {f.name: f for f in dataclasses.fields(obj)}
    types_ = _section_types(type(obj))
    changes: dict[str, Any] = {}
    for key, value in data.items():
        f = fields.get(key)
        if f is None:
            raise InvalidArgumentError(
                f"{where}: unknown setting {key!r} (known: {', '.join(sorted(fields))})"
            )
        sub = types_[key]
        if dataclasses.is_dataclass(sub):
            changes[key] = _apply(getattr(obj, key), value, f"{where}.{key}")
        else:
            changes[key] = _coerce(value, f, f"{where}.{key}")
    return dataclasses.replace(obj, **changes) if changes else obj


OFFICIAL_GC_TABLE = "garbage_collector_options"
_OFFICIAL_GC_IGNORED = {
    "metric_level": "GC reports instead of metrics",
    "object_store_max_retries": "[retry] governs retries",
}


def _official_gc_table(data: dict[str, Any], where: str) -> dict[str, Any]:
    """``data`` with an official 0.17 ``[garbage_collector_options]`` table (as in a SlateDB
    settings file) moved into ``[gc]``: its ``<dir>_options`` sub-tables and
    ``boundary_files_enabled`` have the same names there; keys left out keep slatelib's
    defaults (docs/rfcs/0013-gc-options.md). ``metric_level`` and
    ``object_store_max_retries`` have no counterpart and are ignored with a warning.

    Raises:
        InvalidArgumentError: the table is not a table, or says something ``[gc]`` says too.
    """
    official = data.get(OFFICIAL_GC_TABLE)
    if official is None:
        return data
    if not isinstance(official, Mapping):
        raise InvalidArgumentError(f"{where}.{OFFICIAL_GC_TABLE}: expected a table")
    gc = dict(data.get("gc") or {})
    for key, value in official.items():
        if key in _OFFICIAL_GC_IGNORED:
            log.warning("%s.%s.%s: ignored (%s)", where, OFFICIAL_GC_TABLE, key,
                        _OFFICIAL_GC_IGNORED[key])
            continue
        if key in gc:
            raise InvalidArgumentError(
                f"{where}: both [gc] and [{OFFICIAL_GC_TABLE}] set {key!r}; keep one")
        gc[key] = value
    out = {k: v for k, v in data.items() if k != OFFICIAL_GC_TABLE}
    out["gc"] = gc
    return out


def settings_env_names() -> list[str]:
    """Every ``SLATELIB_<SECTION>__<KEY>`` variable that sets a setting."""
    return [
        f"{ENV_PREFIX}{section.name.upper()}__{f.name.upper()}"
        for section in dataclasses.fields(Settings)
        for f in dataclasses.fields(getattr(Settings(), section.name))
    ]


def known_env_names() -> list[str]:
    """Every ``SLATELIB_*`` environment variable slatelib reads."""
    return sorted({*settings_env_names(), *OTHER_ENV_NAMES})


def closest_env_name(name: str) -> str | None:
    """The known ``SLATELIB_*`` variable ``name`` most likely misspells (None: none close)."""
    found = difflib.get_close_matches(name.upper(), known_env_names(), n=1, cutoff=0.6)
    return found[0] if found else None


def _unknown_env_text(name: str) -> str:
    close = closest_env_name(name)
    hint = f"did you mean {close}?" if close else "no known SLATELIB_* variable is close"
    return f"unknown environment variable {name} ({hint})"


def warn_unknown_env(env: Mapping[str, str], *, only_prefix: str = ENV_PREFIX) -> list[str]:
    """Warn (logging, so on stderr by default) once per process about each ``SLATELIB_*``
    variable in ``env`` that starts with ``only_prefix`` and that slatelib does not read,
    naming the closest known name. ``SLATELIB_<SECTION>__<KEY>`` names are left to
    :func:`load_settings`, which refuses unknown ones (except ``SLATELIB_S3__*``, which it
    ignores: S3 is not a settings section). Returns the names warned about now.
    """
    known = set(known_env_names())
    warned: list[str] = []
    for name in sorted(env):
        if (not name.startswith(only_prefix) or name in known or name in _warned_env
                or ("__" in name and not name.startswith(_S3_SECTION))):
            continue
        _warned_env.add(name)
        warned.append(name)
        log.warning("%s: ignored", _unknown_env_text(name))
    return warned


def _env_overrides(env: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """The ``SLATELIB_<SECTION>__<KEY>`` settings in ``env``, by section and key.

    Raises:
        InvalidArgumentError: a section or key that does not exist, naming the variable and
            the closest known variable.
    """
    known = set(settings_env_names())
    out: dict[str, dict[str, str]] = {}
    for name, value in env.items():
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        if name.startswith(_S3_SECTION):  # not a section: S3 options are SLATELIB_S3_*
            continue
        section, _, key = name[len(ENV_PREFIX):].partition("__")
        if name not in known:
            raise InvalidArgumentError(
                f"environment (SLATELIB_*): no setting {section.lower()}.{key.lower()}: "
                f"{_unknown_env_text(name)}")
        out.setdefault(section.lower(), {})[key.lower()] = value
    return out


def load_settings(
    paths: str | Path | Sequence[str | Path] | None = None,
    env: Mapping[str, str] | None = None,
) -> Settings:
    """Load settings from TOML files and the environment.

    Raises:
        InvalidArgumentError: an unknown key, a bad value, or an unreadable file.
    """
    settings = Settings()
    if paths is None:
        files: list[str | Path] = []
    elif isinstance(paths, str | Path):
        files = [paths]
    else:
        files = list(paths)
    for p in files:
        try:
            with open(p, "rb") as fh:
                data = tomllib.load(fh)
        except OSError as exc:
            raise InvalidArgumentError(f"cannot read settings file {p}: {exc}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise InvalidArgumentError(f"settings file {p} is not valid TOML: {exc}") from exc
        settings = _apply(settings, _official_gc_table(data, str(p)), str(p))
    env_map = os.environ if env is None else env
    warn_unknown_env(env_map)
    for section, values in _env_overrides(env_map).items():
        settings = _apply(settings, {section: values}, "environment (SLATELIB_*)")
    return _with_wal_store_env(settings, env_map)


WAL_STORE_ENV = ENV_PREFIX + "WAL_STORE"
"""The environment variable of ``[object_store] wal_store``."""


def _with_wal_store_env(settings: Settings, env: Mapping[str, str]) -> Settings:
    """``SLATELIB_WAL_STORE`` over ``[object_store] wal_store`` (an empty value clears it).

    Raises:
        InvalidArgumentError: ``SLATELIB_OBJECT_STORE__WAL_STORE`` says otherwise.
    """
    value = env.get(WAL_STORE_ENV)
    if value is None:
        return settings
    value = value.strip()
    other = env.get(f"{ENV_PREFIX}OBJECT_STORE__WAL_STORE")
    if other is not None and other.strip() != value:
        raise InvalidArgumentError(
            f"environment: {WAL_STORE_ENV}={value!r} and "
            f"{ENV_PREFIX}OBJECT_STORE__WAL_STORE={other!r} disagree; set one")
    return dataclasses.replace(settings, object_store=dataclasses.replace(
        settings.object_store, wal_store=value))


ENV_FILE_PREFIXES = ("SLATELIB_", "AWS_", "GOOGLE_", "AZURE_")
"""The variables an ``--env-file`` may set: slatelib's and the cloud SDKs' (credentials
included: an env file is where secrets may live, unlike ``conf/``)."""

_ENV_LINE = re.compile(r"\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*")
_loaded_from_files: dict[str, str] = {}


def parse_env_file(path: str | Path) -> dict[str, str]:
    """The ``NAME=value`` lines of a dotenv-style file, in order.

    Blank lines and ``#`` comments are skipped; ``export NAME=value`` is accepted; a value
    may be single-quoted (taken literally), double-quoted (``\\n``, ``\\"`` and ``\\\\``
    escapes) or bare (a `` #`` starts a comment). No variable expansion.

    Raises:
        InvalidArgumentError: an unreadable file or a line that is not ``NAME=value``
            (naming the file and line number).
    """
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgumentError(f"cannot read env file {path}: {exc}") from exc
    out: dict[str, str] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _ENV_LINE.fullmatch(line)
        if m is None:
            raise InvalidArgumentError(
                f"env file {path}, line {number}: expected NAME=value, got {line.strip()!r}")
        name, raw = m.group(1), m.group(2)
        if raw[:1] in ("'", '"'):
            quote = raw[0]
            if len(raw) < 2 or not raw.endswith(quote):
                raise InvalidArgumentError(
                    f"env file {path}, line {number}: unterminated {quote} quote in {name}")
            value = raw[1:-1]
            if quote == '"':
                value = re.sub(r'\\([\\n"])', lambda e: "\n" if e.group(1) == "n" else e.group(1),
                               value)
        else:
            value = re.split(r"\s+#", raw, maxsplit=1)[0].rstrip()
        out[name] = value
    return out


def load_env_file(path: str | Path, environ: typing.MutableMapping[str, str] | None = None
                  ) -> dict[str, str]:
    """Load ``SLATELIB_*``, ``AWS_*``, ``GOOGLE_*`` and ``AZURE_*`` variables from a
    dotenv-style file (:func:`parse_env_file`) into ``environ`` (default ``os.environ``).
    See :func:`load_env_files`. Returns the variables it set."""
    return load_env_files([path], environ)


def load_env_files(paths: Sequence[str | Path] | None,
                   environ: typing.MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Load the variables of dotenv-style files (``--env-file``, repeatable) into
    ``environ`` (default ``os.environ``); a later file wins over an earlier one.

    A variable already set in the environment wins over the files (the dotenv convention:
    ``SLATELIB_S3_REGION=x slate --env-file prod.env ...`` overrides one value). Only
    ``SLATELIB_*``, ``AWS_*``, ``GOOGLE_*`` and ``AZURE_*`` names are loaded; others are
    warned about and ignored. Call it before anything reads settings or opens a store.
    Returns the variables set.

    Raises:
        InvalidArgumentError: an unreadable or malformed file.
    """
    env = os.environ if environ is None else environ
    merged: dict[str, tuple[str, str]] = {}
    for p in paths or ():
        for name, value in parse_env_file(p).items():
            if not name.startswith(ENV_FILE_PREFIXES):
                log.warning("env file %s: %s ignored (only %s variables are loaded)", p, name,
                            ", ".join(x + "*" for x in ENV_FILE_PREFIXES))
                continue
            merged[name] = (str(p), value)
    loaded: dict[str, str] = {}
    for name, (p, value) in merged.items():
        if name in env and env[name] != value:
            log.info("env file %s: %s is already set in the environment, which wins", p, name)
            continue
        env[name] = value
        loaded[name] = value
    if environ is None:
        _loaded_from_files.update(loaded)
    return loaded


def env_file_variables() -> dict[str, str]:
    """The variables env files loaded into ``os.environ`` in this process (the jobs pass
    them on to Spark executors)."""
    return dict(_loaded_from_files)
