"""``slate config show``: the effective settings and store options, secrets redacted.

Settings are the defaults, then each ``--conf`` file in order, then the
``SLATELIB_<SECTION>__<KEY>`` environment variables (:func:`slatelib.config.load_settings`).
The store section describes the store of ``--db``/``--store`` without opening it: its URL,
the database path, and for ``s3://`` each option after the environment fallbacks, with where
it came from (``allow_http`` inferred from an ``http://`` endpoint shows as ``inferred``), and
which credentials apply. Secret values (secret keys, session tokens, passwords, account
keys) print as ``***``. ``--format toml`` (default) prints TOML-like text, ``--format json``
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

from slatelib.errors import InvalidArgumentError
from slatelib.exit_codes import EXIT_USAGE
from slatelib.objstore.spec import SECRET_OPTIONS
from slatelib.objstore.url import (
    check_s3_config,
    resolve_s3_options,
    s3_option_sources,
    split_store_url,
)

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
    return {section.name: dataclasses.asdict(getattr(ctx.settings, section.name))
            for section in dataclasses.fields(ctx.settings)}


def store_dict(ctx: Context, environ: Mapping[str, str]) -> tuple[dict[str, Any], bool]:
    """The store section and whether it is misconfigured."""
    if not ctx.store_url:
        return {}, False
    root, base = split_store_url(ctx.store_url, what="store url")
    scheme = root.partition("://")[0]
    out: dict[str, Any] = {"url": ctx.store_url, "scheme": scheme}
    if ctx.path is not None:
        out["path"] = ctx.path
    if scheme == "s3":
        config, creds = resolve_s3_options({}, environ)
        sources = s3_option_sources({}, environ)
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
        "settings": settings_dict(ctx),
    }
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
