"""The backend of each URL scheme: the bare obstore adapter of a ``file://``, ``memory://``,
``s3://``, ``gs://`` or ``az://`` store, with its options resolved (explicit options, then
the environment, then the ``[object_store]`` settings). The registry
(:mod:`slatelib.objstore.registry`) picks one by scheme and wraps it; the URLs themselves
are parsed by :mod:`slatelib.objstore.url`.

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
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from obstore.store import LocalStore, MemoryStore, S3Store, from_url

from slatelib.config import warn_unknown_env
from slatelib.errors import InvalidArgumentError, PathIsFileError
from slatelib.objstore.local_files import file_in_the_way
from slatelib.objstore.object_store import ObjectStore
from slatelib.objstore.obstore_store import ObstoreObjectStore
from slatelib.objstore.spec import StoreSpec

if TYPE_CHECKING:
    from obstore.store import ClientConfig, RetryConfig, S3Credential

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

_memory_lock = threading.Lock()
_memory_stores: dict[str, MemoryStore] = {}


def reset_memory_stores() -> None:
    """Forget every ``memory://`` store of this process (for tests)."""
    with _memory_lock:
        _memory_stores.clear()


def open_file(host: str, path: str, opts: dict[str, str], spec: StoreSpec,
              defaults: Mapping[str, str]) -> ObjectStore:
    """A local directory store (``file:///path``), created if missing.

    Raises:
        PathIsFileError: the root is a file, or lies below one.
    """
    _check_no_file_in_the_way(spec.url, path)
    local = LocalStore("/" + path, mkdir=True)
    return ObstoreObjectStore(local, spec=spec, sorted_listing=False, local_root="/" + path)


def open_memory(host: str, path: str, opts: dict[str, str], spec: StoreSpec,
                defaults: Mapping[str, str]) -> ObjectStore:
    """The process-wide memory store named ``host``, rooted at ``path``."""
    return ObstoreObjectStore(_memory_store(host), spec=spec, root=path)


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


def as_bool(key: str, value: str) -> bool:
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
            client[key] = as_bool(key, opts.pop(key))  # type: ignore[literal-required]
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
            allow_http = as_bool("allow_http", raw)
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


AWS_CREDENTIAL_ENV = {
    "access_key_id": "AWS_ACCESS_KEY_ID",
    "secret_access_key": "AWS_SECRET_ACCESS_KEY",
    "session_token": "AWS_SESSION_TOKEN",
}
"""The standard AWS variables, the last static credentials :func:`resolve_s3_access` takes."""


@dataclass(frozen=True)
class S3Access:
    """How a client other than slatelib's own stores (Spark's S3A, pyarrow, delta-rs) reaches
    S3 the way :func:`open_s3` would: the resolved endpoint, region, HTTP and addressing
    style, and static credentials if any (hidden from ``repr``; never log them).

    ``virtual_hosted_style`` is None when nothing set it (slatelib's stores then use path
    style); ``credentials_from`` names where the credentials came from (``store options``,
    ``SLATELIB_S3_*``, ``AWS_*``) or is ``""`` when there are none: the client's own
    default chain (instance roles, web identity...) applies."""

    endpoint: str | None = None
    region: str | None = None
    allow_http: bool = False
    virtual_hosted_style: bool | None = None
    access_key_id: str | None = field(default=None, repr=False)
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    credentials_from: str = ""

    def credential_options(self, key_id: str, secret: str, token: str) -> dict[str, str]:
        """The static credentials under a client's own option names (``key_id``, ``secret``,
        ``token``; the token only when there is one), or ``{}`` without credentials."""
        if not (self.access_key_id and self.secret_access_key):
            return {}
        out = {key_id: self.access_key_id, secret: self.secret_access_key}
        if self.session_token:
            out[token] = self.session_token
        return out


def resolve_s3_access(options: Mapping[str, str], environ: Mapping[str, str],
                      defaults: Mapping[str, str] | None = None) -> S3Access:
    """The S3 settings of :func:`open_s3` for other clients: the options, then the
    environment, then ``defaults`` (``[object_store]``), as :func:`resolve_s3_options` and
    :func:`check_s3_config` resolve and check them; credentials from the options, else
    ``SLATELIB_S3_*``, else ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/
    ``AWS_SESSION_TOKEN`` (which obstore's chain would read too), else none. Pure.

    Raises:
        InvalidArgumentError: a malformed or inconsistent option, or a key id without its
            secret (or the reverse).
    """
    config, creds = resolve_s3_options(options, environ, defaults)
    config = check_s3_config(config, s3_option_sources(options, environ, defaults))
    source = ""
    if creds is not None:
        source = ("store options" if options.get("access_key_id") or
                  options.get("secret_access_key") else "SLATELIB_S3_*")
    else:
        key_id, secret = (environ.get(AWS_CREDENTIAL_ENV[k]) for k in
                          ("access_key_id", "secret_access_key"))
        if key_id or secret:
            if not (key_id and secret):
                raise InvalidArgumentError(
                    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together")
            creds = (key_id, secret, environ.get(AWS_CREDENTIAL_ENV["session_token"]) or None)
            source = "AWS_*"
    endpoint = next((config[k] for k in S3_ENDPOINT_KEYS if config.get(k)), None)
    vhost = config.get("virtual_hosted_style_request")
    return S3Access(
        endpoint=endpoint.rstrip("/") if endpoint else None, region=config.get("region"),
        allow_http=as_bool("allow_http", config.get("allow_http", "false")),
        virtual_hosted_style=None if vhost is None else as_bool(
            "virtual_hosted_style_request", vhost),
        access_key_id=creds[0] if creds else None,
        secret_access_key=creds[1] if creds else None,
        session_token=creds[2] if creds else None, credentials_from=source)


def _static_credentials(creds: tuple[str, str, str | None]) -> Callable[[], S3Credential]:
    value: S3Credential = {
        "access_key_id": creds[0],
        "secret_access_key": creds[1],
        "token": creds[2],
        "expires_at": None,
    }
    return lambda: value


def open_s3(bucket: str, prefix: str, opts: dict[str, str], spec: StoreSpec,
            defaults: Mapping[str, str]) -> ObjectStore:
    """An S3 bucket (``s3://bucket/prefix``): see the module docstring for its options.

    Raises:
        InvalidArgumentError: a malformed or inconsistent option.
    """
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


def open_from_url(host: str, path: str, opts: dict[str, str], spec: StoreSpec,
                  defaults: Mapping[str, str]) -> ObjectStore:
    """A ``gs://`` or ``az://`` store through obstore's ``from_url``: its options, then the
    environment, then ``[object_store]`` (:func:`apply_conf_defaults`)."""
    url = spec.url
    config = apply_conf_defaults(url.partition("://")[0], opts, defaults, os.environ)
    client, retry = _split_client_options(config)
    kwargs: dict[str, Any] = dict(config)
    store = from_url(url, client_options=client, retry_config=retry, **kwargs)
    cas = from_url(url, client_options=client, retry_config={**retry, "max_retries": 0}, **kwargs)
    return ObstoreObjectStore(store, spec=spec, cas_store=cas)
