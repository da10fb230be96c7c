"""GC planning: from manifests and compactor state to :class:`GcRules`. Pure.

The inputs are what 0.17.0's GC reads before it decides (the algorithm of design doc
'checkpoints and clones' plus SlateDB RFC-0026 and SlateDB RFC-0029):

- the *live set*: the latest manifest and the manifests its checkpoints pin (0.17's
  ``read_referenced_manifests``; expired checkpoints are removed first);
- the compactor state (latest ``compactions/`` version), read **before** the manifest so
  that a compaction finishing in between cannot slip its outputs below the low watermark;
- the time now and the :class:`GcOptions`.

From these come the per-object rules (:func:`build_rules`), the SST references to join
against the ``compacted/`` listing (:func:`referenced_ssts`), the clone-detach candidates
(:func:`plan_detach`) and the soft-destroy verdict (:func:`destroy_verdict`).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from operator import attrgetter
from typing import cast

from slatelib.core.checkpoints import expired_checkpoints, live_checkpoints, remove_checkpoints
from slatelib.core.compactions import Compactions
from slatelib.core.gc_rules import (
    CompactedCutoff,
    DestroyRules,
    GcOptions,
    GcRules,
    ObjectKind,
    SequencedRules,
    WalRange,
)
from slatelib.core.gc_text import checkpoint_label, fmt_seconds, fmt_time, manifest_label
from slatelib.core.manifest import Checkpoint, ExternalDb, Manifest, SstView
from slatelib.ids import Ulid, ulid_time_ms, ulid_to_str
from slatelib.paths import DbPaths


@dataclass(frozen=True)
class LiveSet:
    """The latest manifest and the manifests pinned by its checkpoints (id -> manifest)."""

    latest_id: int
    latest: Manifest
    pinned: Mapping[int, Manifest] = field(default_factory=dict)
    note: str = ""
    """Said of the latest manifest in labels (a dry run plans with a version not written)."""

    def manifests(self) -> dict[int, Manifest]:
        """Every live manifest by id, the latest included (a checkpoint may pin it)."""
        return {**self.pinned, self.latest_id: self.latest}

    def pins(self, manifest_id: int) -> list[Checkpoint]:
        return [c for c in self.latest.checkpoints if c.manifest_id == manifest_id]

    def label(self, manifest_id: int) -> str:
        label = manifest_label(manifest_id, self.latest_id, self.pins(manifest_id))
        if self.note and manifest_id == self.latest_id:
            label = label.replace("(latest", f"(latest, {self.note}", 1)
        return label

    def summary(self) -> str:
        """``latest 42, checkpoints 17, 30``."""
        others = sorted(i for i in self.pinned if i != self.latest_id)
        text = f"latest {self.latest_id}"
        return text + (f", checkpoints {', '.join(map(str, others))}" if others else "")


@dataclass(frozen=True)
class CompactionsState:
    """The compactor state GC read: a version, none at all, or an unreadable one."""

    version_id: int | None = None
    compactions: Compactions | None = None
    error: str | None = None

    @property
    def missing(self) -> bool:
        return self.version_id is None and self.error is None


def checkpoint_manifest_ids(latest: Manifest) -> list[int]:
    """Manifest ids pinned by the latest manifest's checkpoints (ascending, distinct)."""
    return sorted({c.manifest_id for c in latest.checkpoints})


def without_expired_checkpoints(m: Manifest, now_s: float) -> tuple[Manifest, list[Checkpoint]]:
    """``m`` without its expired checkpoints (0.17: kept while ``expire_time > now``)."""
    expired = expired_checkpoints(m, now_s)
    kept = remove_checkpoints(m, {c.id for c in expired})
    return (m, []) if kept is None else (kept, expired)


# ------------------------------------------------------------------------ references
def _view_groups(m: Manifest) -> Iterator[tuple[tuple[SstView, ...], str]]:
    """The views of ``m`` in the order 0.17 walks them, a group at a time (L0, each sorted
    run, then each segment's), with where they sit."""
    yield m.l0, "L0 view"
    for run in m.compacted:
        yield run.views, f"sorted run {run.id}"
    for seg in m.segments or ():
        name = seg.prefix.decode("ascii", "backslashreplace")
        yield seg.l0, f"segment {name!r} L0 view"
        for run in seg.compacted:
            yield run.views, f"segment {name!r} sorted run {run.id}"


_SST_ID = attrgetter("sst_id")


def _first_references(m: Manifest, label: str) -> dict[Ulid, str]:
    """SST id -> where ``m`` (labelled ``label``) first names it, in the order of first
    mention. Built a group at a time (every view of a group has the same text), so that a
    manifest of 100k SSTs costs a few C-level passes, not a Python step per view."""
    ids: list[Ulid] = []
    texts: list[str] = []
    for views, where in _view_groups(m):
        ids += map(_SST_ID, views)
        texts += [f"{label} as {where}"] * len(views)
    first = dict.fromkeys(ids)  # the order of first mention
    # Updating existing keys keeps their order; walking backwards leaves each key with the
    # text of its first mention.
    first.update(zip(reversed(ids), reversed(texts), strict=True))
    return cast(dict[Ulid, str], first)


def referenced_ssts(live: LiveSet) -> dict[Ulid, str]:
    """SST id -> which live manifest references it and where (the first such manifest,
    latest first, plus how many others do)."""
    first: dict[Ulid, str] = {}
    others: Counter[Ulid] = Counter()
    ordered = [live.latest_id, *sorted(i for i in live.pinned if i != live.latest_id)]
    manifests = live.manifests()
    for mid in ordered:
        mine = _first_references(manifests[mid], live.label(mid))
        if not first:
            first = mine
            continue
        others.update(mine.keys() & first.keys())
        first.update({sid: text for sid, text in mine.items() if sid not in first})
    for sid, n in others.items():
        first[sid] += f" (and {n} more live manifest{'s' if n > 1 else ''})"
    return first


def own_referenced_ssts(live: LiveSet) -> set[Ulid]:
    """Referenced SSTs that live under this database's own ``compacted/``."""
    out: set[Ulid] = set()
    for m in live.manifests().values():
        external = {sid for ext in m.external_dbs for sid in ext.sst_ids}
        out |= m.referenced_sst_ids() - external
    return out


# ----------------------------------------------------------------------------- rules
def _wal_ranges(live: LiveSet) -> tuple[WalRange, ...]:
    latest_label = live.label(live.latest_id)
    r = live.latest.replay_after_wal_id
    ranges = [WalRange(
        r, None, latest_label,
        f">= replay_after_wal_id {r} of {latest_label}: still to be replayed (0.17 also "
        "keeps the replay boundary itself)",
    )]
    for mid in sorted(live.pinned):
        if mid == live.latest_id:
            continue
        m = live.pinned[mid]
        label = live.label(mid)
        a, s = m.replay_after_wal_id, m.wal_id_last_seen
        ranges.append(WalRange(
            a + 1, s + 1, label,
            f"is replayed by {label} (replay_after_wal_id {a} < id <= wal_id_last_seen {s})",
        ))
    return tuple(ranges)


def _low_watermark(state: CompactionsState) -> tuple[int, str, str | None]:
    if state.error is not None:
        return 0, "unreadable compactions state", (
            f"the compactions state is unreadable ({state.error}): nothing in compacted/ is "
            "deleted until it is repaired"
        )
    if state.compactions is None:
        return 0, (
            "there is no compactions file, so the compaction low watermark is the Unix epoch "
            "and nothing in compacted/ is deleted (as in 0.17)"
        ), None
    comps = state.compactions.recent_compactions
    if not comps:
        return 0, (
            f"compactions file {state.version_id} lists no compaction, so the compaction low "
            "watermark is the Unix epoch and nothing in compacted/ is deleted (as in 0.17)"
        ), None
    oldest = min(comps, key=lambda c: ulid_time_ms(c.id))
    return ulid_time_ms(oldest.id), (
        f"compaction {ulid_to_str(oldest.id)} ({oldest.status.name.lower()}) of compactions "
        f"file {state.version_id}"
    ), None


def _newest_l0(live: LiveSet) -> tuple[int, str, int | None]:
    m = live.latest
    trees = [(m.l0, m.last_compacted_l0_sst_view_id, "")]
    for seg in m.segments or ():
        name = seg.prefix.decode("ascii", "backslashreplace")
        trees.append((seg.l0, seg.last_compacted_l0_sst_view_id, f" of segment {name!r}"))
    best, why, best_id = 0, "", None
    for l0, last, where in trees:
        if l0:
            sid = max((v.sst_id for v in l0), key=ulid_time_ms)
            t, text = ulid_time_ms(sid), f"L0 SST {ulid_to_str(sid)}{where}"
        elif last is not None:
            sid = last
            t, text = ulid_time_ms(last), f"last compacted L0 view {ulid_to_str(last)}{where}"
        else:
            continue
        if t > best:
            best, why, best_id = t, f"{text} in manifest {live.latest_id}", int(sid)
    if best == 0:
        why = (
            f"manifest {live.latest_id} has no L0 SST and never compacted one, so the newest-L0 "
            "limit is the Unix epoch and nothing in compacted/ is deleted (as in 0.17)"
        )
    return best, why, best_id


def build_rules(
    root: str,
    live: LiveSet,
    compactions: CompactionsState,
    *,
    now_ms: int,
    options: GcOptions,
    compactions_block: str | None = None,
    compacted_block: str | None = None,
    destroy: DestroyRules | None = None,
    whole_dry_run: bool = False,
) -> GcRules:
    """The rules for every object of the database rooted at ``root``, with each kind's
    ``min_age``, dry run and enable from ``options`` (docs/rfcs/0013-gc-options.md);
    ``whole_dry_run``: the run writes nothing (see :meth:`GcOptions.dry_kinds`)."""
    pinned = {mid: "; ".join(checkpoint_label(c) for c in live.pins(mid))
              for mid in checkpoint_manifest_ids(live.latest)}
    lw, lw_why, lw_block = _low_watermark(compactions)
    l0_ms, l0_why, l0_id = _newest_l0(live)
    comp_block = compactions_block
    if compactions.error is not None and comp_block is None:
        comp_block = (f"the latest compactions file is unreadable ({compactions.error}); older "
                      "versions are kept for recovery")
    policies = options.policies()
    min_ages = tuple((k, int(p.min_age_s * 1000)) for k, p in policies.items()
                     if int(p.min_age_s * 1000) != options.min_age_ms)
    dry_kinds = options.dry_kinds(whole_dry_run)
    compacted_min_age_ms = int(policies[ObjectKind.COMPACTED].min_age_s * 1000)
    return GcRules(
        root=root,
        now_ms=now_ms,
        min_age_ms=options.min_age_ms,
        kind_min_age_ms=min_ages,
        dry_kinds=dry_kinds,
        disabled_kinds=options.disabled_kinds(),
        live_summary=live.summary(),
        latest_label=live.label(live.latest_id),
        manifests=SequencedRules(live.latest_id, pinned),
        compactions=SequencedRules(compactions.version_id, {}, comp_block),
        wal_ranges=_wal_ranges(live),
        wal_fence_dry_run=ObjectKind.WAL_FENCE in dry_kinds,
        compacted=CompactedCutoff(
            min_age_ms=now_ms - compacted_min_age_ms,
            low_watermark_ms=lw,
            low_watermark_why=lw_why,
            newest_l0_ms=l0_ms,
            newest_l0_why=l0_why,
            newest_l0_id=l0_id,
            blocked=compacted_block or lw_block,
        ),
        destroy=destroy,
    )


# ------------------------------------------------------------------- clones, destroy
def plan_detach(live: LiveSet) -> list[ExternalDb]:
    """External databases the clone no longer needs (0.17 ``DetachGcTask``): ``sst_ids``
    empty with a final checkpoint in the latest manifest, and no live manifest still lists
    SSTs under the same final checkpoint."""
    candidates = [e for e in live.latest.external_dbs
                  if not e.sst_ids and e.final_checkpoint_id is not None]
    manifests = list(live.manifests().values())
    return [
        c for c in candidates
        if all(o.final_checkpoint_id != c.final_checkpoint_id or not o.sst_ids
               for m in manifests for o in m.external_dbs)
    ]


def remove_detached(m: Manifest, final_ids: set[uuid.UUID]) -> Manifest | None:
    """``m`` without the external databases detached under ``final_ids`` (only entries whose
    ``sst_ids`` are still empty), or None when there is nothing to remove."""
    kept = tuple(e for e in m.external_dbs
                 if e.final_checkpoint_id not in final_ids or e.sst_ids)
    return None if len(kept) == len(m.external_dbs) else replace(m, external_dbs=kept)


class DestroyState(StrEnum):
    NOT_DESTROYED = "not_destroyed"
    PENDING = "pending"
    DUE = "due"


@dataclass(frozen=True)
class DestroyVerdict:
    state: DestroyState
    reason: str


def destroy_verdict(latest: Manifest, now_s: float, grace_s: float) -> DestroyVerdict:
    """Whether a soft-destroyed database is due for deletion (design doc 'checkpoints and clones'):
    ``destroyed_at_s`` set, now after ``destroyed_at_s + db_delete_grace``, and no live
    checkpoint."""
    at = latest.destroyed_at_s
    if at is None:
        return DestroyVerdict(DestroyState.NOT_DESTROYED, "not destroyed")
    due_s = at + grace_s
    marked = f"soft-destroyed at {fmt_time(at * 1000)}"
    if now_s <= due_s:
        return DestroyVerdict(DestroyState.PENDING, (
            f"{marked}; deletion waits for the grace period {fmt_seconds(grace_s)} "
            f"(until {fmt_time(int(due_s * 1000))})"
        ))
    live = live_checkpoints(latest, now_s)
    if live:
        ids = ", ".join(str(c.id)[:8] for c in live)
        return DestroyVerdict(DestroyState.PENDING, (
            f"{marked}; deletion waits for {len(live)} live checkpoint(s) ({ids}) to expire "
            "or be deleted"
        ))
    return DestroyVerdict(DestroyState.DUE, (
        f"database {marked}; grace {fmt_seconds(grace_s)} passed at "
        f"{fmt_time(int(due_s * 1000))} and no live checkpoint remains"
    ))


def destroy_rules(root: str, latest_id: int, verdict: DestroyVerdict) -> DestroyRules:
    """The rules that delete every object of a destroyed database (see :func:`decide`'s
    destroy mode), naming the latest manifest so that it goes last."""
    return DestroyRules(verdict.reason, DbPaths.of(root).manifest(latest_id))
