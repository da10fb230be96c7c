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
``ls`` writes nothing.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from slatelib.cli import output
from slatelib.cli.output import iso_ms
from slatelib.core.external_dbs import external_roots
from slatelib.core.gc_plan import LiveSet, build_rules, checkpoint_manifest_ids, referenced_ssts
from slatelib.core.gc_rules import GcOptions, GcRules, ObjectKind, classify
from slatelib.core.gc_text import checkpoint_label
from slatelib.core.manifest import Manifest
from slatelib.errors import ObjectMissingError
from slatelib.format import manifest_native
from slatelib.ids import Ulid, ulid_to_str
from slatelib.objstore import ObjectMeta, ObjectStore
from slatelib.ops.gc.state import read_compactions_state
from slatelib.paths import DbPaths
from slatelib.store.manifest_store import ManifestStore, StoredManifest

if TYPE_CHECKING:
    from slatelib.cli.app import Context

_HEAD_THREADS = 8


def _live_set(ms: ManifestStore, latest: StoredManifest) -> tuple[LiveSet, dict[int, str]]:
    """The live set, tolerating checkpoints whose manifest is gone (returned as
    manifest id -> who pins it, so they are listed as missing)."""
    pinned: dict[int, Manifest] = {}
    missing: dict[int, str] = {}
    for mid in checkpoint_manifest_ids(latest.value):
        if mid == latest.id:
            continue
        got = ms.try_read(mid)
        if got is None:
            missing[mid] = "; ".join(checkpoint_label(c) for c in latest.value.checkpoints
                                     if c.manifest_id == mid)
        else:
            pinned[mid] = got.value
    return LiveSet(latest.id, latest.value, pinned), missing


def _sst_paths(root: str, live: LiveSet) -> dict[Ulid, str]:
    """Object path of every SST a live manifest references (clone SSTs under their
    source database)."""
    own = DbPaths(root)
    out: dict[Ulid, str] = {}
    for m in live.manifests().values():
        ext = external_roots(root, m, shape_only=True)  # listing only reads
        ids = [sid for sid in m.referenced_sst_ids() if sid not in out]
        names = _own_names(own, [sid for sid in ids if sid not in ext])
        for sid in ids:
            root_of = ext.get(sid)
            out[sid] = names[sid] if root_of is None else DbPaths(root_of).compacted(sid)
    return out


def _own_names(own: DbPaths, ids: list[Ulid]) -> dict[Ulid, str]:
    """``own.compacted(sid)`` of every id: formatted natively in one call when the manifest
    extension is built (a database of 100k SSTs has 100k names), else one by one."""
    ext = manifest_native.ext
    if ext is not None and ids:
        head, _, tail = own.compacted(0).rpartition(_ZERO_NAME)
        try:
            return dict(zip(ids, ext.ulid_names(head, tail, list[int](ids)), strict=True))
        except (OverflowError, TypeError, ValueError):
            pass  # an id out of range (or a non-ASCII root): the reference path says which
    return {sid: own.compacted(sid) for sid in ids}


_ZERO_NAME = ulid_to_str(0)


def _reasons(rules: GcRules, compactions_id: int | None, refs: dict[Ulid, str],
             meta: ObjectMeta) -> tuple[str, list[str]]:
    """The kind of a listed object and what references it."""
    c = classify(rules.root, meta.path, meta.size)
    out: list[str] = []
    if c.kind is ObjectKind.MANIFEST:
        if c.id == rules.manifests.latest_id:
            out.append("latest manifest")
        pin = rules.manifests.pinned.get(c.id or 0)
        if pin:
            out.append(f"pinned by {pin}")
    elif c.kind is ObjectKind.COMPACTIONS:
        if c.id == compactions_id:
            out.append("latest compactions file (the compactor's state)")
    elif c.kind in (ObjectKind.WAL, ObjectKind.WAL_FENCE):
        if c.kind is ObjectKind.WAL_FENCE:
            out.append("writer fence (zero bytes)")
        out += [f"WAL {c.id} {r.detail}" for r in rules.wal_ranges if r.contains(c.id or 0)]
    elif c.kind is ObjectKind.COMPACTED:
        ref = refs.get(Ulid(c.id or 0))
        if ref is not None:
            out.append(ref)
    elif c.kind is ObjectKind.BOUNDARY or c.why:
        out.append(c.why)
    return c.kind.value, out


def _head_all(store: ObjectStore, paths: list[str]) -> dict[str, int | None]:
    def head(p: str) -> int | None:
        try:
            return store.head(p).size
        except ObjectMissingError:
            return None

    if not paths:
        return {}
    with ThreadPoolExecutor(min(_HEAD_THREADS, len(paths))) as pool:
        return dict(zip(paths, pool.map(head, paths), strict=True))


def list_objects(store: ObjectStore, root: str, now_ms: int) -> Iterator[dict[str, Any]]:
    """One record per object of the database at ``root`` (sorted by path), then one per
    referenced object that is not under it (clone SSTs) or that does not exist.

    Raises:
        ManifestMissingError: no database at ``root``.
        DataError: the latest manifest or a pinned one does not decode.
    """
    ms = ManifestStore(store, root)
    latest = ms.read_latest()
    live, lost_manifests = _live_set(ms, latest)
    state = read_compactions_state(store, root)
    rules = build_rules(root, live, state, now_ms=now_ms, options=GcOptions())
    refs = referenced_ssts(live)
    sst_paths = _sst_paths(root, live)
    expected = {path: refs[sid] for sid, path in sst_paths.items()}
    for mid, who in lost_manifests.items():
        expected[ms.path(mid)] = f"pinned by {who}"
    # A listed object at the exact path of a referenced SST of this database is that SST
    # (classify would parse its name back to the same id): its kind and reference come
    # from a dict lookup. Every other object is classified one by one.
    own_dir = DbPaths(root).compacted_dir + "/"
    referenced_here = {path: refs[sid] for sid, path in sst_paths.items()
                       if path.startswith(own_dir) and "/" not in path[len(own_dir):]}
    iso: dict[int | None, str | None] = {}
    seen: set[str] = set()
    for meta in sorted(store.list(root), key=_PATH):
        path = meta.path
        seen.add(path)
        ref = referenced_here.get(path)
        if ref is not None:
            kind, reasons = _COMPACTED, [ref]
        else:
            kind, reasons = _reasons(rules, state.version_id, refs, meta)
        ms_ = meta.last_modified_ms
        when = iso.get(ms_, _UNSET)
        if when is _UNSET:
            when = iso[ms_] = iso_ms(ms_)
        yield {"path": path, "kind": kind, "size": meta.size,
               "last_modified_ms": ms_, "last_modified": when,
               "referenced_by": reasons or ["unreferenced"]}
    prefix = root + "/" if root else ""
    outside = sorted(p for p in expected if p not in seen and not p.startswith(prefix))
    sizes = _head_all(store, outside)
    for path in sorted(p for p in expected if p not in seen):
        size = sizes.get(path)
        row: dict[str, Any] = {"path": path, "kind": "compacted" if "/compacted/" in path
                               else "manifest", "size": size}
        if path in sizes:
            row["external"] = True
        if size is None:
            row["missing"] = True
        row["referenced_by"] = [expected[path]]
        yield row


_PATH = attrgetter("path")
_COMPACTED = ObjectKind.COMPACTED.value
_UNSET: Any = object()

_LINES_PER_WRITE = 4096

_KIND_ORDER = ("manifest", "wal", "wal_fence", "compacted", "compactions", "boundary",
               "unknown")


def totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Count and bytes per object kind (and of the unreferenced and missing ones), then of
    all objects: ``ls``'s last line."""
    kinds: dict[str, dict[str, int]] = {}
    for row in rows:
        t = kinds.setdefault(row["kind"], {"count": 0, "bytes": 0, "unreferenced": 0,
                                           "unreferenced_bytes": 0, "missing": 0,
                                           "external": 0})
        size = row["size"] or 0
        t["count"] += 1
        t["bytes"] += size
        if row["referenced_by"] == ["unreferenced"]:
            t["unreferenced"] += 1
            t["unreferenced_bytes"] += size
        t["missing"] += bool(row.get("missing"))
        t["external"] += bool(row.get("external"))
    order = {k: i for i, k in enumerate(_KIND_ORDER)}
    ordered = dict(sorted(kinds.items(), key=lambda kv: (order.get(kv[0], 99), kv[0])))
    return {"kinds": ordered,
            "count": sum(t["count"] for t in kinds.values()),
            "bytes": sum(t["bytes"] for t in kinds.values()),
            "unreferenced": sum(t["unreferenced"] for t in kinds.values()),
            "unreferenced_bytes": sum(t["unreferenced_bytes"] for t in kinds.values())}


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


def cmd_ls(ctx: Context) -> None:
    """One JSON line per object, then ``{"totals": ...}``; or a table and a totals table."""
    from slatelib.clock import SYSTEM_CLOCK

    rows: list[dict[str, Any]] = []
    table = ctx.output_format == "table"
    # JSON lines are written in batches (a database of 100k SSTs has 100k lines): the same
    # text as ctx.emit writes, one write per batch.
    batch: list[str] = []
    for row in list_objects(ctx.store, ctx.db_path, SYSTEM_CLOCK.now_ms()):
        rows.append(row)
        if not table:
            batch.append(json_line(row))
            if len(batch) >= _LINES_PER_WRITE:
                sys.stdout.write("\n".join(batch) + "\n")
                batch.clear()
    if batch:
        sys.stdout.write("\n".join(batch) + "\n")
    tot = totals(rows)
    if table:
        sys.stdout.write(_table(rows, tot))
    else:
        ctx.emit({"totals": tot})


__all__ = ["cmd_ls", "list_objects"]
