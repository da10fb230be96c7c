"""Read-only inspection commands and bulk load: manifest, summary, scan, get, sst, ls, load."""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any

from slatelib.cli import output
from slatelib.cli.ls_cmd import cmd_ls
from slatelib.cli.render import manifest_summary, render_info, render_manifest, render_row
from slatelib.core.external_dbs import external_roots
from slatelib.db_manifest import DbManifest
from slatelib.errors import (
    CorruptObjectError,
    InvalidArgumentError,
    NotADatabaseRootError,
    ObjectMissingError,
    PathIsFileError,
)
from slatelib.flags import size, whole_number
from slatelib.format.sst import parse_sst
from slatelib.ids import parse_id, try_parse_ulid, ulid_to_str
from slatelib.ops.bulk_load import bulk_load
from slatelib.paths import WAL_DIR, DbPaths, file_name, normalize_path, parse_wal_name
from slatelib.reader import DbReader
from slatelib.store.db_root import database_root, refuse_file_root

if TYPE_CHECKING:
    from slatelib.cli.app import Context


def _key_arg(ctx: Context, value: str | None, what: str, *, default: str) -> bytes | None:
    """A key argument: a ``hex:``/``b64:``/``utf8:`` prefix, else ``--key-format``, else
    ``default`` (``auto`` for the older arguments: hex digits as hex, else text; UTF-8 for
    ``--key``)."""
    if value is None:
        return None
    return output.parse_key(value, default=ctx.key_format or default, what=what)


def _open_reader(ctx: Context) -> DbReader:
    # Read-only: the read commands never write to the database (no reader checkpoint).
    raw = getattr(ctx.args, "checkpoint", None)
    checkpoint = None if raw is None else ctx.checkpoint_id(raw, what="--checkpoint")
    return DbReader.open(
        ctx.db_path, ctx.store, mode="latest", checkpoint=checkpoint,
        merge_operator=ctx.args.merge_operator, settings=ctx.settings,
        skip_wal_replay=bool(getattr(ctx.args, "skip_wal_replay", False)),
    )


def cmd_manifest(ctx: Context) -> None:
    ms = DbManifest(ctx.store, ctx.db_path)
    mid = ctx.args.id
    stored = ms.read_latest() if mid is None else ms.try_read(mid)
    if stored is None:
        if not ms.list_ids():
            raise NotADatabaseRootError(ms.root, detail=f" (and manifest {mid} does not exist)")
        stored = ms.read(mid)
    ctx.emit(render_manifest(stored.value, stored.id))


def cmd_list_manifests(ctx: Context) -> None:
    """Every manifest version: id, size, time, whether it is the latest, and the live
    checkpoints of the latest manifest that pin it (GC keeps those)."""
    ms = DbManifest(ctx.store, ctx.db_path)
    latest = ms.read_latest()  # first: names a path that is not a database root
    paths = DbPaths(ctx.db_path)
    metas = {}
    for meta in ctx.store.list(paths.manifest_dir):
        mid = parse_id(file_name(meta.path).split(".", 1)[0])
        if mid is not None and meta.path == paths.manifest(mid):
            metas[mid] = meta
    pins: dict[int, list[str]] = {}
    for c in latest.value.checkpoints:
        pins.setdefault(c.manifest_id, []).append(str(c.id))
    ids = sorted(metas)
    if ctx.args.limit is not None:
        ids = ids[-ctx.args.limit:] if ctx.args.limit else []
    rows: list[dict[str, Any]] = [{"id": i, "bytes": metas[i].size,
             "last_modified_ms": metas[i].last_modified_ms,
             "last_modified": output.iso_ms(metas[i].last_modified_ms),
             "latest": i == latest.id, "pinned_by": sorted(pins.get(i, []))} for i in ids]

    def table() -> str:
        body = output.table(
            ["id", "bytes", "modified", "latest", "pinned by"],
            [[r["id"], output.fmt_bytes(r["bytes"]), r["last_modified"],
              "yes" if r["latest"] else "", ", ".join(c[:8] for c in r["pinned_by"])]
             for r in rows])
        return body + f"{output.fmt_count(len(metas))} manifest version(s)\n"

    ctx.emit(rows, table=table)


def cmd_summary(ctx: Context) -> None:
    stored = DbManifest(ctx.store, ctx.db_path).read_latest()
    ctx.emit(manifest_summary(stored.value, stored.id))


_VALUE_WIDTH = 80


def cmd_scan(ctx: Context) -> None:
    start = _key_arg(ctx, ctx.args.start, "--start", default="auto")
    end = _key_arg(ctx, ctx.args.end, "--end", default="auto")
    out = sys.stdout
    fmt, kf, vf = ctx.output_format, ctx.key_format, ctx.value_format
    n = 0
    with _open_reader(ctx) as reader:
        for k, v in itertools.islice(reader.scan(start, end), ctx.args.limit):
            n += 1
            if fmt == "table":
                out.write(f"{output.show_bytes(k, kf):<24}  "
                          f"{output.show_value(v, vf, key=k, limit=_VALUE_WIDTH)}\n")
            elif kf in ("utf8", "base64") or vf in ("utf8", "base64"):
                out.write(json.dumps({**output.key_fields(k, kf),
                                      **output.value_fields(v, vf, key=k)}) + "\n")
            else:
                out.write('{"key": "' + k.hex() + '", "value": "' + v.hex() + '"}\n')
    if fmt == "table":
        out.write(f"({output.fmt_count(n)} key(s))\n")


def cmd_get(ctx: Context) -> None:
    a = ctx.args
    if (a.key is None) == (a.text_key is None):
        raise InvalidArgumentError("get needs one key: --key KEY (text, or hex:/b64: ...) "
                                   "or a positional KEY")
    key = (_key_arg(ctx, a.text_key, "--key", default="utf8") if a.text_key is not None
           else _key_arg(ctx, a.key, "KEY", default="auto"))
    assert key is not None
    with _open_reader(ctx) as reader:
        value = reader.get(key)
    kf, vf = ctx.key_format, ctx.value_format
    fields = {**output.key_fields(key, kf), **output.value_fields(value, vf, key=key)}

    def table() -> str:
        shown = "(not found)" if value is None else output.show_value(value, vf, key=key)
        return f"key:   {output.show_bytes(key, kf)}\nvalue: {shown}\n"

    ctx.emit(fields, table=table)


def _resolve_sst_object(ctx: Context, obj: str) -> tuple[str, Any]:
    """Object path of an SST argument: a ULID, a WAL id, or a path (db-relative first)."""
    paths = DbPaths.of(ctx.db_path) if ctx.path is not None else None
    handle = None
    ulid = try_parse_ulid(obj.removesuffix(".sst"))
    if ulid is not None and paths is not None:
        latest = DbManifest(ctx.store, paths.root).try_read_latest()
        if latest is not None:
            handle = latest.value.sst_map.get(ulid)
            ext = external_roots(paths.root, latest.value, shape_only=True).get(ulid)
            if ext is not None:
                return DbPaths(ext).compacted(ulid), handle
        return paths.compacted(ulid), handle
    if obj.isdigit() and paths is not None:
        return paths.wal(int(obj)), None
    rel = normalize_path(obj, what="OBJECT", allow_empty=False)
    if paths is not None and paths.root:
        candidate = f"{paths.root}/{rel}"
        try:
            ctx.store.head(candidate)
            return candidate, None
        except PathIsFileError as err:
            refuse_file_root(paths.root, err)
        except ObjectMissingError:
            pass
    return rel, None


def _read_sst_object(ctx: Context) -> tuple[str, Any, bytes]:
    """The object ``sst`` prints: its path, its manifest handle (if any) and its bytes.

    Raises:
        NotADatabaseRootError: the database path is a file (or lies below one), or it has
            no manifest and the object does not exist.
        ObjectMissingError: no such object in a database.
    """
    if ctx.path is None:
        path, handle = _resolve_sst_object(ctx, ctx.args.object)
        return path, handle, ctx.store.get(path)
    root = DbPaths.of(ctx.path).root
    with database_root(root):
        path, handle = _resolve_sst_object(ctx, ctx.args.object)
        try:
            return path, handle, ctx.store.get(path)
        except ObjectMissingError as exc:
            if not DbManifest(ctx.store, root).list_ids():
                raise NotADatabaseRootError(
                    root, detail=f" (and {path!r} does not exist)") from exc
            raise


def cmd_sst(ctx: Context) -> None:
    path, handle, data = _read_sst_object(ctx)
    if not data:
        parent, _, name = path.rpartition("/")
        if file_name(parent) == WAL_DIR and parse_wal_name(name) is not None:
            ctx.emit({"path": path, "size": 0, "fence": True})
            return
        raise CorruptObjectError("the object is empty (0 bytes): not an SST", path=path)
    parsed = parse_sst(data, path=path)
    wal = parsed.info.sst_type == 1
    rows = parsed.rows() if not ctx.args.no_rows else []
    detail = ctx.args.detail
    limit = ctx.args.limit if ctx.args.limit is not None or detail else SST_SUMMARY_ROWS
    out: dict[str, Any] = {
        "path": path,
        "size": len(data),
        "footer": {"format_version": parsed.format_version,
                   "meta_offset": int.from_bytes(data[-10:-2], "big")},
        "info": render_info(parsed.info, wal=wal),
        "manifest_info_matches_footer": None if handle is None else handle.info == parsed.info,
        "index": [
            {"block": i, "offset": o, "first_key": fk.hex()}
            for i, (o, fk) in enumerate(zip(parsed.index.offsets, parsed.index.first_keys, strict=True))
        ],
        "stats": None if parsed.stats is None else {
            "num_puts": parsed.stats.num_puts, "num_deletes": parsed.stats.num_deletes,
            "num_merges": parsed.stats.num_merges, "raw_key_size": parsed.stats.raw_key_size,
            "raw_val_size": parsed.stats.raw_val_size,
            "block_stats": [list(b) for b in parsed.stats.block_stats],
        },
        "filter": None,
        "num_rows": len(rows) if not ctx.args.no_rows else None,
        "rows": [render_row(r) for r in (rows if limit is None else rows[:limit])],
    }
    bf = parsed.bloom_filter()
    if bf is not None:
        out["filter"] = {"num_probes": bf.num_probes, "bits": len(bf.bits) * 8}
    if not detail:
        out = _summarise_sst(out)
    ctx.emit(out, table=lambda: _sst_table(out, ctx.key_format, ctx.value_format))


SST_SUMMARY_ROWS = 10
"""Rows ``sst`` prints without ``--detail`` or ``--limit``."""


def _summarise_sst(out: dict[str, Any]) -> dict[str, Any]:
    """``sst`` without ``--detail``: the index as a block count and key range, the stats
    without per-block stats."""
    index = out.pop("index")
    summary: dict[str, Any] = {"detail": False}
    for k, v in out.items():
        if k == "stats" and v is not None:
            v = {sk: sv for sk, sv in v.items() if sk != "block_stats"}
        summary[k] = v
        if k == "manifest_info_matches_footer":
            summary["index_blocks"] = len(index)
            summary["index_first_key"] = index[0]["first_key"] if index else None
    return summary


def _sst_table(out: dict[str, Any], key_format: str | None,
               value_format: str | None = None) -> str:
    head = {k: v for k, v in out.items() if k not in ("rows", "index")}
    text = output.generic(head)
    index = out.get("index")
    if index:
        text += "index:\n" + output.table(
            ("BLOCK", "OFFSET", "FIRST KEY"),
            [(b["block"], b["offset"], output.show_bytes(bytes.fromhex(b["first_key"]),
                                                         key_format)) for b in index])
    rows = out.get("rows") or []
    if rows:
        text += f"rows ({len(rows)} of {out.get('num_rows')}):\n" + output.table(
            ("KEY", "SEQ", "KIND", "VALUE", "EXPIRE", "CREATE"),
            [(output.show_bytes(bytes.fromhex(r["key"]), key_format), r["seq"], r["kind"],
              "-" if r["value"] is None else output.show_value(
                  bytes.fromhex(r["value"]), value_format, key=bytes.fromhex(r["key"]),
                  limit=_VALUE_WIDTH),
              output.iso_ms(r["expire_ts"]), output.iso_ms(r["create_ts"])) for r in rows])
    return text


_LOAD_LINE = ('{"key": KEY, "value": VALUE} (as scan prints them: hex, or text, or with a '
              'hex:/b64:/utf8: prefix; or key_utf8/key_base64, value_utf8/value_base64)')


def _load_field(obj: dict[str, Any], name: str, default: str) -> bytes:
    """``obj``'s ``name`` bytes: ``name_utf8`` or ``name_base64`` when set, else ``name``
    read as a typed key (a prefix, else ``default``; hex next to a null ``name_utf8``, as
    scan prints a key that is not UTF-8)."""
    if isinstance(obj.get(f"{name}_utf8"), str):
        return str(obj[f"{name}_utf8"]).encode("utf-8")
    if isinstance(obj.get(f"{name}_base64"), str):
        return output.parse_bytes("b64:" + obj[f"{name}_base64"], what=f"{name}_base64")
    text = obj[name]
    if f"{name}_utf8" in obj or f"{name}_base64" in obj:
        default = "hex"  # scan's output: "key"/"value" are hex next to the other form
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a string")
    return output.parse_bytes(text, default=default, what=name, allow_empty=name == "value")


def _read_jsonl(f: IO[str], name: str, *, key_format: str | None = None,
                value_format: str | None = None) -> Iterator[tuple[bytes, bytes]]:
    for lineno, line in enumerate(f, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            if not isinstance(obj, dict):
                raise TypeError("not a JSON object")
            yield (_load_field(obj, "key", key_format or "auto"),
                   _load_field(obj, "value", value_format or "auto"))
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidArgumentError(f"{name}:{lineno}: expected {_LOAD_LINE}: {exc}") from None


def cmd_load(ctx: Context) -> None:
    name = ctx.args.file
    if name == "-":
        report = bulk_load(ctx.db_path, ctx.store,
                           _read_jsonl(sys.stdin, "<stdin>", key_format=ctx.key_format,
                                       value_format=ctx.value_format),
                           settings=ctx.settings, target_sst_size=ctx.args.sst_size)
    else:
        try:
            f = open(name, encoding="utf-8")
        except OSError as exc:
            raise InvalidArgumentError(f"cannot read {name}: {exc}") from exc
        with f:
            report = bulk_load(ctx.db_path, ctx.store, _read_jsonl(f, name),
                               settings=ctx.settings, target_sst_size=ctx.args.sst_size)
    ctx.emit({
        "path": report.path, "rows": report.rows, "input_pairs": report.input_pairs,
        "ssts": report.ssts, "bytes_written": report.bytes_written,
        "manifest_id": report.manifest_id, "seconds": round(report.seconds, 3),
    })
    ctx.headline(f"loaded {output.fmt_count(report.rows)} rows into {len(report.ssts)} SST(s) "
                 f"({output.fmt_bytes(report.bytes_written)}) at {ctx.db_name}; "
                 f"{output.fmt_seconds(report.seconds)}")


_CHECKPOINT_HELP = ("read the version this checkpoint pins (its id or a unique prefix) "
                    "instead of the latest")
_SKIP_WAL_HELP = ("read L0 and the sorted runs only, without replaying the WAL (as an "
                  "official DbReader with skip_wal_replay)")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("manifest", help="print a manifest as JSON (latest by default)")
    p.add_argument("--id", type=whole_number(minimum=1), help="manifest id (1 or more)")
    p.set_defaults(func=cmd_manifest)

    p = sub.add_parser("list-manifests", help="list the manifest versions: id, size, time, "
                       "latest, and the checkpoints that pin each")
    p.add_argument("--limit", type=whole_number(minimum=0), metavar="N",
                   help="only the N newest versions")
    p.set_defaults(func=cmd_list_manifests)

    p = sub.add_parser("summary", help="print a short summary of the latest manifest")
    p.set_defaults(func=cmd_summary)

    p = sub.add_parser("scan", help='print {"key": hex, "value": hex} lines in key order '
                                    "(a table on a terminal)")
    p.add_argument("--start", metavar="KEY",
                   help="first key (inclusive): text such as user:10, or hex digits (an even "
                        "number of them is read as hex), or a hex:/b64:/utf8: prefix; "
                        "--key-format fixes how unprefixed keys are read")
    p.add_argument("--end", metavar="KEY", help="end key (exclusive; read as --start)")
    p.add_argument("--limit", type=whole_number(minimum=0), metavar="N",
                   help="stop after this many keys (0 or more)")
    p.add_argument("--checkpoint", metavar="UUID", help=_CHECKPOINT_HELP)
    p.add_argument("--skip-wal-replay", action="store_true", help=_SKIP_WAL_HELP)
    p.set_defaults(func=cmd_scan)

    p = sub.add_parser("get", help="print the value of one key")
    p.add_argument("key", metavar="KEY", nargs="?",
                   help="the key: text, or an even number of hex digits (read as hex), or "
                        "a hex:/b64:/utf8: prefix (--key reads it as text always)")
    p.add_argument("--key", dest="text_key", metavar="KEY",
                   help="the key as text (UTF-8), or hex:..., b64:... (default format: "
                        "--key-format, else utf8)")
    p.add_argument("--checkpoint", metavar="UUID", help=_CHECKPOINT_HELP)
    p.add_argument("--skip-wal-replay", action="store_true", help=_SKIP_WAL_HELP)
    p.set_defaults(func=cmd_get)

    p = sub.add_parser("sst", help="summarise an SST: footer, info, index, stats and rows "
                                   "(--detail for everything)")
    p.add_argument("object", metavar="OBJECT",
                   help="SST ULID, WAL id, or object path (relative to the database first)")
    rows = p.add_mutually_exclusive_group()
    rows.add_argument("--limit", type=whole_number(minimum=0), metavar="N",
                      help="print at most this many rows (0 or more)")
    rows.add_argument("--no-rows", action="store_true", help="skip decoding the rows")
    p.add_argument("--detail", action="store_true",
                   help="print the whole index, per-block stats and every row (default: a "
                        f"summary and the first {SST_SUMMARY_ROWS} rows)")
    p.set_defaults(func=cmd_sst)

    p = sub.add_parser("ls", help="list objects with sizes and what references them")
    p.set_defaults(func=cmd_ls)

    p = sub.add_parser("load", help="bulk-load JSON lines (scan format) into a new database")
    p.add_argument("file", metavar="FILE",
                   help="JSON lines file, or - for stdin: one " + _LOAD_LINE + " a line; "
                        "--key-format/--value-format fix how unprefixed ones are read")
    p.add_argument("--sst-size", type=size(minimum=1), metavar="SIZE",
                   help="target SST size (e.g. 64MiB)")
    p.set_defaults(func=cmd_load)


__all__ = ["register", "ulid_to_str"]
