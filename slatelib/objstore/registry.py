"""The store registry: ``open_store`` picks the backend of a URL's scheme
(:data:`BACKENDS`, :mod:`slatelib.objstore.backends`) and wraps it (retries, two-phase CAS,
refused conditional writes, a separate WAL store). The stores never import this module:
:class:`StoreSpec` reopens a store through the opener registered here
(:func:`slatelib.objstore.spec.register_opener`).

URLs are parsed by :mod:`slatelib.objstore.url`; the options of each scheme are described in
:mod:`slatelib.objstore.backends`. ``[object_store]`` settings registered with
:func:`set_store_defaults` sit below explicit options and the environment.

Options of every scheme (:data:`GENERIC_OPTIONS`; docs/rfcs/0012-two-phase-cas.md):

- ``cas``: the transactional store of two-phase CAS, ``sqlite:///ABSOLUTE/PATH`` or
  ``postgresql://HOST[:PORT]/DB`` (:mod:`slatelib.objstore.cas_records`): every
  ``put_if_absent``/``put_if_match`` then goes through it
  (:class:`slatelib.objstore.two_phase.TwoPhaseObjectStore`). Falls back to ``SLATELIB_CAS_URL``,
  then ``[object_store] cas``; ``""`` means native conditional writes.
- ``conditional_writes``: ``false`` refuses the store's own conditional writes
  (:class:`slatelib.objstore.no_conditional.NoConditionalWritesStore`); falls back to
  ``[object_store] conditional_writes``.

Both are resolved when the store is opened and travel in its :class:`StoreSpec`, so Spark
executors reopen the store exactly as the driver did.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from slatelib.config import ObjectStoreSettings
from slatelib.errors import InvalidArgumentError, SlateError
from slatelib.objstore.backends import (
    CONF_STORE_KEYS,
    S3Access,
    as_bool,
    open_file,
    open_from_url,
    open_memory,
    open_s3,
    resolve_s3_access,
)
from slatelib.objstore.cas_records import check_cas_url, open_cas_backend
from slatelib.objstore.no_conditional import NoConditionalWritesStore
from slatelib.objstore.object_store import ObjectStore
from slatelib.objstore.obstore_errors import map_error
from slatelib.objstore.retrying import RetryingObjectStore
from slatelib.objstore.spec import OptionValue, StoreSpec, option_to_str, register_opener
from slatelib.objstore.two_phase import TwoPhaseObjectStore
from slatelib.objstore.url import join_url, parse_store_url, root_url
from slatelib.objstore.wal_routing import WalRoutedStore, main_store_of

Backend = Callable[[str, str, dict[str, str], StoreSpec, Mapping[str, str]], ObjectStore]
"""Opens the bare store of one scheme: ``(host, path, options, spec, [object_store]
defaults)``."""

BACKENDS: dict[str, Backend] = {
    "file": open_file,
    "memory": open_memory,
    "s3": open_s3,
    "gs": open_from_url,
    "az": open_from_url,
}
"""Scheme -> its backend (every scheme of :data:`slatelib.objstore.url.SCHEMES`)."""

GENERIC_OPTIONS = ("cas", "conditional_writes")
"""Store options of every scheme, handled here rather than by the backend."""

CAS_ENV = "SLATELIB_CAS_URL"

_store_defaults: dict[str, dict[str, str]] = {}
_generic_defaults: dict[str, str] = {}


def conf_store_defaults(settings: ObjectStoreSettings) -> dict[str, dict[str, str]]:
    """The ``[object_store]`` settings that are set, per scheme, as store options."""
    out: dict[str, dict[str, str]] = {}
    for scheme, keys in CONF_STORE_KEYS.items():
        values: dict[str, str] = {}
        for field_name, (option, _) in keys.items():
            value = getattr(settings, field_name)
            if value is None or value == "":
                continue
            values[option] = option_to_str(option, value)
        if values:
            out[scheme] = values
    return out


def set_store_defaults(settings: ObjectStoreSettings | None) -> None:
    """Register the ``[object_store]`` settings as this process's store defaults (None
    forgets them): every later :func:`open_store` of an ``s3://``, ``gs://`` or ``az://`` URL
    uses each one when neither an explicit option nor its environment variable is set, and
    the stores' :class:`StoreSpec` carries them to Spark executors. The CLI and the jobs
    call this right after loading settings."""
    _store_defaults.clear()
    _generic_defaults.clear()
    if settings is not None:
        _store_defaults.update(conf_store_defaults(settings))
        if settings.cas:
            _generic_defaults["cas"] = check_cas_url(settings.cas, what="[object_store] cas")
        if settings.conditional_writes is not None:
            _generic_defaults["conditional_writes"] = option_to_str(
                "conditional_writes", settings.conditional_writes)


def generic_option_defaults(environ: Mapping[str, str]) -> dict[str, str]:
    """The ``cas`` and ``conditional_writes`` options an :func:`open_raw_store` without them
    gets: ``SLATELIB_CAS_URL``, then the registered ``[object_store]`` settings.

    Raises:
        InvalidArgumentError: a malformed ``SLATELIB_CAS_URL`` (naming it).
    """
    out = dict(_generic_defaults)
    value = environ.get(CAS_ENV)
    if value is not None:
        if value:
            check_cas_url(value, what=CAS_ENV)
        out["cas"] = value
    return out


def store_defaults(scheme: str) -> dict[str, str]:
    """The registered ``[object_store]`` defaults for ``scheme``, as store options."""
    return dict(_store_defaults.get(scheme, {}))


def s3_access(**options: OptionValue) -> S3Access:
    """How other clients (Spark's S3A, pyarrow, delta-rs) reach S3 as :func:`open_store`
    would for an ``s3://`` URL with these ``options``: then the environment, then the
    registered ``[object_store]`` settings (:func:`slatelib.objstore.backends.resolve_s3_access`).

    Raises:
        InvalidArgumentError: a malformed or inconsistent option or variable.
    """
    opts = {k: option_to_str(k, v) for k, v in options.items()}
    return resolve_s3_access(opts, os.environ, store_defaults("s3"))


DEFAULT_ATTEMPTS = 5


def open_store(url: str, *, attempts: int = DEFAULT_ATTEMPTS,
               wal_store: ObjectStore | str | None = None,
               **options: OptionValue) -> ObjectStore:
    """Open the store rooted at ``url``, ready for production use: transient failures are
    retried up to ``attempts`` times with backoff (:class:`RetryingObjectStore`), and a
    conditional put whose outcome stays unknown raises ``CommitStateUnknownError`` rather
    than guessing from content (callers with unique payloads resolve it with
    :func:`slatelib.objstore.put_if_absent_unique`). ``attempts=1`` gives the bare adapter.

    ``wal_store`` (a store or its URL): the databases in this store keep their WAL in that
    store, as 0.17's ``with_wal_object_store`` (:mod:`slatelib.objstore.wal_routing`; the
    ``options`` apply to the main store only).

    Raises:
        InvalidArgumentError: unknown scheme, malformed URL or path, unknown or malformed
            option.
        PathIsFileError: the local root is a file, or lies below one.
        StorageError: the store cannot be created.
    """
    store = with_retries(open_raw_store(url, **options), attempts)
    if wal_store is None or wal_store == "":
        return store
    return with_wal_store(store, wal_store)


def with_wal_store(store: ObjectStore, wal_store: ObjectStore | str | None, *,
                   default: str = "") -> ObjectStore:
    """``store`` with its WAL objects in ``wal_store``
    (:class:`~slatelib.objstore.wal_routing.WalRoutedStore`).

    ``wal_store`` is a store or its URL; ``""`` means none (the WAL lives in the main
    store, even when ``store`` was opened with a WAL store); None keeps ``store``'s own WAL
    store if it has one, else takes ``default`` (the ``[object_store] wal_store`` setting).

    Raises:
        InvalidArgumentError: a malformed WAL store URL (as ``open_store``), or a WAL store
            that is the main store itself.
    """
    if wal_store is None:
        if isinstance(store, WalRoutedStore) or not default:
            return store
        wal_store = default
    main = main_store_of(store)
    if isinstance(wal_store, str) and not wal_store:
        return main
    wal = open_store(wal_store) if isinstance(wal_store, str) else main_store_of(wal_store)
    if wal.spec.url == main.spec.url and wal.spec.options == main.spec.options:
        raise InvalidArgumentError(
            f"WAL store {wal.url} is the database's store itself: leave the WAL store unset")
    return WalRoutedStore(main, wal)


def with_retries(raw: ObjectStore, attempts: int = DEFAULT_ATTEMPTS) -> ObjectStore:
    """Wrap a bare store in the production retry policy of :func:`open_store`."""
    if isinstance(raw, TwoPhaseObjectStore):
        return raw.with_inner(with_retries(raw.inner, attempts))
    if attempts <= 1:
        return raw
    return RetryingObjectStore(raw, max_attempts=attempts, resolve_by_content=False)


def open_raw_store(url: str, **options: OptionValue) -> ObjectStore:
    """Open the bare obstore adapter for ``url`` (no retries; see :func:`open_store`).

    Raises:
        InvalidArgumentError: unknown scheme, malformed URL or path, unknown or malformed
            option.
        PathIsFileError: the local root is a file, or lies below one.
        StorageError: the store cannot be created.
    """
    scheme = url.partition("://")[0] if isinstance(url, str) else ""
    opts: dict[str, OptionValue] = {**generic_option_defaults(os.environ), **options}
    return open_raw_store_with(url, opts, store_defaults(scheme))


def open_raw_store_with(url: str, options: Mapping[str, OptionValue],
                        defaults: Mapping[str, str]) -> ObjectStore:
    """:func:`open_raw_store` with explicit ``[object_store]`` ``defaults`` (those of
    :func:`set_store_defaults` by default; a :class:`StoreSpec` passes its own)."""
    scheme, host, path = parse_store_url(url, "store url")
    opts = {k: option_to_str(k, v) for k, v in options.items()}
    defaults = dict(defaults) if scheme in CONF_STORE_KEYS else {}
    spec = StoreSpec.of(join_url(root_url(scheme, host), path), opts, defaults)
    generic = {k: opts.pop(k) for k in GENERIC_OPTIONS if k in opts}
    cas = generic.get("cas", "")
    if cas:
        check_cas_url(cas, what="store option 'cas'")
    conditional = as_bool("conditional_writes", generic.get("conditional_writes", "true"))
    raw = _open_backend(scheme, host, path, opts, spec, defaults)
    if not conditional:
        raw = NoConditionalWritesStore(raw)
    if cas:
        return TwoPhaseObjectStore(raw, open_cas_backend(cas, what="store option 'cas'"))
    return raw


def _open_backend(scheme: str, host: str, path: str, opts: dict[str, str], spec: StoreSpec,
                  defaults: Mapping[str, str]) -> ObjectStore:
    if scheme in ("file", "memory") and opts:
        raise InvalidArgumentError(f"{scheme}:// stores take no options, got {sorted(opts)}")
    try:
        return BACKENDS[scheme](host, path, opts, spec, defaults)
    except SlateError:
        raise
    except Exception as exc:
        raise map_error(exc, op="open", path=path, url=spec.url) from exc


def resolve_store(store: ObjectStore | str) -> ObjectStore:
    """Accept an ObjectStore or a store URL (what every public entry point takes).

    Raises:
        InvalidArgumentError: neither.
    """
    if isinstance(store, str):
        return open_store(store)
    if store is None:
        raise InvalidArgumentError("store is required (a URL or an object from open_store)")
    return store


def open_spec(spec: StoreSpec) -> ObjectStore:
    """The store ``spec`` describes, as :func:`open_store` opened it (with its WAL store,
    when it has one); what :meth:`StoreSpec.open` runs (registered below).

    Raises:
        InvalidArgumentError: bad URL or options.
        StorageError: the store cannot be created.
    """
    store = with_retries(open_raw_store_with(spec.url, spec.options_dict(), dict(spec.defaults)))
    if spec.wal is None:
        return store
    return WalRoutedStore(store, open_spec(spec.wal))


register_opener(open_spec)

__all__ = ["BACKENDS", "CAS_ENV", "DEFAULT_ATTEMPTS", "GENERIC_OPTIONS", "Backend",
           "conf_store_defaults", "generic_option_defaults", "open_raw_store",
           "open_raw_store_with", "open_spec", "open_store", "resolve_store",
           "s3_access", "set_store_defaults", "store_defaults", "with_retries", "with_wal_store"]
