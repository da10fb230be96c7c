"""``slate cas status|recover|collect``: the transactional store of two-phase CAS
(docs/rfcs/0012-two-phase-cas.md) for the store of ``--db`` (the database's records) or
``--store`` (every record of the store).

- ``status``: the cas store in use, how many records are committed and incomplete, and each
  incomplete one (destination, age). Writes nothing.
- ``recover``: finish or roll back every incomplete record (what the next reader or writer
  would do).
- ``collect [--min-age DURATION]`` (default 1h): the sweep of
  :meth:`slatelib.objstore.two_phase.TwoPhaseObjectStore.collect` over the database (or the
  whole store with ``--store`` alone): incomplete records, records whose object is gone,
  orphaned temporary objects, all older than ``--min-age``.

All three refuse a store without ``cas`` configured (``[object_store] cas``,
``SLATELIB_CAS_URL``) with exit code 2.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING, Any

from slatelib.config import parse_duration
from slatelib.errors import InvalidArgumentError
from slatelib.objstore import main_store_of
from slatelib.objstore.cas_records import now_ms
from slatelib.objstore.two_phase import TwoPhaseObjectStore

if TYPE_CHECKING:
    from slatelib.cli.app import Context


def _two_phase(ctx: Context) -> TwoPhaseObjectStore:
    store = main_store_of(ctx.store)
    if not isinstance(store, TwoPhaseObjectStore):
        raise InvalidArgumentError(
            f"{store.url}: no cas store configured: set [object_store] cas or SLATELIB_CAS_URL "
            "(sqlite:///PATH or postgresql://HOST/DB)")
    return store


def _prefix(ctx: Context) -> str:
    return ctx.path or ""


def cmd_status(ctx: Context) -> int:
    store = _two_phase(ctx)
    prefix = _prefix(ctx)
    records = store.records(prefix)
    now = now_ms()
    incomplete = [{"destination": r.destination, "source": r.source,
                   "age_s": round((now - r.created_ms) / 1000, 1), "size": r.size}
                  for r in records if not r.committed]
    out: dict[str, Any] = {"store": store.url, "cas": store.backend.url, "prefix": prefix,
                           "committed": len(records) - len(incomplete),
                           "incomplete": incomplete}
    ctx.emit(out)
    return 0


def cmd_recover(ctx: Context) -> int:
    store = _two_phase(ctx)
    seen = store.recover(_prefix(ctx))
    left = len(store.records(_prefix(ctx), committed=False))
    ctx.emit({"store": store.url, "prefix": _prefix(ctx), "recovered": seen,
              "incomplete_left": left})
    ctx.headline(f"{seen} incomplete record(s) finished or rolled back")
    return 0


def cmd_collect(ctx: Context) -> int:
    store = _two_phase(ctx)
    min_age = parse_duration(ctx.args.min_age, what="--min-age")
    report = store.collect(min_age, _prefix(ctx))
    ctx.emit({"store": store.url, "prefix": _prefix(ctx), "min_age_s": min_age,
              **dataclasses.asdict(report)})
    ctx.headline(f"{report.records_deleted} record(s) and {report.temps_deleted} temporary "
                 f"object(s) deleted, {report.finished} write(s) finished, "
                 f"{report.rolled_back} rolled back")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``cas status|recover|collect`` to the ``slate`` parser."""
    p = sub.add_parser("cas", help="the transactional store of two-phase CAS")
    cas = p.add_subparsers(dest="cas_command", metavar="SUBCOMMAND")
    cas.required = True
    status = cas.add_parser("status", help="records committed and incomplete (writes nothing)")
    status.set_defaults(func=cmd_status)
    recover = cas.add_parser("recover", help="finish or roll back incomplete records")
    recover.set_defaults(func=cmd_recover)
    collect = cas.add_parser("collect", help="delete leftover records and temporary objects")
    collect.add_argument("--min-age", default="1h", metavar="DURATION",
                         help="only what is older than this (default 1h)")
    collect.set_defaults(func=cmd_collect)
