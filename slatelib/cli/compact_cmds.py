"""``slate compact``: run one compaction in this process (threads), print its report.

For small databases and tests; large ones go through ``spark-submit jobs/compact.py``,
which runs the same plan on Spark executors.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from slatelib.config import parse_size
from slatelib.errors import InvalidArgumentError
from slatelib.ops.compact import ThreadTaskRunner, run_compaction

if TYPE_CHECKING:
    from slatelib.cli.app import Context


def parse_sources(text: str | None) -> list[str] | None:
    """``--sources l0:<ULID>,sr:3`` as a list (None when not given).

    Raises:
        InvalidArgumentError: an empty list.
    """
    if text is None:
        return None
    items = [s.strip() for s in text.split(",") if s.strip()]
    if not items:
        raise InvalidArgumentError("--sources needs at least one source (l0:<ULID> or sr:<id>)")
    return items


def parse_positive(text: str | None, what: str, *, size: bool = False) -> int | None:
    """A positive integer (or a size such as ``64MiB``), None when not given.

    Raises:
        InvalidArgumentError: not a positive number.
    """
    if text is None:
        return None
    if size:
        value = parse_size(text, what=what)
    else:
        try:
            value = int(text)
        except ValueError:
            raise InvalidArgumentError(f"{what} must be a positive integer, got {text!r}") \
                from None
    if value < 1:
        raise InvalidArgumentError(f"{what} must be positive, got {text!r}")
    return value


def add_compaction_args(p: argparse.ArgumentParser) -> None:
    """The compaction options shared by ``slate compact`` and ``jobs/compact.py``."""
    p.add_argument("--policy", help="l0 (default, or [compaction] policy), full, size-tiered")
    p.add_argument("--sources", help="explicit sources instead of a policy: "
                   "l0:<view ULID>,sr:<run id>,...")
    p.add_argument("--max-sst-size", help="target output SST size, e.g. 256MiB")
    p.add_argument("--parallelism", help="key ranges run at once (default: the cores)")
    p.add_argument("--dry-run", action="store_true",
                   help="plan and split only; write nothing (the report says who holds the "
                        "compactor epoch)")
    p.add_argument("--takeover", action="store_true",
                   help="fence the compactor that holds the epoch even when it is not "
                        "slatelib's (an official 0.17 compactor, a coordinator). Only after "
                        "turning it off: a live official writer with its embedded compactor "
                        "on closes with Closed(FENCED)")


def cmd_compact(ctx: Context) -> None:
    args = ctx.args
    parallelism = parse_positive(args.parallelism, "--parallelism")
    report = run_compaction(
        ctx.db_path, ctx.store, settings=ctx.settings, policy=args.policy,
        sources=parse_sources(args.sources),
        max_sst_size=parse_positive(args.max_sst_size, "--max-sst-size", size=True),
        parallelism=parallelism, dry_run=args.dry_run, takeover=args.takeover,
        runner=ThreadTaskRunner(parallelism or ctx.settings.compaction.parallelism or None),
    )
    ctx.emit(report.to_dict())


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("compact", help="compact the database in this process (threads)")
    add_compaction_args(p)
    p.set_defaults(func=cmd_compact)
