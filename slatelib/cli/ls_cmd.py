"""``slate ls``: every object of a database, its size, and what keeps it.

References follow 0.17's garbage-collection rules exactly, by reusing GC's planning
(:mod:`slatelib.core.gc_plan`): the live set is the latest manifest plus the manifests its
checkpoints pin; a compacted SST is referenced by the live manifests whose views name it
(clone SSTs live under the source database, ``external_dbs``); a WAL SST is referenced
while it lies in a replay range (``[replay_after_wal_id, inf)`` of the latest manifest,
``(replay_after_wal_id, wal_id_last_seen]`` of each checkpoint's manifest); the latest
compactions file is the compactor's state. Referenced objects that do not exist are
reported with ``"missing": true``. The last JSON line is ``{"totals": {"kinds": {kind:
{"count", "bytes", "unreferenced", "unreferenced_bytes", "missing", "external"}}, "count",
"bytes", ...}}``; ``--format table`` prints a table of objects and one of totals per kind.
``ls`` writes nothing. With a WAL store (``--wal-store``) the WAL objects are those of
the WAL store, and the totals line names it (``"wal_store"``).
"""

from __future__ import annotations

import gc
import json
import sys
from collections.abc import Iterable, Iterator
from itertools import compress
from typing import TYPE_CHECKING, Any

from slatelib.cli import output
from slatelib.cli.ls_view import COMPACTED, UNREFERENCED, LsView, build_view
from slatelib.objstore import ObjectStore, wal_store_of

if TYPE_CHECKING:
    from slatelib.cli.app import Context


def list_objects(store: ObjectStore, root: str, now_ms: int) -> Iterator[dict[str, Any]]:
    """One record per object of the database at ``root`` (sorted by path), then one per
    referenced object that is not under it (clone SSTs) or that does not exist.

    Raises:
        ManifestMissingError: no database at ``root``.
        DataError: the latest manifest or a pinned one does not decode.
    """
    yield from build_view(store, root, now_ms).rows()


_ROWS_PER_WRITE = 16384

_KIND_ORDER = ("manifest", "wal", "wal_fence", "compacted", "compactions", "boundary",
               "unknown")


class _Tally:
    """Count and bytes per object kind, and of the unreferenced, missing and external."""

    def __init__(self) -> None:
        self.kinds: dict[str, dict[str, int]] = {}

    def _of(self, kind: str) -> dict[str, int]:
        return self.kinds.setdefault(kind, {"count": 0, "bytes": 0, "unreferenced": 0,
                                            "unreferenced_bytes": 0, "missing": 0,
                                            "external": 0})

    def add(self, rows: Iterable[dict[str, Any]]) -> None:
        for row in rows:
            t = self._of(row["kind"])
            size = row["size"] or 0
            t["count"] += 1
            t["bytes"] += size
            if row["referenced_by"] == [UNREFERENCED]:
                t["unreferenced"] += 1
                t["unreferenced_bytes"] += size
            t["missing"] += bool(row.get("missing"))
            t["external"] += bool(row.get("external"))

    def add_referenced(self, kind: str, count: int, size: int) -> None:
        """``count`` referenced objects of ``kind``, present, of ``size`` bytes in all."""
        if count:
            t = self._of(kind)
            t["count"] += count
            t["bytes"] += size

    def result(self) -> dict[str, Any]:
        kinds = self.kinds
        order = {k: i for i, k in enumerate(_KIND_ORDER)}
        ordered = dict(sorted(kinds.items(), key=lambda kv: (order.get(kv[0], 99), kv[0])))
        return {"kinds": ordered,
                "count": sum(t["count"] for t in kinds.values()),
                "bytes": sum(t["bytes"] for t in kinds.values()),
                "unreferenced": sum(t["unreferenced"] for t in kinds.values()),
                "unreferenced_bytes": sum(t["unreferenced_bytes"] for t in kinds.values())}


def totals(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Count and bytes per object kind (and of the unreferenced and missing ones), then of
    all objects: ``ls``'s last line."""
    tally = _Tally()
    tally.add(rows)
    return tally.result()


def _table(rows: list[dict[str, Any]], tot: dict[str, Any]) -> str:
    objects = output.table(
        ("KIND", "SIZE", "MODIFIED", "PATH", "REFERENCED BY"),
        [(r["kind"] + (" (missing)" if r.get("missing") else ""), output.fmt_bytes(r["size"]),
          r.get("last_modified") or ("external" if r.get("external") else "-"), r["path"],
          "; ".join(r["referenced_by"])) for r in rows])
    kinds = [(k, output.fmt_count(t["count"]), output.fmt_bytes(t["bytes"]),
              output.fmt_count(t["unreferenced"]), output.fmt_bytes(t["unreferenced_bytes"]))
             for k, t in tot["kinds"].items()]
    kinds.append(("total", output.fmt_count(tot["count"]), output.fmt_bytes(tot["bytes"]),
                  output.fmt_count(tot["unreferenced"]),
                  output.fmt_bytes(tot["unreferenced_bytes"])))
    return objects + "\n" + output.table(
        ("KIND", "OBJECTS", "SIZE", "UNREFERENCED", "UNREFERENCED SIZE"), kinds)


_ENCODE = json.JSONEncoder().encode
_STR = json.encoder.encode_basestring_ascii  # what JSONEncoder uses for str (ensure_ascii)
_ROW_KEYS = ("path", "kind", "size", "last_modified_ms", "last_modified", "referenced_by")


def json_line(row: dict[str, Any]) -> str:
    """``json.JSONEncoder().encode(row)`` (what ``ctx.emit`` writes), built from a template
    for the common row: these six keys in this order, ints, strs and a list of strs (the
    C string escaper, the same separators); any other row goes to the encoder."""
    if tuple(row) == _ROW_KEYS:
        path, kind, size, ms_, when, refs = row.values()
        if (type(path) is str and type(kind) is str and type(size) is int
                and type(ms_) is int and type(when) is str and type(refs) is list
                and all(type(r) is str for r in refs)):
            return (f'{{"path": {_STR(path)}, "kind": {_STR(kind)}, "size": {size!r}, '
                    f'"last_modified_ms": {ms_!r}, "last_modified": {_STR(when)}, '
                    f'"referenced_by": [{", ".join(map(_STR, refs))}]}}')
    return _ENCODE(row)


def _only(kind: type, values: list[Any]) -> bool:
    return set(map(type, values)) <= {kind}


def _compacted_lines(paths: list[str], sizes: list[int], mtimes: list[int],
                     refs: list[str | None], when: dict[int, str],
                     why: dict[str | None, str], plain: bool) -> list[str]:
    """``json_line`` of the row of each referenced SST (str path, int size and time), from
    ``when`` (time -> its JSON text, then ``, "last_modified": `` and the escaped ISO time)
    and the escaped reference texts; a row without reference gets a placeholder.
    ``plain``: the path of every row with a reference is its own JSON text (in quotes)."""
    if not plain:
        paths = [_STR(p)[1:-1] if type(p) is str else p for p in paths]
    return [f'{{"path": "{p}", "kind": "compacted", "size": {s}, "last_modified_ms": {when[t]}, '
            f'"referenced_by": [{why[r]}]}}'
            for p, s, t, r in zip(paths, sizes, mtimes, refs, strict=True)]


def write_json(view: LsView, write: Any) -> dict[str, Any]:
    """Write one JSON line per row of ``view`` (exactly ``json_line(row)`` of each row of
    :meth:`LsView.rows`), a batch of lines per ``write`` call; return the totals.

    The rows of referenced SSTs are formatted from the columns, with every distinct time
    and reference escaped once (and their paths only if one could need it,
    :attr:`LsView.plain`); every other row is built as a dict and goes through
    :func:`json_line`.
    """
    times = view.times()
    tally = _Tally()
    if not (_only(int, view.sizes) and _only(int, view.mtimes)):
        rows = list(view.rows())  # not what a store lists: the general path, row by row
        for i in range(0, len(rows), _ROWS_PER_WRITE):
            write("".join(json_line(r) + "\n" for r in rows[i:i + _ROWS_PER_WRITE]))
        tally.add(rows)
        return tally.result()
    when = {ms: f'{ms}, "last_modified": {_STR(text)}' for ms, text in times.items()}
    why: dict[str | None, str] = {ref: _STR(ref) for ref in set(view.refs) if ref is not None}
    why[None] = ""
    slow: list[dict[str, Any]] = []
    for lo in range(0, len(view.paths), _ROWS_PER_WRITE):
        hi = lo + _ROWS_PER_WRITE
        refs = view.refs[lo:hi]
        lines = _compacted_lines(view.paths[lo:hi], view.sizes[lo:hi], view.mtimes[lo:hi],
                                 refs, when, why, view.plain)
        for i in [i for i, ref in enumerate(refs) if ref is None]:
            row = view.slow_row(lo + i, times)
            slow.append(row)
            lines[i] = json_line(row)
        lines.append("")
        write("\n".join(lines))
    if view.tail:
        write("".join(json_line(r) + "\n" for r in view.tail))
    referenced = [ref is not None for ref in view.refs]
    tally.add_referenced(COMPACTED, len(view.refs) - view.refs.count(None),
                         sum(compress(view.sizes, referenced)))
    tally.add(slow)
    tally.add(view.tail)
    return tally.result()


def cmd_ls(ctx: Context) -> None:
    """One JSON line per object, then ``{"totals": ...}``; or a table and a totals table."""
    from slatelib.clock import SYSTEM_CLOCK

    # The cyclic collector is paused while the view is built and written (as for a
    # compaction plan, docs/rfcs/0014-large-manifest-planning.md): the objects made form no
    # cycles, so it could free nothing, but the collections that 100k listed objects
    # trigger would walk the decoded manifest's 100k views each time. Reference counting
    # frees everything as usual; the collector is re-enabled (if it was) before returning.
    enabled = gc.isenabled()
    gc.disable()
    try:
        view = build_view(ctx.store, ctx.db_path, SYSTEM_CLOCK.now_ms())
        if ctx.output_format == "table":
            rows = list(view.rows())
            sys.stdout.write(_table(rows, totals(rows)))
            return
        tot = write_json(view, sys.stdout.write)
    finally:
        if enabled:
            gc.enable()
    wal = wal_store_of(ctx.store)
    ctx.emit({"totals": tot} if wal is None else {"totals": tot, "wal_store": wal.url})


__all__ = ["cmd_ls", "json_line", "list_objects", "totals", "write_json"]
