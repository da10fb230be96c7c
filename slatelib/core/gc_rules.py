"""GC rules: one keep/delete decision, with its reason, for each listed object. Pure.

The rules are those of 0.17.0's garbage collector (``garbage_collector.rs`` and its tasks
``manifest_gc``, ``wal_gc``, ``compacted_gc``, ``compactions_gc``), applied to one object at
a time so that a Spark executor can decide its share of a listing from a small, picklable
:class:`GcRules` (built by :mod:`slatelib.core.gc_plan` from the manifests):

- **manifest/**: delete a version that is neither the latest nor pinned by a checkpoint of
  the latest manifest and was written more than ``min_age`` ago (strictly).
- **wal/**: a WAL SST (size > 0) is kept while it lies in a replay range: ``[replay_after,
  inf)`` of the latest manifest, ``(replay_after, wal_id_last_seen]`` of every checkpoint's
  manifest; otherwise deleted once older than ``min_age``. Zero-byte objects are writer
  fences, collected under the same rules but, as in 0.17, only as a dry run by default.
- **compacted/**: an SST no live manifest references is deleted when its ULID time is
  before ``min(now - min_age, compaction low watermark, newest L0)`` (RFC-0029) **and** the
  object itself was written more than ``min_age`` ago. The second condition is slatelib's
  addition: it protects SSTs whose writer's clock runs behind GC's (0.17 looks only at the
  ULID).
- **compactions/**: every version but the latest, once older than ``min_age``.
- An object whose name is not exactly what SlateDB writes (``<20 digits>.manifest``,
  ``<20 digits>.sst``, ``<ULID>.sst``, ``<20 digits>.compactions``) is always kept.

GC only ever deletes a path exactly as the listing returned it, and only when that path is
the canonical name of the id it parses to; references are matched by id, never by a path
string built from a manifest. A listing that spells names differently from what SlateDB
writes (another scheme, percent-encoding, case) therefore deletes nothing (Iceberg's orphan
removal once deleted live files because a listing said ``s3a://`` where the metadata said
``s3://``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from slatelib.core.gc_text import fmt_age, fmt_seconds, fmt_time
from slatelib.errors import InvalidArgumentError
from slatelib.ids import format_id, ulid_time_ms, ulid_to_str
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

DEFAULT_MIN_AGE_S = 300.0
"""0.17.0's ``DEFAULT_MIN_AGE`` (5 minutes); also the floor below which a run needs force."""


class ObjectKind(StrEnum):
    """What a listed object is; the report counts objects and bytes per kind."""

    MANIFEST = "manifest"
    WAL = "wal"
    WAL_FENCE = "wal_fence"
    COMPACTED = "compacted"
    COMPACTIONS = "compactions"
    BOUNDARY = "boundary"
    UNKNOWN = "unknown"


class Action(StrEnum):
    KEEP = "keep"
    DELETE = "delete"


@dataclass(frozen=True, slots=True)
class GcDecision:
    """What GC does with one object, and why."""

    path: str
    kind: ObjectKind
    action: Action
    reason: str
    size: int
    last_modified_ms: int

    @property
    def deletes(self) -> bool:
        return self.action is Action.DELETE

    def to_json(self) -> dict[str, Any]:
        return {
            "action": self.action.value, "kind": self.kind.value, "path": self.path,
            "size": self.size, "last_modified": fmt_time(self.last_modified_ms),
            "reason": self.reason,
        }


@dataclass(frozen=True)
class GcOptions:
    """What a GC run may do. Durations are seconds.

    ``min_age_s`` below ``min_age_floor_s`` (default 5 minutes, 0.17's default ``min_age``)
    is refused unless ``force`` is set. ``wal_fence_dry_run`` keeps zero-byte WAL fences,
    as 0.17 does by default (deleting a fence that a stalled writer still races against can
    lose data). ``db_delete_grace_s`` is how long a soft-destroyed database waits.
    """

    min_age_s: float = DEFAULT_MIN_AGE_S
    force: bool = False
    min_age_floor_s: float = DEFAULT_MIN_AGE_S
    db_delete_grace_s: float = 86400.0
    wal_fence_dry_run: bool = True

    def check(self) -> None:
        """Refuse unsafe options.

        Raises:
            InvalidArgumentError: a negative or non-finite duration, or ``min_age_s`` below
                the floor without ``force``.
        """
        for name in ("min_age_s", "min_age_floor_s", "db_delete_grace_s"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise InvalidArgumentError(f"gc {name} must be a finite duration >= 0: {value!r}")
        if self.min_age_s < self.min_age_floor_s and not self.force:
            raise InvalidArgumentError(
                f"gc min_age {fmt_seconds(self.min_age_s)} is below the safety floor "
                f"{fmt_seconds(self.min_age_floor_s)}: objects that a writer or compactor has "
                "uploaded but not yet published could be deleted; pass force (--force) to run "
                "with it anyway"
            )

    @property
    def min_age_ms(self) -> int:
        return int(self.min_age_s * 1000)


@dataclass(frozen=True, slots=True)
class WalRange:
    """WAL ids ``start <= id < end`` (``end`` None: unbounded) that ``label`` replays."""

    start: int
    end: int | None
    label: str
    detail: str

    def contains(self, wal_id: int) -> bool:
        return wal_id >= self.start and (self.end is None or wal_id < self.end)


@dataclass(frozen=True, slots=True)
class CompactedCutoff:
    """The RFC-0029 cutoff of compacted SSTs: ULID time must be before all three limits.

    A limit of 0 (the Unix epoch) means nothing in ``compacted/`` can be deleted; ``blocked``
    refuses deletion in ``compacted/`` outright (unreadable compactions state, a listing that
    disagrees with the manifests).
    """

    min_age_ms: int
    low_watermark_ms: int
    low_watermark_why: str
    newest_l0_ms: int
    newest_l0_why: str
    blocked: str | None = None
    newest_l0_id: int | None = None
    """The SST (or compacted L0 view) that sets ``newest_l0_ms``."""

    @property
    def cutoff_ms(self) -> int:
        return min(self.min_age_ms, self.low_watermark_ms, self.newest_l0_ms)


@dataclass(frozen=True, slots=True)
class SequencedRules:
    """Manifests or compactions files: the latest id, the pinned ids (manifest id -> who
    pins it) and a refusal (e.g. the boundary file cannot be advanced)."""

    latest_id: int | None
    pinned: Mapping[int, str] = field(default_factory=dict)
    blocked: str | None = None


@dataclass(frozen=True, slots=True)
class DestroyRules:
    """A soft-destroyed database past its grace: every object goes, the manifest last."""

    reason: str
    latest_manifest_path: str


@dataclass(frozen=True)
class GcRules:
    """Everything needed to decide any object of one database (small and picklable).

    SST references are not part of the rules: they are joined in per object (a dict
    lookup in-process, a DataFrame join on Spark).
    """

    root: str
    now_ms: int
    min_age_ms: int
    live_summary: str
    latest_label: str
    manifests: SequencedRules
    compactions: SequencedRules
    wal_ranges: tuple[WalRange, ...]
    wal_fence_dry_run: bool
    compacted: CompactedCutoff
    destroy: DestroyRules | None = None


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
            f"GC boundary of {_BOUNDARIES[name]}/ (RFC-0026): no version at or below it is "
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
    age_ms = rules.now_ms - last_modified_ms
    if c.kind is ObjectKind.COMPACTED:
        return out(*_compacted(rules, c.id, age_ms, ref))
    if c.kind in (ObjectKind.WAL, ObjectKind.WAL_FENCE):
        return out(*_wal(rules, c.id, c.kind, age_ms))
    return out(*_sequenced(rules, c.kind, c.id, age_ms))


def _young(rules: GcRules, age_ms: int) -> bool:
    return age_ms <= rules.min_age_ms


def _age_text(rules: GcRules, age_ms: int) -> str:
    return f"written {fmt_age(age_ms)} ago (min_age {fmt_age(rules.min_age_ms)})"


def _sequenced(rules: GcRules, kind: ObjectKind, vid: int, age_ms: int) -> tuple[Action, str]:
    seq = rules.manifests if kind is ObjectKind.MANIFEST else rules.compactions
    what = "manifest" if kind is ObjectKind.MANIFEST else "compactions file"
    if seq.latest_id is None:
        return Action.KEEP, f"kept: {seq.blocked or f'GC read no latest {what}'}"
    if vid >= seq.latest_id:
        return Action.KEEP, f"kept: the latest {what}" if vid == seq.latest_id else (
            f"kept: {what} {vid} is not older than the latest one GC read ({seq.latest_id})")
    pin = seq.pinned.get(vid)
    if pin is not None:
        return Action.KEEP, f"kept: pinned by {pin}"
    if seq.blocked is not None:
        return Action.KEEP, f"kept: {seq.blocked}"
    if _young(rules, age_ms):
        return Action.KEEP, f"kept: superseded by {what} {seq.latest_id} but {_age_text(rules, age_ms)}"
    if kind is ObjectKind.MANIFEST:
        return Action.DELETE, (
            f"delete: neither the latest manifest ({seq.latest_id}) nor pinned by a checkpoint; "
            f"{_age_text(rules, age_ms)}"
        )
    return Action.DELETE, (
        f"delete: superseded by compactions file {seq.latest_id}; {_age_text(rules, age_ms)}"
    )


def _wal(rules: GcRules, wal_id: int, kind: ObjectKind, age_ms: int) -> tuple[Action, str]:
    for r in rules.wal_ranges:
        if r.contains(wal_id):
            return Action.KEEP, f"kept: WAL {wal_id} {r.detail}"
    fence = kind is ObjectKind.WAL_FENCE
    name = f"writer fence {wal_id} (zero bytes)" if fence else f"WAL {wal_id}"
    if _young(rules, age_ms):
        return Action.KEEP, f"kept: {name} is outside every replay range but {_age_text(rules, age_ms)}"
    latest = next((r for r in rules.wal_ranges if r.end is None), None)
    below = (f"below replay_after_wal_id {latest.start} of {latest.label}" if latest
             else "outside the latest manifest's replay range")
    ckpts = _outside_checkpoint_ranges([r for r in rules.wal_ranges if r.end is not None])
    if fence and rules.wal_fence_dry_run:
        return Action.KEEP, (
            f"kept: {name}; fence GC is a dry run as in 0.17 (it would be deletable: {below}, "
            f"{ckpts}, {_age_text(rules, age_ms)})"
        )
    return Action.DELETE, f"delete: {name} is {below}; {ckpts}; {_age_text(rules, age_ms)}"


def _outside_checkpoint_ranges(ranges: list[WalRange]) -> str:
    if not ranges:
        return "no checkpoint pins an older manifest"
    if len(ranges) > 3:
        return f"outside the replay ranges of all {len(ranges)} checkpoint manifests"
    spans = "; ".join(f"{r.label}: {r.start}..{(r.end or 0) - 1}" if r.end and r.end > r.start
                      else f"{r.label}: none" for r in ranges)
    return f"outside the WAL replay range of every checkpoint manifest ({spans})"


def _compacted(rules: GcRules, sst_id: int, age_ms: int, ref: str | None) -> tuple[Action, str]:
    if ref is not None:
        return Action.KEEP, f"kept: referenced by {ref}"
    cut = rules.compacted
    if cut.blocked is not None:
        return Action.KEEP, f"kept: {cut.blocked}"
    created = ulid_time_ms(sst_id)
    when = f"created {fmt_time(created)}"
    if cut.low_watermark_ms == 0:
        return Action.KEEP, f"kept: unreferenced, but {cut.low_watermark_why}"
    if cut.newest_l0_ms == 0:
        return Action.KEEP, f"kept: unreferenced, but {cut.newest_l0_why}"
    if created >= cut.min_age_ms:
        return Action.KEEP, (
            f"kept: unreferenced but {when} ({fmt_age(rules.now_ms - created)} ago by its ULID), "
            f"within min_age {fmt_age(rules.min_age_ms)}"
        )
    if created >= cut.low_watermark_ms:
        return Action.KEEP, (
            f"kept: unreferenced but {when}, not before the compaction low watermark "
            f"{fmt_time(cut.low_watermark_ms)} ({cut.low_watermark_why}): a compaction may "
            "still publish it"
        )
    if sst_id == cut.newest_l0_id:
        return Action.KEEP, (
            f"kept: unreferenced, but it sets the newest-L0 limit itself ({cut.newest_l0_why}); "
            "only SSTs created strictly before that limit go (as in 0.17), so it goes once a "
            "newer L0 is flushed"
        )
    if created >= cut.newest_l0_ms:
        return Action.KEEP, (
            f"kept: unreferenced but {when}, not before the newest L0 "
            f"{fmt_time(cut.newest_l0_ms)} ({cut.newest_l0_why}): it may be an L0 that is "
            "uploaded but not yet published"
        )
    if _young(rules, age_ms):
        return Action.KEEP, (
            f"kept: unreferenced and {when}, but the object was {_age_text(rules, age_ms)}: "
            "its writer's clock may run behind"
        )
    binding = ("now - min_age" if cut.cutoff_ms == cut.min_age_ms else
               "the compaction low watermark" if cut.cutoff_ms == cut.low_watermark_ms else
               "the newest L0")
    return Action.DELETE, (
        f"delete: referenced by no live manifest ({rules.live_summary}); {when}, before the "
        f"cutoff {fmt_time(cut.cutoff_ms)} ({binding}); object {_age_text(rules, age_ms)}"
    )
