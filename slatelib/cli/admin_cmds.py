"""Admin commands: checkpoints, clones and destroy. Output is JSON.

They follow design doc 'checkpoints and clones' (docs/design.md).

    create-checkpoint [--lifetime "7days 30min 10s"] [--source UUID] [--name NAME]
    refresh-checkpoint --id UUID [--lifetime ...]
    delete-checkpoint --id UUID
    list-checkpoints [--name NAME]
    clone --parent PATH [--checkpoint UUID] [--dry-run]   (the clone is the --db / --path database)
    clone --source SPEC [--source SPEC ...] [--dry-run]
    destroy [--hard]

Every UUID may be a unique prefix of a checkpoint id of that database (``ls`` and ``gc``
print 8 characters); every PATH may be a URL inside the store of ``--db``/``--store``
(``file:///data/parent``, ``s3://bucket/parent``).

A clone ``--source`` SPEC is ``PATH[@CHECKPOINT][:START..END]``:

- ``PATH``: the source database's root in the same store (paths cannot hold ``:``), or its
  URL in that store;
- ``@CHECKPOINT``: the checkpoint UUID to clone from (default: a new 5-minute ephemeral
  checkpoint of its latest manifest); the last ``@`` starts it, so a path containing ``@``
  ends with a bare ``@`` when no checkpoint is given (``a@b@``);
- ``:START..END``: keep only the keys in ``[START, END)``; an empty START or END is
  unbounded (``:..m``, ``:m..``). Keys are plain text (UTF-8), or ``hex:`` and hex digits for
  any bytes (``hex:00ff..hex:0100``); write a key that contains ``..`` or starts with
  ``hex:`` in hex. Without ``:START..END`` the source is not projected (``PATH:..`` projects to
  every key, which sets a visible range on each view, as SlateDB 0.17 does).

Several ``--source`` make a union: their key ranges (of the data each keeps) must be
disjoint; adjacent half-open ranges are fine. ``--dry-run`` checks everything, writes
nothing, and prints the manifest 1 it would write as ``slate manifest`` does (the ephemeral
checkpoints it would create show as the nil UUID); on a finished clone it prints the report.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from typing import TYPE_CHECKING, Any

from slatelib.cli import output
from slatelib.cli.render import render_checkpoint, render_manifest, render_range
from slatelib.core.clone_plan import CloneSource
from slatelib.core.ranges import BytesRange
from slatelib.errors import InvalidArgumentError
from slatelib.ids import parse_uuid
from slatelib.ops.checkpoint import (
    create_checkpoint,
    delete_checkpoint,
    list_checkpoints,
    refresh_checkpoint,
)
from slatelib.ops.clone import CloneReport, create_clone_from_sources
from slatelib.ops.destroy import destroy

if TYPE_CHECKING:
    from slatelib.cli.app import Context

_LIFETIME_HELP = (
    'lifetime in humantime form, e.g. "7days 30min 10s"; the expiry is now + lifetime. '
    "Without it the checkpoint never expires (and must be deleted explicitly)"
)


def cmd_create_checkpoint(ctx: Context) -> None:
    a = ctx.args
    source = None if a.source is None else ctx.checkpoint_id(a.source, what="--source")
    cp = create_checkpoint(ctx.db_path, ctx.store, lifetime=a.lifetime, source=source,
                           name=a.name)
    r = render_checkpoint(cp)
    ctx.emit(r)
    ctx.headline(f"created checkpoint {r['id']} pinning manifest {r['manifest_id']}; "
                 f"expires {r['expire_time'] or 'never'}")


def cmd_refresh_checkpoint(ctx: Context) -> None:
    cp = refresh_checkpoint(ctx.db_path, ctx.store, ctx.checkpoint_id(ctx.args.id, what="--id"),
                            lifetime=ctx.args.lifetime)
    r = render_checkpoint(cp)
    ctx.emit(r)
    ctx.headline(f"checkpoint {r['id']} now expires {r['expire_time'] or 'never'}")


def cmd_delete_checkpoint(ctx: Context) -> None:
    cid = ctx.checkpoint_id(ctx.args.id, what="--id")
    deleted = delete_checkpoint(ctx.db_path, ctx.store, cid)
    ctx.emit({"id": str(cid), "deleted": deleted})
    ctx.headline(f"deleted checkpoint {cid}" if deleted else f"no checkpoint {cid}: nothing "
                 "deleted")


def checkpoints_table(rows: list[dict[str, Any]]) -> str:
    """Checkpoints (as :func:`render_checkpoint` gives them) as a table."""
    return output.table(
        ("ID", "NAME", "MANIFEST", "CREATED", "EXPIRES", "WRITER EPOCH"),
        [(r["id"], r["name"], r["manifest_id"], r["create_time"], r["expire_time"] or "never",
          r["writer_epoch"]) for r in rows])


def cmd_list_checkpoints(ctx: Context) -> None:
    cps = list_checkpoints(ctx.db_path, ctx.store, name=ctx.args.name)
    rows = [render_checkpoint(c) for c in cps]
    ctx.emit(rows, table=lambda: checkpoints_table(rows) + f"{len(rows)} checkpoint(s)\n")


def parse_key(text: str, *, what: str = "key") -> bytes:
    """A key as a person types it: plain text (UTF-8), or ``hex:``, ``b64:`` or ``utf8:``
    and the key (:func:`slatelib.cli.output.parse_key`).

    Raises:
        InvalidArgumentError: bad hex or base64, or an empty prefixed key.
    """
    return output.parse_key(text, default="utf8", what=what)


def parse_source_spec(text: str) -> CloneSource:
    """``PATH[@CHECKPOINT][:START..END]`` (module docstring) as a clone source, with a full
    checkpoint UUID.

    Raises:
        InvalidArgumentError: naming what is wrong.
    """
    src, cp = split_source_spec(text)
    if cp is None:
        return src
    return dataclasses.replace(src, checkpoint=parse_uuid(cp))


def split_source_spec(text: str) -> tuple[CloneSource, str | None]:
    """``PATH[@CHECKPOINT][:START..END]`` as a clone source without its checkpoint, and the
    checkpoint text (a UUID or a prefix of one; None when not given). ``PATH`` may be a URL.

    Raises:
        InvalidArgumentError: naming what is wrong.
    """
    scheme, sep, after = text.partition("://")
    if sep and scheme.isalnum():  # a URL: its "scheme://" is not the range's ':'
        where, colon, rng = after.partition(":")
        where = scheme + sep + where
    else:
        where, colon, rng = text.partition(":")
    path, at, cp = where.rpartition("@")
    if not at:
        path, cp = where, ""
    checkpoint = cp or None
    if not path:
        raise InvalidArgumentError(f"clone source {text!r} has no path")
    if not colon:
        return CloneSource(path), checkpoint
    cuts = [i for i in range(len(rng) - 1) if rng.startswith("..", i)]
    if len(cuts) != 1:
        raise InvalidArgumentError(
            f"clone source {text!r}: the range after ':' must be START..END with exactly one "
            "'..' (write keys that contain '.' next to the '..' in hex: hex:6162)")
    start, end = rng[:cuts[0]], rng[cuts[0] + 2:]
    projection = BytesRange.half_open(
        parse_key(start, what="start key") if start else None,
        parse_key(end, what="end key") if end else None)
    return CloneSource(path, None, projection), checkpoint


def _source_spec(text: str) -> tuple[CloneSource, str | None]:
    try:
        return split_source_spec(text)
    except InvalidArgumentError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def render_clone_report(r: CloneReport) -> dict[str, Any]:
    return {
        "clone_path": r.clone_path, "parent_path": r.parent_path,
        "source_checkpoint_id": str(r.source_checkpoint_id), "manifest_id": r.manifest_id,
        "wal_ssts_copied": r.wal_ssts_copied, "created": r.created,
        "sources": [{"path": s.path, "checkpoint": None if s.checkpoint is None
                     else str(s.checkpoint), "projection": render_range(s.projection)}
                    for s in r.sources],
        "dry_run": r.dry_run,
    }


def _resolve_source(ctx: Context, src: CloneSource, raw: str | None) -> CloneSource:
    """``src`` with its path made store-relative (it may be a URL) and a checkpoint prefix
    (``raw``) resolved among the source's checkpoints."""
    path = ctx.path_in_store(src.path, what="clone source")
    checkpoint = src.checkpoint
    if raw is not None:
        checkpoint = ctx.checkpoint_id(raw, db_path=path, what=f"checkpoint of {path!r}")
    return dataclasses.replace(src, path=path, checkpoint=checkpoint)


def cmd_clone(ctx: Context) -> None:
    a = ctx.args
    if a.sources is None:
        if a.parent is None:
            raise InvalidArgumentError("clone needs --parent PATH or one or more --source SPEC")
        sources = [_resolve_source(ctx, CloneSource(a.parent, None), a.checkpoint)]
    elif a.checkpoint is not None:
        raise InvalidArgumentError(
            "--checkpoint goes with --parent; with --source write PATH@CHECKPOINT")
    else:
        sources = [_resolve_source(ctx, src, cp) for src, cp in a.sources]
    r = create_clone_from_sources(ctx.db_path, sources, ctx.store, dry_run=a.dry_run)
    if r.planned_manifest is not None:
        ctx.emit(render_manifest(r.planned_manifest, r.manifest_id or 1))
        ctx.headline(f"dry run: would clone {len(sources)} source(s) into {ctx.db_name}; "
                     "nothing written")
    else:
        ctx.emit(render_clone_report(r))
        ctx.headline(
            f"{'created' if r.created else 'found existing'} clone {ctx.db_name} of "
            f"{len(r.sources)} source(s) at manifest {r.manifest_id}; "
            f"{r.wal_ssts_copied} WAL SST(s) copied")


def cmd_destroy(ctx: Context) -> None:
    r = destroy(ctx.db_path, ctx.store, soft=not ctx.args.hard)
    out: dict[str, Any] = {
        "path": r.path, "soft": r.soft, "destroyed_at_s": r.destroyed_at_s,
        "destroyed_at": output.iso_s(r.destroyed_at_s),
    }
    if not r.soft:
        out.update(deleted_objects=r.deleted_objects, released_parents=list(r.released_parents),
                   missing_parents=list(r.missing_parents), kept_objects=list(r.kept_objects))
    ctx.emit(out)
    if r.soft:
        ctx.headline(f"soft-destroyed {ctx.db_name} at {out['destroyed_at']}")
    else:
        ctx.headline(f"destroyed {ctx.db_name}: {r.deleted_objects} object(s) deleted, "
                     f"{len(r.kept_objects)} kept")


_DASH_VALUE = re.compile(r"^-\d")


def _take_dash_values(p: argparse.ArgumentParser) -> None:
    """Let ``--lifetime -1s`` reach the lifetime check ("must not be negative") instead of
    argparse's "expected one argument": argparse takes only plain negative numbers as values.
    None of these commands has an option that starts with a digit."""
    p._negative_number_matcher = _DASH_VALUE


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("create-checkpoint",
                       help="create a checkpoint of the current manifest (or of --source)")
    _take_dash_values(p)
    p.add_argument("-l", "--lifetime", help=_LIFETIME_HELP)
    p.add_argument("-s", "--source", metavar="UUID",
                   help="an existing checkpoint to copy (same manifest, new lifetime and name)")
    p.add_argument("-n", "--name", help="a name to list the checkpoint by (not unique)")
    p.set_defaults(func=cmd_create_checkpoint)

    p = sub.add_parser("refresh-checkpoint", help="set a checkpoint's expiry to now + lifetime")
    _take_dash_values(p)
    p.add_argument("-i", "--id", required=True, metavar="UUID", help="the checkpoint id")
    p.add_argument("-l", "--lifetime", help=_LIFETIME_HELP)
    p.set_defaults(func=cmd_refresh_checkpoint)

    p = sub.add_parser("delete-checkpoint", help="delete a checkpoint")
    p.add_argument("-i", "--id", required=True, metavar="UUID", help="the checkpoint id")
    p.set_defaults(func=cmd_delete_checkpoint)

    p = sub.add_parser("list-checkpoints", help="list the checkpoints (JSON array)")
    p.add_argument("-n", "--name", help="only checkpoints with exactly this name")
    p.set_defaults(func=cmd_list_checkpoints)

    p = sub.add_parser(
        "clone", help="create the --db/--path database as a clone of --parent, or of the "
                      "union of --source PATH[@CHECKPOINT][:START..END] (each projected)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--parent", metavar="PATH",
                       help="path (or URL) of the parent database in the same store (a full "
                            "clone)")
    which.add_argument("--source", dest="sources", action="append", type=_source_spec,
                       metavar="SPEC",
                       help="a source PATH[@CHECKPOINT][:START..END], repeatable (a union); "
                            "START/END are plain text or hex:..., empty = unbounded, END "
                            "excluded")
    p.add_argument("--checkpoint", metavar="UUID",
                   help="with --parent: clone from this parent checkpoint (default: a new "
                        "5-minute one)")
    p.add_argument("--dry-run", action="store_true",
                   help="check everything, write nothing, print the manifest the clone would "
                        "start from")
    p.set_defaults(func=cmd_clone)

    p = sub.add_parser("destroy", help="destroy the database (soft unless --hard)")
    p.add_argument("--hard", action="store_true",
                   help="delete every object now (refused while unexpired checkpoints exist)")
    p.set_defaults(func=cmd_destroy)
