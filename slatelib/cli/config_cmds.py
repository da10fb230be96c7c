"""``slate config show``: the effective settings and store options, secrets redacted.

Settings are the defaults, then each ``--conf`` file in order, then the
``SLATELIB_<SECTION>__<KEY>`` environment variables (:func:`slatelib.config.load_settings`).
The store section describes the store of ``--db``/``--store`` without opening it: its URL,
the database path, and for ``s3://`` each option after the environment fallbacks, with where
it came from (``allow_http`` inferred from an ``http://`` endpoint shows as ``inferred``), and
which credentials apply. Secret values (secret keys, session tokens, passwords, account
keys) print as ``***``. ``object_store`` lists the ``[object_store]`` settings that are set,
each with the file or ``SLATELIB_OBJECT_STORE__*`` variable it came from; in the store section
they show as ``[object_store] KEY`` where no option or environment variable overrides them. ``--format toml`` (default) prints TOML-like text, ``--format json``
(or the global ``slate --format json config show``) one JSON object. A store misconfiguration is printed as ``store.error`` and exits 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from slatelib.config import WAL_STORE_ENV
from slatelib.errors import InvalidArgumentError
from slatelib.exit_codes import EXIT_USAGE
from slatelib.objstore.backends import (
    CONF_STORE_KEYS,
    apply_conf_defaults,
    check_s3_config,
    resolve_s3_options,
    s3_option_sources,
)
from slatelib.objstore.cas_records import redact_cas_url
from slatelib.objstore.registry import conf_store_defaults
from slatelib.objstore.spec import SECRET_OPTIONS
from slatelib.objstore.url import split_store_url

if TYPE_CHECKING:
    from slatelib.cli.app import Context

REDACTED = "***"
_SECRET_NAME = re.compile(r"secret|token|password|passwd|account_key|access_key$|sas_key|"
                          r"credential|private_key", re.IGNORECASE)
_STORE_ENV_PREFIXES = {"gs": ("GOOGLE_",), "az": ("AZURE_",)}


def is_secret(name: str) -> bool:
    """Whether an option or variable named ``name`` holds a secret (its value is never
    printed); ``access_key_id`` is not one, ``secret_access_key`` is."""
    return name.lower() in SECRET_OPTIONS or bool(_SECRET_NAME.search(name))


def redact(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` with every secret's value replaced by ``***``."""
    return {k: REDACTED if is_secret(k) and v not in (None, "") else v for k, v in values.items()}


def settings_dict(ctx: Context) -> dict[str, Any]:
    out = {section.name: dataclasses.asdict(getattr(ctx.settings, section.name))
           for section in dataclasses.fields(ctx.settings)}
    out["spark"]["conf"] = redact(ctx.settings.spark.conf_dict())  # a table, not pairs
    out["object_store"]["cas"] = redact_cas_url(ctx.settings.object_store.cas)
    return out


def _setting_origin(ctx: Context, section: str, key: str, environ: Mapping[str, str]) -> str:
    """The ``SLATELIB_<SECTION>__<KEY>`` variable or the last ``--conf`` file that sets
    ``[section] key`` ("default" when none does)."""
    import tomllib

    if (section, key) == ("object_store", "wal_store"):
        if getattr(ctx.args, "wal_store", None) is not None:
            return "--wal-store"
        if environ.get(WAL_STORE_ENV) is not None:
            return WAL_STORE_ENV
    var = f"SLATELIB_{section.upper()}__{key.upper()}"
    if environ.get(var) is not None:
        return var
    for path in reversed(list(ctx.args.conf)):
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except (OSError, tomllib.TOMLDecodeError):
            continue
        table = data.get(section)
        if isinstance(table, Mapping) and key in table:
            return str(path)
    return "default"


def object_store_dict(ctx: Context, environ: Mapping[str, str]) -> dict[str, Any]:
    """The ``[object_store]`` settings that are set, with where each came from."""
    settings = ctx.settings.object_store
    out: dict[str, Any] = {}
    for f in dataclasses.fields(settings):
        value = getattr(settings, f.name)
        if value is None or value == "":
            continue
        if f.name == "cas":
            value = redact_cas_url(value)  # a PostgreSQL URL may carry a password
        out[f.name] = {"value": value,
                       "from": _setting_origin(ctx, "object_store", f.name, environ)}
    return out


def store_dict(ctx: Context, environ: Mapping[str, str]) -> tuple[dict[str, Any], bool]:
    """The store section and whether it is misconfigured."""
    if not ctx.store_url:
        return {}, False
    root, base = split_store_url(ctx.store_url, what="store url")
    scheme = root.partition("://")[0]
    out: dict[str, Any] = {"url": ctx.store_url, "scheme": scheme}
    if ctx.path is not None:
        out["path"] = ctx.path
    defaults = conf_store_defaults(ctx.settings.object_store).get(scheme, {})
    if scheme == "s3":
        config, creds = resolve_s3_options({}, environ, defaults)
        sources = s3_option_sources({}, environ, defaults)
        options: dict[str, Any] = {}
        try:
            checked = check_s3_config(config, sources)
        except InvalidArgumentError as exc:
            out["error"] = str(exc)
            checked = config
        for key, value in checked.items():
            options[key] = {"value": value, "from": sources.get(key, "inferred from the http:// endpoint")}
        out["options"] = options
        if creds is not None:
            out["credentials"] = redact({
                "from": "SLATELIB_S3_*", "access_key_id": creds[0],
                "secret_access_key": creds[1], "session_token": creds[2]})
        else:
            present = sorted(n for n in ("AWS_ACCESS_KEY_ID", "AWS_PROFILE",
                                         "AWS_WEB_IDENTITY_TOKEN_FILE") if environ.get(n))
            out["credentials"] = {
                "from": "obstore's AWS chain (environment, web identity, ECS/EC2 metadata)",
                "set": present}
    elif scheme in _STORE_ENV_PREFIXES:
        applied = apply_conf_defaults(scheme, {}, defaults, environ)
        labels = {opt: f"[object_store] {name}"
                  for name, (opt, _) in CONF_STORE_KEYS[scheme].items()}
        if applied:
            out["options"] = {k: {"value": v, "from": labels.get(k, "[object_store]")}
                              for k, v in applied.items()}
        prefixes = _STORE_ENV_PREFIXES[scheme]
        out["environment"] = redact({n: environ[n] for n in sorted(environ)
                                     if n.startswith(prefixes)})
    return out, "error" in out


def _toml_value(value: Any) -> str:
    if value is None:
        return '"null"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value))


def to_toml(data: Mapping[str, Any], prefix: str = "") -> str:
    """TOML-like text of nested dicts: scalars first, then one ``[table]`` per dict."""
    lines: list[str] = []
    scalars = {k: v for k, v in data.items() if not isinstance(v, Mapping)}
    tables = {k: v for k, v in data.items() if isinstance(v, Mapping)}
    if prefix and (scalars or not tables):
        lines.append(f"[{prefix}]")
    for key, value in scalars.items():
        lines.append(f"{key} = {_toml_value(value)}")
    for key, value in tables.items():
        if lines:
            lines.append("")
        lines.append(to_toml(value, f"{prefix}.{key}" if prefix else key).rstrip("\n"))
    return "\n".join(lines) + "\n"


def cmd_config_show(ctx: Context) -> int | None:
    store, broken = store_dict(ctx, os.environ)
    out: dict[str, Any] = {
        "conf_files": list(ctx.args.conf),
        "env_files": list(getattr(ctx.args, "env_file", None) or []),
        "settings": settings_dict(ctx),
    }
    if object_store := object_store_dict(ctx, os.environ):
        out["object_store"] = object_store
    if store:
        out["store"] = store
    fmt = ctx.args.config_format or ("json" if ctx.args.format == "json" else "toml")
    if fmt == "json":
        ctx.emit(out)
    else:
        sys.stdout.write(to_toml(out))
    return EXIT_USAGE if broken else None


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("config", help="show the effective configuration")
    csub = p.add_subparsers(dest="config_command", metavar="SUBCOMMAND")
    csub.required = True
    s = csub.add_parser(
        "show", help="print the effective settings (defaults, --conf files, SLATELIB_* "
                     "variables) and the store options of --db, with secrets redacted")
    s.add_argument("--format", dest="config_format", choices=("toml", "json"), default=None,
                   help="TOML-like text (default) or one JSON object (also the global "
                        "--format json before the command)")
    s.set_defaults(func=cmd_config_show)
