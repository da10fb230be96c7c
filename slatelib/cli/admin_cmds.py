"""Admin commands: checkpoints, clones and destroy. Output is JSON.

They follow design doc 'checkpoints and clones' (docs/design.md).

    create-checkpoint [--lifetime "7days 30min 10s"] [--source UUID] [--name NAME]
    refresh-checkpoint --id UUID [--lifetime ...]
    delete-checkpoint --id UUID
    list-checkpoints [--name NAME]
    clone --parent PATH [--checkpoint UUID]      (the clone is the --db / --path database)
    destroy [--hard]
"""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING, Any

from slatelib.cli.render import render_checkpoint
from slatelib.ops.checkpoint import (
    create_checkpoint,
    delete_checkpoint,
    list_checkpoints,
    refresh_checkpoint,
)
from slatelib.ops.clone import create_clone
from slatelib.ops.destroy import destroy

if TYPE_CHECKING:
    from slatelib.cli.app import Context

_LIFETIME_HELP = (
    'lifetime in humantime form, e.g. "7days 30min 10s"; the expiry is now + lifetime. '
    "Without it the checkpoint never expires (and must be deleted explicitly)"
)


def cmd_create_checkpoint(ctx: Context) -> None:
    a = ctx.args
    cp = create_checkpoint(ctx.db_path, ctx.store, lifetime=a.lifetime, source=a.source,
                           name=a.name)
    ctx.emit(render_checkpoint(cp))


def cmd_refresh_checkpoint(ctx: Context) -> None:
    cp = refresh_checkpoint(ctx.db_path, ctx.store, ctx.args.id, lifetime=ctx.args.lifetime)
    ctx.emit(render_checkpoint(cp))


def cmd_delete_checkpoint(ctx: Context) -> None:
    deleted = delete_checkpoint(ctx.db_path, ctx.store, ctx.args.id)
    ctx.emit({"id": ctx.args.id, "deleted": deleted})


def cmd_list_checkpoints(ctx: Context) -> None:
    cps = list_checkpoints(ctx.db_path, ctx.store, name=ctx.args.name)
    ctx.emit([render_checkpoint(c) for c in cps])


def cmd_clone(ctx: Context) -> None:
    r = create_clone(ctx.db_path, ctx.args.parent, ctx.store, ctx.args.checkpoint)
    ctx.emit({
        "clone_path": r.clone_path, "parent_path": r.parent_path,
        "source_checkpoint_id": str(r.source_checkpoint_id), "manifest_id": r.manifest_id,
        "wal_ssts_copied": r.wal_ssts_copied, "created": r.created,
    })


def cmd_destroy(ctx: Context) -> None:
    r = destroy(ctx.db_path, ctx.store, soft=not ctx.args.hard)
    out: dict[str, Any] = {
        "path": r.path, "soft": r.soft, "destroyed_at_s": r.destroyed_at_s,
    }
    if not r.soft:
        out.update(deleted_objects=r.deleted_objects, released_parents=list(r.released_parents),
                   missing_parents=list(r.missing_parents), kept_objects=list(r.kept_objects))
    ctx.emit(out)


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

    p = sub.add_parser("clone", help="create the --db/--path database as a clone of --parent")
    p.add_argument("--parent", required=True, metavar="PATH",
                   help="path of the parent database in the same store")
    p.add_argument("--checkpoint", metavar="UUID",
                   help="clone from this parent checkpoint (default: a new 5-minute one)")
    p.set_defaults(func=cmd_clone)

    p = sub.add_parser("destroy", help="destroy the database (soft unless --hard)")
    p.add_argument("--hard", action="store_true",
                   help="delete every object now (refused while unexpired checkpoints exist)")
    p.set_defaults(func=cmd_destroy)
