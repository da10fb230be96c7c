"""Who holds the compactor epoch, and may compaction take it? Pure.

A compaction run fences other compactors by bumping ``compactor_epoch``. An official 0.17
``Db`` runs an embedded compactor by default, and when that compactor sees a newer epoch the
whole ``Db`` closes (``Closed(FENCED)``): fencing it takes a producer's database down. So a
run fences only an epoch that no other compactor may hold:

- epoch 0, with no compactions file claiming more: no compactor ever ran (**free**);
- an epoch slatelib claimed, as shown by its claim records (**ours**): a later run of ours
  may take it over, as one 0.17 compactor takes over from the previous one;
- any other epoch (**foreign**): an official compactor, a coordinator or an unknown tool
  claimed it, and from storage alone nobody can tell that it stopped (an idle embedded
  compactor writes nothing). The run refuses, unless the operator passes ``--takeover``
  after turning that compactor off.

Claim records (``<root>/slatelib/claims/<20-digit epoch>.<run id>.json``) are slatelib's
own objects, ignored by 0.17. A run writes one as ``claiming`` before its fence CAS and as
``claimed`` after it. The fence manifest itself carries a marker checkpoint (the record's
``marker``, pinning that manifest), so that a ``claiming`` record left by a run that crashed
mid-fence is resolved exactly: the epoch is ours if and only if the latest manifest, or
manifest ``base_manifest_id + 1``, carries that marker at that epoch (a foreign
compactor's fence from the same version carries none).

Liveness evidence (the compactions file's age and workers' heartbeats, the writer's last
WAL and manifest writes) does not change the verdict; it goes into the refusal message, so
that the operator can tell a live embedded compactor from one turned off long ago.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from enum import StrEnum

from slatelib.core.gc_text import fmt_age
from slatelib.core.manifest import Manifest
from slatelib.errors import CorruptObjectError

CLAIM_EPOCHS_KEPT = 16
"""Claim records are kept for this many most recent epochs. A run that read the manifest at
epoch E judges E after a concurrent slatelib run fenced E + 1: E's record must still be
there, or the verdict would call our own epoch foreign."""

CLAIM_MARKER_LIFETIME_S = 86_400.0
"""Lifetime of the marker checkpoint of a fence manifest. It pins the fence manifest itself,
so that a run killed before recording its claim is still recognised by the next run (which
drops the marker again, as the commit of a run that was not killed does)."""


class ClaimState(StrEnum):
    CLAIMING = "claiming"
    CLAIMED = "claimed"
    LOST = "lost"


@dataclass(frozen=True)
class ClaimRecord:
    """One slatelib run's claim of one compactor epoch."""

    epoch: int
    run_id: str
    state: ClaimState
    base_manifest_id: int
    marker: uuid.UUID
    mode: str = "job"
    host: str = ""
    pid: int = 0
    at_ms: int = 0
    manifest_id: int | None = None

    def to_json(self) -> bytes:
        d = asdict(self)
        d["state"] = self.state.value
        d["marker"] = str(self.marker)
        return (json.dumps(d, sort_keys=True) + "\n").encode()

    @staticmethod
    def from_json(data: bytes, *, path: str) -> ClaimRecord:
        """Raises: CorruptObjectError: not a claim record."""
        try:
            d = json.loads(data)
            return ClaimRecord(
                epoch=int(d["epoch"]), run_id=str(d["run_id"]), state=ClaimState(d["state"]),
                base_manifest_id=int(d["base_manifest_id"]), marker=uuid.UUID(d["marker"]),
                mode=str(d.get("mode", "job")), host=str(d.get("host", "")),
                pid=int(d.get("pid", 0)), at_ms=int(d.get("at_ms", 0)),
                manifest_id=None if d.get("manifest_id") is None else int(d["manifest_id"]),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptObjectError(f"not a slatelib claim record: {exc}", path=path) from None


def fence_marker_landed(manifest: Manifest, record: ClaimRecord) -> bool:
    """Whether ``manifest`` is the fence that ``record`` announced (it carries the marker)."""
    return manifest.compactor_epoch == record.epoch and \
        manifest.checkpoint(record.marker) is not None


class Holder(StrEnum):
    FREE = "free"
    OURS = "ours"
    FOREIGN = "foreign"


@dataclass(frozen=True)
class Activity:
    """What storage says about recent activity on the database (ages in seconds; None when
    unknown or absent)."""

    compactions_epoch: int | None = None
    compactions_age_s: float | None = None
    heartbeat_age_s: float | None = None
    manifest_age_s: float | None = None
    wal_age_s: float | None = None

    def describe(self) -> list[str]:
        out = []
        if self.compactions_epoch is not None:
            age = "" if self.compactions_age_s is None else \
                f", last written {fmt_age(self.compactions_age_s * 1000)} ago"
            out.append(f"compactions file at epoch {self.compactions_epoch}{age}")
        if self.heartbeat_age_s is not None:
            out.append(f"newest worker heartbeat {fmt_age(self.heartbeat_age_s * 1000)} ago")
        if self.manifest_age_s is not None:
            out.append(f"latest manifest written {fmt_age(self.manifest_age_s * 1000)} ago")
        if self.wal_age_s is not None:
            out.append(f"newest WAL SST written {fmt_age(self.wal_age_s * 1000)} ago")
        return out


@dataclass(frozen=True)
class ClaimVerdict:
    """Who holds the epoch ``epoch``, and why."""

    holder: Holder
    epoch: int
    reason: str
    activity: Activity = field(default_factory=Activity)
    record: ClaimRecord | None = None

    @property
    def may_fence(self) -> bool:
        return self.holder != Holder.FOREIGN

    def to_dict(self) -> dict[str, object]:
        return {"holder": self.holder.value, "epoch": self.epoch, "reason": self.reason,
                "activity": self.activity.describe()}

    def refusal(self, root: str) -> str:
        """The message of a refused run."""
        seen = "; ".join(self.activity.describe()) or "no other activity recorded"
        return (
            f"database {root!r}: compactor epoch {self.epoch} is held by another compactor "
            f"({self.reason}; {seen}). Fencing it would stop it, and an official 0.17 writer "
            "with its embedded compactor on (0.17's default) closes with Closed(FENCED). "
            "Either run slatelib as a worker under that compactor (worker mode), or turn the "
            "other compactor off (open official writers with compactor_options=None) and "
            "rerun with --takeover"
        )


def judge_claim(
    manifest: Manifest,
    records: Iterable[ClaimRecord],
    read_manifest: Callable[[int], Manifest | None],
    *,
    compactions_epoch: int | None = None,
    activity: Activity | None = None,
) -> ClaimVerdict:
    """Who holds ``manifest.compactor_epoch``.

    ``records`` are slatelib's claim records (any epochs); ``read_manifest(id)`` reads one
    manifest version (None when gone) to resolve a ``claiming`` record;
    ``compactions_epoch`` is the latest compactions file's epoch (None without one).
    """
    act = activity or Activity()
    epoch = manifest.compactor_epoch
    if compactions_epoch is not None and compactions_epoch > epoch:
        return ClaimVerdict(Holder.FOREIGN, compactions_epoch,
                            f"the compactions file claims epoch {compactions_epoch}, newer than "
                            f"the manifest's {epoch}: a compactor is starting", act)
    if epoch == 0:
        return ClaimVerdict(Holder.FREE, 0, "no compactor ever claimed the database", act)
    mine = [r for r in records if r.epoch == epoch and r.state != ClaimState.LOST]
    for r in mine:
        if r.state == ClaimState.CLAIMED:
            return ClaimVerdict(Holder.OURS, epoch, f"claimed by slatelib run {r.run_id}",
                                act, r)
    for r in mine:
        fence = manifest if fence_marker_landed(manifest, r) else \
            read_manifest(r.base_manifest_id + 1)
        if fence is not None and fence_marker_landed(fence, r):
            return ClaimVerdict(Holder.OURS, epoch, f"claimed by slatelib run {r.run_id} "
                                "(its fence manifest carries its marker)", act, r)
    why = "no slatelib claim record for it" if not mine else \
        "slatelib runs tried to claim it, but their fence did not land"
    return ClaimVerdict(Holder.FOREIGN, epoch, f"not claimed by slatelib: {why}", act)
