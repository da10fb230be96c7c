"""What ``slate ls`` shows of a database: every listed object with its kind and what keeps
it, then the referenced objects that are not listed. Columns, not one object per row.

References follow 0.17's garbage-collection rules by reusing GC's planning
(:mod:`slatelib.core.gc_plan`); see :mod:`slatelib.cli.ls_cmd` for what is printed.

A database of 100k SSTs lists 100k objects, nearly all of them referenced SSTs at the exact
path their manifest names. Those are matched by a dict lookup of the listed path (classify
would parse the name back to the same id and find the same reference) and their rows are
built by :mod:`slatelib.cli.ls_cmd` from the columns; every other object goes through
:func:`reasons`, the per-object classification. docs/rfcs/0014-large-manifest-planning.md,
"``slate ls``".
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import islice
from operator import attrgetter, lt
from typing import Any

from slatelib.cli.output import iso_ms
from slatelib.core.external_dbs import external_roots
from slatelib.core.gc_plan import LiveSet, build_rules, checkpoint_manifest_ids, referenced_ssts
from slatelib.core.gc_rules import GcOptions, GcRules, ObjectKind, classify
from slatelib.core.gc_text import checkpoint_label
from slatelib.core.manifest import Manifest
from slatelib.errors import ObjectMissingError
from slatelib.format import seam
from slatelib.ids import Ulid
from slatelib.objstore import ObjectMeta, ObjectStore
from slatelib.ops.gc.state import read_compactions_state
from slatelib.paths import DbPaths
from slatelib.store.manifest_store import ManifestStore, StoredManifest
from slatelib.store.wal_store import WalStore

_HEAD_THREADS = 8
COMPACTED = ObjectKind.COMPACTED.value
UNREFERENCED = "unreferenced"


def live_set(ms: ManifestStore, latest: StoredManifest) -> tuple[LiveSet, dict[int, str]]:
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


# ------------------------------------------------------------------ referenced SST paths
_SST_ID = attrgetter("sst_id")


def sst_names(root: str, ids: list[Ulid]) -> list[str]:
    """``DbPaths(root).compacted(sid)`` of every id, in order (:func:`slatelib.paths.ulid_names`,
    in one native call when the extension is built: a database of 100k SSTs has 100k
    names)."""
    return seam.ulid_names(*DbPaths(root).compacted_parts, ids)


def referenced_paths(root: str, live: LiveSet,
                     refs: dict[Ulid, str]) -> tuple[dict[str, str], dict[str, str]]:
    """Object path -> reference (``refs``: :func:`referenced_ssts` of ``live``) of every
    SST a live manifest references: those under this database's ``compacted/``, then those
    of source databases (clone SSTs). The first live manifest that names an SST decides
    where it lives."""
    manifests = live.manifests().values()
    if not any(m.external_dbs for m in manifests):  # no clone: every SST is under root
        return dict(zip(sst_names(root, list(refs)), refs.values(), strict=True)), {}
    own: dict[str, str] = {}
    theirs: dict[str, str] = {}
    placed: set[Ulid] = set()
    get = refs.__getitem__
    for m in manifests:
        ext = external_roots(root, m, shape_only=True)  # listing only reads
        new = set(map(_SST_ID, m.all_views()))
        new.difference_update(placed)
        placed |= new
        by_root: dict[str, list[Ulid]] = {}
        for sid in new.intersection(ext):
            by_root.setdefault(ext[sid], []).append(sid)
        mine = list(new.difference(ext))
        own.update(zip(sst_names(root, mine), map(get, mine), strict=True))
        for root_of, ids in by_root.items():
            theirs.update(zip(sst_names(root_of, ids), map(get, ids), strict=True))
    return own, theirs


# ------------------------------------------------------------------------- per object
def reasons(rules: GcRules, compactions_id: int | None, refs: dict[Ulid, str],
            meta: ObjectMeta) -> tuple[str, list[str]]:
    """The kind of a listed object and what references it (the per-object path)."""
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


_MAX_FAST_MS = 253_402_300_800_000  # 10000-01-01T00:00:00Z: four-digit years below it


def iso_times(mtimes: Iterable[int]) -> dict[int, str]:
    """``iso_ms(ms)`` of every distinct value: a day's date is formatted once, the time of
    day by arithmetic (a database's objects may all have distinct times)."""
    days: dict[int, str] = {}
    out: dict[int, str] = {}
    for ms in set(mtimes):
        if type(ms) is not int or not 0 <= ms < _MAX_FAST_MS:
            out[ms] = iso_ms(ms)  # type: ignore[assignment]  # a str for every int
            continue
        day, second = divmod(ms // 1000, 86_400)
        date = days.get(day)
        if date is None:
            date = days[day] = (iso_ms(day * 86_400_000) or "")[:-9]  # minus "HH:MM:SSZ"
        hour, second = divmod(second, 3600)
        minute, second = divmod(second, 60)
        out[ms] = f"{date}{hour:02d}:{minute:02d}:{second:02d}Z"
    return out


# ------------------------------------------------------------------------------ view
@dataclass
class LsView:
    """The objects of one database as ``ls`` shows them.

    The listed objects are columns in path order: ``paths``, ``sizes``, ``mtimes`` (Unix
    ms) and ``refs``, the reference of an object that is a referenced SST of this database
    at its exact path (its kind is ``compacted``), else None (its kind and references come
    from :func:`reasons` on ``metas[i]``). ``tail`` holds the rows of referenced objects
    that are not listed: SSTs of source databases (``external``) and missing objects.
    """

    metas: list[ObjectMeta]
    paths: list[str]
    sizes: list[Any]
    mtimes: list[Any]
    refs: list[str | None]
    plain: bool
    """The path of every row with a reference needs no JSON escaping."""
    rules: GcRules
    compactions_id: int | None
    referenced: dict[Ulid, str]
    tail: list[dict[str, Any]]

    def times(self) -> dict[int, str]:
        """ISO time of every distinct ``mtimes`` value."""
        return iso_times(self.mtimes)

    def slow_row(self, i: int, times: dict[int, str]) -> dict[str, Any]:
        """Row of listed object ``i`` through the per-object classification."""
        kind, why = reasons(self.rules, self.compactions_id, self.referenced, self.metas[i])
        return self._row(i, kind, why or [UNREFERENCED], times)

    def _row(self, i: int, kind: str, why: list[str], times: dict[int, str]) -> dict[str, Any]:
        ms = self.mtimes[i]
        return {"path": self.paths[i], "kind": kind, "size": self.sizes[i],
                "last_modified_ms": ms, "last_modified": times[ms], "referenced_by": why}

    def rows(self) -> Iterator[dict[str, Any]]:
        """Every row: the listed objects, then ``tail``."""
        times = self.times()
        for i, ref in enumerate(self.refs):
            yield self.slow_row(i, times) if ref is None else self._row(i, COMPACTED, [ref],
                                                                        times)
        yield from self.tail


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


def plain_json(texts: Iterable[str]) -> bool:
    """Every text is printable ASCII without ``"`` or ``\\``: its JSON string is itself in
    quotes."""
    joined = "".join(texts)
    return joined.isascii() and joined.isprintable() and '"' not in joined and "\\" not in joined


def _matchable(root: str, own: dict[str, str],
               others: dict[str, str]) -> tuple[dict[str, str], bool]:
    """Path -> reference of the referenced SSTs that a listing of ``root`` may hold at that
    exact path: a listed object there is that SST (classify would parse its name back to
    the same id), so also a source database's SST that lies under this ``compacted/``.
    A reference reading "unreferenced" (none does) would count as unreferenced: it is left
    to classify. Second: whether every such path is plain JSON (``own``'s are this
    ``compacted/`` directory, a ULID and ``.sst``, so only the directory is looked at)."""
    own_dir = DbPaths(root).compacted_dir + "/"
    here = own
    inside = {path: ref for path, ref in others.items()
              if path.startswith(own_dir) and "/" not in path[len(own_dir):]}
    if inside:
        here = {**own, **inside}
    if UNREFERENCED in set(here.values()):
        here = {path: ref for path, ref in here.items() if ref != UNREFERENCED}
    return here, plain_json([own_dir, *inside])


def _tail(store: ObjectStore, root: str, unlisted: list[str], own: dict[str, str],
          others: dict[str, str]) -> list[dict[str, Any]]:
    """Rows of the referenced objects not listed under ``root`` (sorted paths): a source
    database's SST (``external``, its size from a HEAD) or a missing object."""
    prefix = root + "/" if root else ""
    sizes = _head_all(store, [p for p in unlisted if not p.startswith(prefix)])
    tail: list[dict[str, Any]] = []
    for path in unlisted:
        size = sizes.get(path)
        row: dict[str, Any] = {"path": path, "kind": "compacted" if "/compacted/" in path
                               else "manifest", "size": size}
        if path in sizes:
            row["external"] = True
        if size is None:
            row["missing"] = True
        row["referenced_by"] = [own[path] if path in own else others[path]]
        tail.append(row)
    return tail


_PATH = attrgetter("path")


def build_view(store: ObjectStore, root: str, now_ms: int) -> LsView:
    """Read the database at ``root`` and list its objects.

    WAL objects are listed from the database's WAL store when ``store`` has one attached
    (:mod:`slatelib.objstore.wal_routing`).

    Raises:
        ManifestMissingError: no database at ``root``.
        DataError: the latest manifest or a pinned one does not decode.
        WalStoreMissingError: the store holds none of the latest manifest's WAL tail.
    """
    ms = ManifestStore(store, root)
    latest = ms.read_latest()
    WalStore(store, root).check_tail(latest.value, manifest_id=latest.id)
    live, lost_manifests = live_set(ms, latest)
    state = read_compactions_state(store, root)
    rules = build_rules(root, live, state, now_ms=now_ms, options=GcOptions())
    refs = referenced_ssts(live)
    own, others = referenced_paths(root, live, refs)
    for mid, who in lost_manifests.items():
        others[ms.path(mid)] = f"pinned by {who}"
    here, plain = _matchable(root, own, others)
    metas = list(store.list(root))
    paths = [m.path for m in metas]
    distinct = all(map(lt, paths, islice(paths, 1, None)))
    if not distinct:  # the contract says sorted (so distinct too): make sure
        metas.sort(key=_PATH)
        paths = [m.path for m in metas]
        distinct = all(map(lt, paths, islice(paths, 1, None)))
    matched = list(map(here.get, paths))
    hits = len(matched) - matched.count(None) if distinct else -1
    unlisted = _unlisted(paths, hits, here, own, others)
    return LsView(metas, paths, [m.size for m in metas], [m.last_modified_ms for m in metas],
                  matched, plain, rules, state.version_id, refs,
                  _tail(store, root, unlisted, own, others))


def _unlisted(paths: list[str], hits: int, here: dict[str, str], own: dict[str, str],
              others: dict[str, str]) -> list[str]:
    """The referenced paths (``own`` and ``others``) that are not in the sorted ``paths``,
    sorted. ``hits`` distinct listed paths are keys of ``here`` (-1: not known distinct):
    when that is every key of ``own`` and ``here`` holds no other key, only ``others`` are
    looked up."""
    if hits == len(own) and (here is own or here.keys() <= own.keys()):
        return [p for p in sorted(others) if not _in_sorted(paths, p)]
    listed = set(paths)
    return sorted((own.keys() - listed) | (others.keys() - listed))


def _in_sorted(paths: list[str], path: str) -> bool:
    i = bisect_left(paths, path)
    return i < len(paths) and paths[i] == path


__all__ = ["LsView", "build_view", "iso_times", "live_set", "plain_json", "reasons",
           "referenced_paths", "sst_names"]
