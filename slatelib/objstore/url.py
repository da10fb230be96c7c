"""Store URLs: ``open_store`` and ``split_db_url``.

Supported URLs (the path part follows the object-path rules of
:func:`slatelib.objstore.object_store.check_path`; no query, fragment, user or port):

``file:///dir``
    A local directory, created if missing; object paths are relative to it.
    ``file:///`` is the file-system root. Takes no options.
``memory:///`` and ``memory://name/``
    Process-wide in-memory stores: every ``open_store`` of the same name in one process
    sees the same objects (``memory:///`` is the store named ``""``).
    :func:`reset_memory_stores` forgets them. Takes no options.
``s3://bucket[/prefix]``
    Amazon S3 or an S3-compatible service. Each option falls back to the first of these
    environment variables that is set:

    - ``endpoint``: ``SLATELIB_S3_ENDPOINT``, ``AWS_ENDPOINT_URL_S3``, ``AWS_ENDPOINT_URL``,
      ``AWS_ENDPOINT``
    - ``region``: ``SLATELIB_S3_REGION``, ``AWS_REGION``, ``AWS_DEFAULT_REGION``
    - ``allow_http``: ``SLATELIB_S3_ALLOW_HTTP``, ``AWS_ALLOW_HTTP``; inferred ``true``
      from an ``http://`` endpoint (a local S3 server such as moto or MinIO) unless set
      explicitly, and an ``http://`` endpoint with ``allow_http`` explicitly false is refused
    - ``virtual_hosted_style_request`` (default: path style):
      ``SLATELIB_S3_VIRTUAL_HOSTED_STYLE_REQUEST``, ``AWS_VIRTUAL_HOSTED_STYLE_REQUEST``
    - ``access_key_id``, ``secret_access_key``, ``session_token``:
      ``SLATELIB_S3_ACCESS_KEY_ID``, ``SLATELIB_S3_SECRET_ACCESS_KEY``,
      ``SLATELIB_S3_SESSION_TOKEN``

    Credentials are taken as a group from the first source that sets ``access_key_id``
    (options, then ``SLATELIB_S3_*``) and then nothing else is consulted; without them,
    obstore's own AWS chain applies (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/
    ``AWS_SESSION_TOKEN``, web identity, ECS and EC2 metadata). Also accepted:
    ``timeout``, ``connect_timeout`` (durations such as ``"30s"``),
    ``allow_invalid_certificates``, ``max_retries`` and ``retry_timeout_s`` (obstore's
    built-in retries of everything but conditional puts; default 10 retries within
    3 minutes) and any other obstore ``S3Config`` key (``conditional_put``,
    ``request_payer``, ``skip_signature``...). Conditional puts use a second client with
    built-in retries off (see :mod:`slatelib.objstore.obstore_store`).

    Below the environment come the non-secret ``[object_store]`` settings (``endpoint``,
    ``region``, ``allow_http``, ``virtual_hosted_style_request``, ``timeout``,
    ``connect_timeout``) that the CLI and the jobs register with
    :func:`set_store_defaults`: precedence is explicit options, then the variables above,
    then ``[object_store]``.

    Misconfiguration is refused before any request with an ``InvalidArgumentError`` (exit
    code 2, invalid_input) that names the option or environment variable: an endpoint that
    is not ``http(s)://host[:port][/path]``, ``http://`` with ``allow_http`` false, a
    malformed boolean. Each ``SLATELIB_S3_*`` variable that is not one of the above is
    warned about once (naming the closest known name) and ignored.
``gs://bucket[/prefix]``, ``az://container[/prefix]``
    Passed to obstore's ``from_url`` with the options as its config (and obstore's
    ``GOOGLE_*``/``AZURE_*`` environment variables). ``[object_store]`` settings fill an
    option only when neither an option nor its environment variable is set
    (:data:`CONF_STORE_KEYS`). Not covered by slatelib's tests beyond that.

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

import difflib
import os
import re
import threading
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from obstore.store import LocalStore, MemoryStore, S3Store, from_url

from slatelib.config import ObjectStoreSettings, warn_unknown_env
from slatelib.errors import InvalidArgumentError, PathIsFileError, SlateError
from slatelib.objstore.local_files import file_in_the_way
from slatelib.objstore.object_store import ObjectStore, check_prefix
from slatelib.objstore.obstore_errors import map_error
from slatelib.objstore.obstore_store import ObstoreObjectStore
from slatelib.objstore.spec import OptionValue, StoreSpec, option_to_str

if TYPE_CHECKING:
    from obstore.store import ClientConfig, RetryConfig, S3Credential

SCHEMES = ("file", "memory", "s3", "gs", "az")

GENERIC_OPTIONS = ("cas", "conditional_writes")
"""Store options of every scheme, handled here rather than by the backend."""

CAS_ENV = "SLATELIB_CAS_URL"

S3_ENV: dict[str, tuple[str, ...]] = {
    "endpoint": ("SLATELIB_S3_ENDPOINT", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"),
    "region": ("SLATELIB_S3_REGION", "AWS_REGION", "AWS_DEFAULT_REGION"),
    "allow_http": ("SLATELIB_S3_ALLOW_HTTP", "AWS_ALLOW_HTTP"),
    "virtual_hosted_style_request": (
        "SLATELIB_S3_VIRTUAL_HOSTED_STYLE_REQUEST",
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST",
    ),
}
"""Non-credential S3 options and the environment variables they fall back to, in order."""

S3_CREDENTIAL_ENV = {
    "access_key_id": "SLATELIB_S3_ACCESS_KEY_ID",
    "secret_access_key": "SLATELIB_S3_SECRET_ACCESS_KEY",
    "session_token": "SLATELIB_S3_SESSION_TOKEN",
}

CONF_STORE_KEYS: dict[str, dict[str, tuple[str, tuple[str, ...]]]] = {
    "s3": {
        "endpoint": ("endpoint", S3_ENV["endpoint"]),
        "region": ("region", S3_ENV["region"]),
        "allow_http": ("allow_http", S3_ENV["allow_http"]),
        "virtual_hosted_style_request": ("virtual_hosted_style_request",
                                         S3_ENV["virtual_hosted_style_request"]),
        "timeout": ("timeout", ()),
        "connect_timeout": ("connect_timeout", ()),
        "max_retries": ("max_retries", ()),
        "retry_timeout": ("retry_timeout_s", ()),
    },
    "gs": {
        "gcs_base_url": ("base_url", ("GOOGLE_BASE_URL",)),
        "gcs_service_account_path": ("service_account", (
            "GOOGLE_SERVICE_ACCOUNT", "GOOGLE_SERVICE_ACCOUNT_PATH",
            "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_SERVICE_ACCOUNT_KEY")),
        "allow_http": ("allow_http", ()),
        "timeout": ("timeout", ()),
        "connect_timeout": ("connect_timeout", ()),
        "max_retries": ("max_retries", ()),
        "retry_timeout": ("retry_timeout_s", ()),
    },
    "az": {
        "endpoint": ("endpoint", ("AZURE_STORAGE_ENDPOINT", "AZURE_ENDPOINT")),
        "azure_account_name": ("account_name", ("AZURE_STORAGE_ACCOUNT_NAME",)),
        "azure_use_emulator": ("use_emulator", ("AZURE_STORAGE_USE_EMULATOR",)),
        "allow_http": ("allow_http", ("AZURE_ALLOW_HTTP",)),
        "timeout": ("timeout", ()),
        "connect_timeout": ("connect_timeout", ()),
        "max_retries": ("max_retries", ()),
        "retry_timeout": ("retry_timeout_s", ()),
    },
}
"""Per scheme: ``[object_store]`` setting -> (store option, environment variables that win
over it)."""

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
            from slatelib.objstore.cas_records import check_cas_url

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
            from slatelib.objstore.cas_records import check_cas_url

            check_cas_url(value, what=CAS_ENV)
        out["cas"] = value
    return out


def store_defaults(scheme: str) -> dict[str, str]:
    """The registered ``[object_store]`` defaults for ``scheme``, as store options."""
    return dict(_store_defaults.get(scheme, {}))


def conf_option_label(scheme: str, option: str) -> str:
    """How ``slate config show`` names the ``[object_store]`` setting behind ``option``."""
    for field_name, (opt, _) in CONF_STORE_KEYS.get(scheme, {}).items():
        if opt == option:
            return f"[object_store] {field_name}"
    return f"[object_store] {option}"


def apply_conf_defaults(scheme: str, options: Mapping[str, str], defaults: Mapping[str, str],
                        environ: Mapping[str, str]) -> dict[str, str]:
    """``options`` plus each default whose option is not given and whose environment
    variables are all unset (the environment wins over ``[object_store]``)."""
    out = dict(options)
    env_names = dict(CONF_STORE_KEYS.get(scheme, {}).values())
    for option, value in defaults.items():
        if option in out or any(environ.get(n) for n in env_names.get(option, ())):
            continue
        out[option] = value
    return out


_CLIENT_BOOL = ("allow_http", "allow_invalid_certificates")
_CLIENT_STR = ("timeout", "connect_timeout")
_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_MEMORY_NAME = re.compile(r"[A-Za-z0-9._-]*")

_memory_lock = threading.Lock()
_memory_stores: dict[str, MemoryStore] = {}


def reset_memory_stores() -> None:
    """Forget every ``memory://`` store of this process (for tests)."""
    with _memory_lock:
        _memory_stores.clear()


def _parse(url: str, what: str) -> tuple[str, str, str]:
    if not isinstance(url, str):
        raise InvalidArgumentError(f"{what} must be a string, got {type(url).__name__}")
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in SCHEMES:
        raise InvalidArgumentError(
            f"{what} {url!r}: unknown or missing scheme (expected one of "
            f"{', '.join(s + '://' for s in SCHEMES)}){_scheme_hint(url, scheme, bool(sep))}"
        )
    if "?" in rest or "#" in rest:
        raise InvalidArgumentError(f"{what} {url!r} must not have a query or fragment")
    host, _, path = rest.partition("/")
    if path.startswith("/"):
        # "s3://bucket//db" names the key "/db", not "db": refuse rather than guess.
        raise InvalidArgumentError(f"{what} {url!r}: the path starts with an empty segment")
    if scheme == "file" and host:
        raise InvalidArgumentError(f"{what} {url!r}: file URLs take no host (use file:///dir)")
    if scheme == "memory" and not _MEMORY_NAME.fullmatch(host):
        raise InvalidArgumentError(f"{what} {url!r}: bad memory store name {host!r}")
    if scheme in ("s3", "gs", "az") and not _HOST.fullmatch(host):
        kind = "container" if scheme == "az" else "bucket"
        problem = "missing" if not host else f"invalid {kind} name {host!r}:"
        raise InvalidArgumentError(
            f"{what} {url!r}: {problem} {kind} (write {scheme}://{kind.upper()}[/path])"
            if not host else f"{what} {url!r}: {problem} letters, digits, '.', '_' and '-' only"
        )
    return scheme, host, check_prefix(path, what=f"path of {what} {url!r}")


def _scheme_hint(url: str, scheme: str, has_sep: bool) -> str:
    if not has_sep:
        if url.startswith("/"):
            return f"; a local path is written file://{url}"
        return ""
    close = difflib.get_close_matches(scheme.lower(), SCHEMES, n=1, cutoff=0.5)
    if close:
        return f"; did you mean {close[0]}://?"
    return ""


def _root_url(scheme: str, host: str) -> str:
    if scheme == "file" or (scheme == "memory" and not host):
        return f"{scheme}:///"
    return f"{scheme}://{host}"


def _join_url(root: str, path: str) -> str:
    if not path:
        return root
    return root + path if root.endswith("/") else f"{root}/{path}"


def split_store_url(url: str, *, what: str = "url") -> tuple[str, str]:
    """Split a URL into the URL of the scheme's root (the bucket, ``file:///``) and the
    normalized path below it, which may be empty: ``"file:///data"`` gives
    ``("file:///", "data")``.

    Raises:
        InvalidArgumentError: unknown scheme, malformed URL or invalid path.
    """
    scheme, host, path = _parse(url, what)
    return _root_url(scheme, host), path


def join_store_url(root: str, path: str) -> str:
    """The URL of ``path`` below the root URL ``root`` (inverse of :func:`split_store_url`)."""
    return _join_url(root, path)


def split_db_url(url: str) -> tuple[str, str]:
    """Split a database URL into the URL of its store root and the database path in it.

    ``"file:///a/b/db"`` gives ``("file:///", "a/b/db")``, ``"s3://bucket/a/db"`` gives
    ``("s3://bucket", "a/db")``, ``"memory:///x/db"`` gives ``("memory:///", "x/db")`` and
    ``"memory://name/x"`` gives ``("memory://name", "x")``.

    Raises:
        InvalidArgumentError: unknown scheme, malformed URL, invalid or empty path.
    """
    scheme, host, path = _parse(url, "database url")
    if not path:
        raise InvalidArgumentError(f"database url {url!r} has no database path")
    return _root_url(scheme, host), path


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
    from slatelib.objstore.wal_routing import with_wal_store

    return with_wal_store(store, wal_store)


def with_retries(raw: ObjectStore, attempts: int = DEFAULT_ATTEMPTS) -> ObjectStore:
    """Wrap a bare store in the production retry policy of :func:`open_store`."""
    from slatelib.objstore.two_phase import TwoPhaseObjectStore

    if isinstance(raw, TwoPhaseObjectStore):
        return raw.with_inner(with_retries(raw.inner, attempts))
    if attempts <= 1:
        return raw
    from slatelib.objstore.retrying import RetryingObjectStore

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
    scheme, host, path = _parse(url, "store url")
    opts = {k: option_to_str(k, v) for k, v in options.items()}
    defaults = dict(defaults) if scheme in CONF_STORE_KEYS else {}
    spec = StoreSpec.of(_join_url(_root_url(scheme, host), path), opts, defaults)
    generic = {k: opts.pop(k) for k in GENERIC_OPTIONS if k in opts}
    cas = generic.get("cas", "")
    if cas:
        from slatelib.objstore.cas_records import check_cas_url

        check_cas_url(cas, what="store option 'cas'")
    conditional = _as_bool("conditional_writes", generic.get("conditional_writes", "true"))
    raw = _open_backend(scheme, host, path, opts, spec, defaults)
    if not conditional:
        from slatelib.objstore.no_conditional import NoConditionalWritesStore

        raw = NoConditionalWritesStore(raw)
    if cas:
        from slatelib.objstore.cas_records import open_cas_backend
        from slatelib.objstore.two_phase import TwoPhaseObjectStore

        return TwoPhaseObjectStore(raw, open_cas_backend(cas, what="store option 'cas'"))
    return raw


def _open_backend(scheme: str, host: str, path: str, opts: dict[str, str], spec: StoreSpec,
                  defaults: Mapping[str, str]) -> ObjectStore:
    if scheme in ("file", "memory") and opts:
        raise InvalidArgumentError(f"{scheme}:// stores take no options, got {sorted(opts)}")
    try:
        if scheme == "file":
            _check_no_file_in_the_way(spec.url, path)
            local = LocalStore("/" + path, mkdir=True)
            return ObstoreObjectStore(local, spec=spec, sorted_listing=False,
                                      local_root="/" + path)
        if scheme == "memory":
            return ObstoreObjectStore(_memory_store(host), spec=spec, root=path)
        if scheme == "s3":
            return _open_s3(host, path, opts, spec, defaults)
        return _open_from_url(spec.url, apply_conf_defaults(scheme, opts, defaults, os.environ),
                              spec)
    except SlateError:
        raise
    except Exception as exc:
        raise map_error(exc, op="open", path=path, url=spec.url) from exc


def _check_no_file_in_the_way(url: str, path: str) -> None:
    """Refuse a local store root that is a file, or lies below one.

    Raises:
        PathIsFileError: naming the file (an absolute path: it is outside the store).
    """
    file = file_in_the_way("/", path)
    if file is None:
        return
    what = "is a file" if file == path else f"lies below '/{file}', a file"
    raise PathIsFileError(f"{url}: the store root '/{path}' {what}, not a directory",
                          path="", file="/" + file)


def _memory_store(name: str) -> MemoryStore:
    with _memory_lock:
        store = _memory_stores.get(name)
        if store is None:
            store = _memory_stores[name] = MemoryStore()
        return store


def _as_bool(key: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off", ""):
        return False
    raise InvalidArgumentError(f"store option {key!r} must be a boolean, got {value!r}")


def _split_client_options(opts: dict[str, str]) -> tuple[ClientConfig, RetryConfig]:
    """Pop the HTTP-client and retry options out of ``opts``."""
    client: ClientConfig = {}
    for key in _CLIENT_BOOL:
        if key in opts:
            client[key] = _as_bool(key, opts.pop(key))  # type: ignore[literal-required]
    for key in _CLIENT_STR:
        if key in opts:
            client[key] = opts.pop(key)  # type: ignore[literal-required]
    retry: RetryConfig = {}
    if "max_retries" in opts:
        raw = opts.pop("max_retries")
        if not raw.isdigit():
            raise InvalidArgumentError(f"store option 'max_retries' must be >= 0, got {raw!r}")
        retry["max_retries"] = int(raw)
    if "retry_timeout_s" in opts:
        raw = opts.pop("retry_timeout_s")
        try:
            retry["retry_timeout"] = timedelta(seconds=float(raw))
        except ValueError:
            raise InvalidArgumentError(f"bad store option retry_timeout_s={raw!r}") from None
    return client, retry


def resolve_s3_options(
    options: Mapping[str, str], environ: Mapping[str, str],
    defaults: Mapping[str, str] | None = None,
) -> tuple[dict[str, str], tuple[str, str, str | None] | None]:
    """S3 settings after the environment fallbacks: ``(config, credentials)``.

    ``config`` holds every option (credential keys removed) with the non-credential keys
    of :data:`S3_ENV` filled from the environment, then from ``defaults`` (the
    ``[object_store]`` settings, :func:`store_defaults`); ``credentials`` is
    ``(access_key_id, secret_access_key, session_token)`` from the options or the
    ``SLATELIB_S3_*`` variables, or None to let obstore's AWS chain decide.

    Raises:
        InvalidArgumentError: an access key id without a secret (or the reverse).
    """
    config = {k: v for k, v in options.items() if k not in S3_CREDENTIAL_ENV}
    for key, names in S3_ENV.items():
        if key not in config:
            found = next((environ[n] for n in names if environ.get(n)), None)
            if found is not None:
                config[key] = found
    for key, value in (defaults or {}).items():
        config.setdefault(key, value)
    sources: list[Mapping[str, str | None]] = [
        {k: options.get(k) for k in S3_CREDENTIAL_ENV},
        {k: environ.get(n) for k, n in S3_CREDENTIAL_ENV.items()},
    ]
    for source in sources:
        key_id, secret = source["access_key_id"], source["secret_access_key"]
        if key_id or secret:
            if not (key_id and secret):
                raise InvalidArgumentError(
                    "S3 access_key_id and secret_access_key must be given together"
                )
            return config, (key_id, secret, source["session_token"] or None)
    return config, None


S3_ENDPOINT_KEYS = ("endpoint", "aws_endpoint", "endpoint_url", "aws_endpoint_url")
"""The obstore ``S3Config`` spellings of the endpoint option."""


def s3_option_sources(options: Mapping[str, str], environ: Mapping[str, str],
                      defaults: Mapping[str, str] | None = None) -> dict[str, str]:
    """Where each non-credential S3 option of :func:`resolve_s3_options` comes from: ``store
    option 'KEY'``, the name of the environment variable or ``[object_store] KEY``."""
    sources = {k: f"store option {k!r}" for k in options}
    for key, names in S3_ENV.items():
        if key not in options:
            found = next((n for n in names if environ.get(n)), None)
            if found is not None:
                sources[key] = found
    for key in defaults or {}:
        sources.setdefault(key, conf_option_label("s3", key))
    return sources


def check_s3_config(config: Mapping[str, str], sources: Mapping[str, str]) -> dict[str, str]:
    """Validate the resolved S3 ``config`` and infer ``allow_http`` from an ``http://``
    endpoint (unless given). ``sources`` names where each option came from.

    Raises:
        InvalidArgumentError: a malformed endpoint or boolean, or an ``http://`` endpoint
            with ``allow_http`` explicitly false; the message names the option or variable.
    """
    out = dict(config)

    def where(key: str) -> str:
        src = sources.get(key, f"store option {key!r}")
        if src.startswith(("store option", "[object_store]")):
            return src
        return f"{src} (S3 option {key!r})"

    allow_http: bool | None = None
    if "allow_http" in out:
        raw = out["allow_http"]
        try:
            allow_http = _as_bool("allow_http", raw)
        except InvalidArgumentError:
            raise InvalidArgumentError(
                f"{where('allow_http')} must be true or false, got {raw!r}") from None
    for key in S3_ENDPOINT_KEYS:
        if key not in out:
            continue
        endpoint = out[key]
        try:
            parts = urlsplit(endpoint)
            port_ok = parts.port is None or parts.port > 0
        except ValueError:
            port_ok = False
            parts = urlsplit("")
        host = parts.hostname or ""
        if (parts.scheme not in ("http", "https") or not host or not port_ok
                or parts.query or parts.fragment or parts.username or " " in endpoint
                or not re.fullmatch(r"[A-Za-z0-9._\-:\[\]]+", host)):
            raise InvalidArgumentError(
                f"{where(key)} {endpoint!r} is not an endpoint URL: expected "
                "http://HOST[:PORT] or https://HOST[:PORT] (e.g. http://localhost:9000)")
        if parts.scheme == "http":
            if allow_http is False:
                raise InvalidArgumentError(
                    f"{where(key)} {endpoint!r} is plain HTTP but {where('allow_http')} is "
                    f"{out['allow_http']!r}: use an https:// endpoint, or allow HTTP "
                    "(SLATELIB_S3_ALLOW_HTTP=true)")
            if allow_http is None:
                out["allow_http"] = "true"
                allow_http = True
    return out


def _static_credentials(creds: tuple[str, str, str | None]) -> Callable[[], S3Credential]:
    value: S3Credential = {
        "access_key_id": creds[0],
        "secret_access_key": creds[1],
        "token": creds[2],
        "expires_at": None,
    }
    return lambda: value


def _open_s3(bucket: str, prefix: str, opts: dict[str, str], spec: StoreSpec,
             defaults: Mapping[str, str]) -> ObjectStore:
    warn_unknown_env(os.environ, only_prefix="SLATELIB_S3_")
    config, creds = resolve_s3_options(opts, os.environ, defaults)
    config = check_s3_config(config, s3_option_sources(opts, os.environ, defaults))
    client, retry = _split_client_options(config)
    provider = _static_credentials(creds) if creds else None
    kwargs: dict[str, Any] = dict(config)

    def build(retry_config: RetryConfig) -> S3Store:
        return S3Store(
            bucket,
            prefix=prefix or None,
            client_options=client,
            retry_config=retry_config,
            credential_provider=provider,
            **kwargs,
        )

    return ObstoreObjectStore(build(retry), spec=spec, cas_store=build({**retry, "max_retries": 0}))


def _open_from_url(url: str, opts: dict[str, str], spec: StoreSpec) -> ObjectStore:
    config = dict(opts)
    client, retry = _split_client_options(config)
    kwargs: dict[str, Any] = dict(config)
    store = from_url(url, client_options=client, retry_config=retry, **kwargs)
    cas = from_url(url, client_options=client, retry_config={**retry, "max_retries": 0}, **kwargs)
    return ObstoreObjectStore(store, spec=spec, cas_store=cas)


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
