"""One listed object: what it is (:func:`classify`) and what GC does with it
(:func:`decide`, which hands each kind to its rule). Pure.

Only a direct child of a layout directory whose name is exactly what SlateDB writes is
recognised; anything else is UNKNOWN and always kept.
"""

from __future__ import annotations

from dataclasses import dataclass

from slatelib.core.gc_rules.compacted import decide_compacted
from slatelib.core.gc_rules.decision import Action, GcDecision, ObjectKind
from slatelib.core.gc_rules.rules import GcRules
from slatelib.core.gc_rules.sequenced import decide_sequenced
from slatelib.core.gc_rules.wal import decide_wal
from slatelib.ids import format_id, ulid_to_str
from slatelib.paths import (
    COMPACTED_DIR,
    COMPACTIONS_BOUNDARY,
    COMPACTIONS_DIR,
    COMPACTIONS_EXT,
    GC_DIR,
    LOCK_SUFFIX,
    MANIFEST_BOUNDARY,
    MANIFEST_DIR,
    MANIFEST_EXT,
    SST_EXT,
    WAL_DIR,
    parse_compacted_name,
    parse_versioned_name,
    parse_wal_name,
)


@dataclass(frozen=True, slots=True)
class Classified:
    """A listed path split into its kind and id (``why`` explains an UNKNOWN)."""

    kind: ObjectKind
    id: int | None = None
    why: str = ""
    in_layout: bool = True


LAYOUT_DIRS = frozenset({MANIFEST_DIR, WAL_DIR, COMPACTED_DIR, COMPACTIONS_DIR, GC_DIR})
"""The directories of a database; GC never deletes outside them."""


def classify(root: str, path: str, size: int) -> Classified:
    """Kind and id of ``path`` inside the database rooted at ``root``.

    Only a direct child of a layout directory whose name is exactly what SlateDB writes is
    recognised; anything else (nested, unparsable, non-canonical such as ``17.sst`` or a
    lower-case ULID, which 0.17 would address under a different name) is UNKNOWN.
    """
    prefix = f"{root}/" if root else ""
    if not path.startswith(prefix):
        return Classified(ObjectKind.UNKNOWN, why=f"outside the database root {root!r}",
                          in_layout=False)
    directory, _, name = path[len(prefix):].partition("/")
    if directory not in LAYOUT_DIRS or not name:
        return Classified(ObjectKind.UNKNOWN, why="not in a SlateDB directory", in_layout=False)
    if "/" in name:
        return Classified(ObjectKind.UNKNOWN, why=f"nested below {directory}/")
    if directory == GC_DIR:
        return _classify_gc(name)
    if directory in (MANIFEST_DIR, COMPACTIONS_DIR):
        ext = MANIFEST_EXT if directory == MANIFEST_DIR else COMPACTIONS_EXT
        vid = parse_versioned_name(name, ext)
        if vid is None or name != f"{format_id(vid)}.{ext}":
            return Classified(ObjectKind.UNKNOWN, why=f"not <20 digits>.{ext}")
        return Classified(ObjectKind(directory), vid)
    if directory == WAL_DIR:
        wid = parse_wal_name(name)
        if wid is None or name != f"{format_id(wid)}.{SST_EXT}":
            return Classified(ObjectKind.UNKNOWN, why="not <20 digits>.sst")
        return Classified(ObjectKind.WAL_FENCE if size == 0 else ObjectKind.WAL, wid)
    sid = parse_compacted_name(name)
    if sid is None or name != f"{ulid_to_str(sid)}.{SST_EXT}":
        return Classified(ObjectKind.UNKNOWN, why="not <ULID>.sst")
    return Classified(ObjectKind.COMPACTED, sid)


_BOUNDARIES = {MANIFEST_BOUNDARY: MANIFEST_DIR, COMPACTIONS_BOUNDARY: COMPACTIONS_DIR}


def _classify_gc(name: str) -> Classified:
    """A file of ``gc/`` (which GC reads but never lists for deletion): a boundary file,
    the lock file of one, or a name GC does not write."""
    if name in _BOUNDARIES:
        return Classified(ObjectKind.BOUNDARY, why=(
            f"GC boundary of {_BOUNDARIES[name]}/ (SlateDB RFC-0026): no version at or below it is "
            "written again"))
    base = name[: -len(LOCK_SUFFIX)] if name.endswith(LOCK_SUFFIX) else ""
    if base in _BOUNDARIES:
        return Classified(ObjectKind.BOUNDARY, why=(
            f"lock file of gc/{base}: serialises its conditional overwrites on a local disk "
            "(docs/rfcs/0006-local-conditional-put.md)"))
    return Classified(ObjectKind.UNKNOWN, why="not a boundary file or the lock file of one")


def decide(
    rules: GcRules, path: str, size: int, last_modified_ms: int, ref: str | None = None
) -> GcDecision:
    """The decision for one listed object; ``ref`` says which live manifest references a
    compacted SST (None: none does)."""
    c = classify(rules.root, path, size)

    def out(action: Action, reason: str) -> GcDecision:
        return GcDecision(path, c.kind, action, reason, size, last_modified_ms)

    if rules.destroy is not None:
        if not c.in_layout:
            return out(Action.KEEP, f"kept: {c.why}; destroy removes only SlateDB directories")
        if path == rules.destroy.latest_manifest_path:
            return out(Action.DELETE, f"delete last: the latest manifest; {rules.destroy.reason}")
        return out(Action.DELETE, f"delete: {rules.destroy.reason}")
    if c.kind is ObjectKind.UNKNOWN:
        return out(Action.KEEP, f"kept: {c.why}; GC never deletes a name it does not recognise")
    if c.kind is ObjectKind.BOUNDARY:
        return out(Action.KEEP, f"kept: {c.why}")
    assert c.id is not None
    if c.kind in rules.disabled_kinds:
        return out(Action.KEEP, f"kept: GC of {_what(c.kind)} is disabled "
                                f"({c.kind.value}_options enabled = false)")
    age_ms = rules.now_ms - last_modified_ms
    if c.kind is ObjectKind.COMPACTED:
        action, reason = decide_compacted(rules, c.id, age_ms, ref)
    elif c.kind in (ObjectKind.WAL, ObjectKind.WAL_FENCE):
        action, reason = decide_wal(rules, c.id, c.kind, age_ms)
    else:
        action, reason = decide_sequenced(rules, c.kind, c.id, age_ms)
    if action is Action.DELETE and c.kind in rules.dry_kinds:
        return out(Action.KEEP, (
            f"kept: GC of {_what(c.kind)} is a dry run ({c.kind.value}_options dry_run); it "
            f"would {reason}"))
    return out(action, reason)


def _what(kind: ObjectKind) -> str:
    return "WAL fences" if kind is ObjectKind.WAL_FENCE else f"{kind.value}/"
