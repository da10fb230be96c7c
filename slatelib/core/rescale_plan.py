"""Rescaling a database: split one into shards by key range, or merge shards into one. Pure.

A rescale job is a set of *targets*, each cloned from *parts* (a source database at a
checkpoint, projected to a key range; design doc 'checkpoints and clones', "Manifest
Projection and Union"): a split is N targets of one part each (one source, one checkpoint,
N ranges that tile the key space), a merge is one target with one unprojected part per
source. What happens to a target afterwards (compaction into its own SSTs, detach from its
sources) is :mod:`slatelib.ops.rescale`'s business; this module holds what can be decided
without I/O:

- split keys as typed (``text`` or ``hex:6b6579``), checked ascending and distinct, and the
  ranges they cut (:func:`shard_ranges`);
- split keys that balance bytes, from the weighted anchors of
  :mod:`slatelib.core.range_split` (:func:`balanced_split_keys`), and per-shard estimates;
- target paths from a ``{i}`` template, checked distinct and apart from the sources;
- the evidence that a source's writer is live (:func:`live_writer_evidence`);
- the job record kept under each source (:class:`RescalePlan`, JSON), so that a rerun
  resumes the same job and a different job is refused.

What a finished job is checked against is in :mod:`slatelib.core.rescale_check`.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from slatelib.core.compaction_source import effective_range
from slatelib.core.manifest import Manifest
from slatelib.core.range_split import Anchor, ranges_from_boundaries
from slatelib.core.ranges import UNBOUNDED, Bound, BoundKind, BytesRange
from slatelib.errors import InvalidArgumentError, InvalidDbStateError

HEX_PREFIX = "hex:"
TEMPLATE_FIELD = "{i}"
PLAN_FORMAT = 1
"""Version of the job record's JSON layout."""
SPLIT = "split"
MERGE = "merge"


# ----------------------------------------------------------------------------- keys
def parse_key(text: str, *, what: str = "split key") -> bytes:
    """A key as typed: ``hex:<hex digits>`` for binary keys, else the text's UTF-8 bytes.

    Raises:
        InvalidArgumentError: an empty key or bad hex.
    """
    if text.startswith(HEX_PREFIX):
        digits = text[len(HEX_PREFIX):]
        try:
            key = bytes.fromhex(digits)
        except ValueError:
            raise InvalidArgumentError(f"{what} {text!r}: not hex after 'hex:'") from None
    else:
        key = text.encode("utf-8")
    if not key:
        raise InvalidArgumentError(f"{what} {text!r} is empty (SlateDB keys are never empty)")
    return key


def format_key(key: bytes) -> str:
    """``key`` as :func:`parse_key` reads it back: plain text when it is printable ASCII
    without ``,`` (the list separator) and not ``hex:``-prefixed, else ``hex:...``."""
    if key and all(0x20 < b < 0x7F for b in key) and b"," not in key \
            and not key.startswith(HEX_PREFIX.encode()):
        return key.decode("ascii")
    return HEX_PREFIX + key.hex()


def parse_split_keys(text: str) -> tuple[bytes, ...]:
    """``--at a,b,hex:ff00``: comma-separated keys (a key holding a comma is given as hex).

    Raises:
        InvalidArgumentError: an empty list or key, bad hex, keys out of order or repeated.
    """
    items = [s.strip() for s in text.split(",")]
    if not any(items):
        raise InvalidArgumentError("--at needs at least one split key")
    keys = tuple(parse_key(s) for s in items)
    check_split_keys(keys)
    return keys


def check_split_keys(keys: Sequence[bytes], into: int | None = None) -> None:
    """Split keys must be non-empty, strictly ascending (so distinct), and ``into - 1`` of
    them when ``into`` is given.

    Raises:
        InvalidArgumentError: naming the first offending key.
    """
    if into is not None:
        check_shard_count(into)
        if len(keys) != into - 1:
            raise InvalidArgumentError(
                f"--into {into} needs {into - 1} split keys, --at gives {len(keys)}")
    for i, k in enumerate(keys):
        if not k:
            raise InvalidArgumentError(f"split key {i + 1} is empty")
        if i and keys[i - 1] == k:
            raise InvalidArgumentError(f"split key {format_key(k)!r} is given twice")
        if i and keys[i - 1] > k:
            raise InvalidArgumentError(
                f"split keys out of order: {format_key(keys[i - 1])!r} comes before "
                f"{format_key(k)!r} (give them in ascending byte order)")


def check_shard_count(into: int) -> None:
    """Raises:
    InvalidArgumentError: fewer than 2 shards (a split into 1 is a copy: use a clone)."""
    if into < 2:
        raise InvalidArgumentError(
            f"--into {into}: a split needs at least 2 shards (to copy a database, clone it)")


def shard_ranges(keys: Sequence[bytes]) -> tuple[BytesRange, ...]:
    """``(-inf, k1), [k1, k2), ..., [kn, +inf)``.

    Raises:
        InvalidArgumentError: see :func:`check_split_keys`.
    """
    check_split_keys(keys)
    return tuple(ranges_from_boundaries(list(keys)))


def range_to_json(rng: BytesRange | None) -> dict[str, str | None] | None:
    """A half-open range as ``{"start": hex | null, "end": hex | null}`` (None: no range).

    Raises:
        InvalidArgumentError: a range that is not ``[start, end)``.
    """
    if rng is None:
        return None
    if rng.start.kind not in (BoundKind.UNBOUNDED, BoundKind.INCLUDED) or \
            rng.end.kind not in (BoundKind.UNBOUNDED, BoundKind.EXCLUDED):
        raise InvalidArgumentError(f"range {rng} is not half-open [start, end)")
    return {"start": None if rng.start.key is None else rng.start.key.hex(),
            "end": None if rng.end.key is None else rng.end.key.hex()}


def range_from_json(data: Mapping[str, Any] | None) -> BytesRange | None:
    if data is None:
        return None
    start, end = data.get("start"), data.get("end")
    return BytesRange.half_open(None if start is None else bytes.fromhex(start),
                                None if end is None else bytes.fromhex(end))


def describe_range(rng: BytesRange | None) -> dict[str, str | None]:
    """``{"start": typed key | null, "end": ...}`` for reports (keys as :func:`format_key`)."""
    if rng is None:
        return {"start": None, "end": None}
    return {"start": None if rng.start.key is None else format_key(rng.start.key),
            "end": None if rng.end.key is None else format_key(rng.end.key)}


# ------------------------------------------------------------------- balanced keys
def _merged(anchors: Iterable[Anchor]) -> tuple[list[bytes], list[int]]:
    keys: list[bytes] = []
    weights: list[int] = []
    for a in sorted(anchors):
        if keys and keys[-1] == a.key:
            weights[-1] += a.weight
        else:
            keys.append(a.key)
            weights.append(a.weight)
    return keys, weights


def balanced_split_keys(anchors: Iterable[Anchor], into: int) -> tuple[bytes, ...]:
    """``into - 1`` split keys cutting the weighted ``anchors`` (bytes starting at a key)
    into ``into`` parts of about equal weight: each cut is the anchor key whose preceding
    weight is nearest its quantile, keys strictly ascending and after the first anchor key
    (so no shard starts empty of known data).

    Raises:
        InvalidArgumentError: ``into`` below 2, or fewer distinct anchor keys than shards
            (too little data to place the cuts: give them with ``--at``).
    """
    check_shard_count(into)
    keys, weights = _merged(anchors)
    total = sum(weights)
    if total <= 0 or len(keys) < into:
        raise InvalidArgumentError(
            f"cannot choose {into - 1} split keys: the source has {len(keys)} distinct "
            f"block start keys ({total} bytes) to cut at; give the split keys with --at")
    before = [0]
    for w in weights[:-1]:
        before.append(before[-1] + w)  # before[i]: weight of keys[:i]
    cuts: list[int] = []
    for j in range(1, into):
        target = total * j / into
        lo = (cuts[-1] + 1) if cuts else 1
        hi = len(keys) - (into - j)  # leave a key for every later cut
        i = bisect.bisect_left(before, target, lo, hi + 1)
        candidates = [c for c in (i - 1, i) if lo <= c <= hi]
        best = min(candidates, key=lambda c: (abs(before[c] - target), c))
        cuts.append(best)
    return tuple(keys[c] for c in cuts)


@dataclass(frozen=True)
class ShardEstimate:
    """Estimated input of one shard: stored bytes and rows (versions, tombstones
    included: the keys after compaction are at most this many)."""

    nbytes: int
    rows: int


def shard_estimates(views: Sequence[tuple[Sequence[Anchor], int]],
                    ranges: Sequence[BytesRange]) -> list[ShardEstimate]:
    """Per range, the anchor bytes inside it and the rows of each view (``(anchors,
    rows)``) in proportion to the view's anchor weight inside it."""
    out_bytes = [0] * len(ranges)
    out_rows = [0.0] * len(ranges)
    for anchors, rows in views:
        total = sum(a.weight for a in anchors)
        for a in anchors:
            for i, r in enumerate(ranges):
                if r.contains(a.key):
                    out_bytes[i] += a.weight
                    if total > 0:
                        out_rows[i] += rows * a.weight / total
                    break
    return [ShardEstimate(b, round(r)) for b, r in zip(out_bytes, out_rows, strict=True)]


# ------------------------------------------------------------------------- targets
def expand_template(template: str, count: int) -> list[str]:
    """``template`` with ``{i}`` replaced by 0 .. ``count - 1``.

    Raises:
        InvalidArgumentError: no ``{i}`` (every shard would get the same path), or another
            ``{...}`` field.
    """
    if TEMPLATE_FIELD not in template:
        raise InvalidArgumentError(
            f"--to {template!r} has no {TEMPLATE_FIELD} field: every shard would get the same "
            f"path (e.g. --to s3://bucket/tenants/db-{TEMPLATE_FIELD})")
    rest = template.replace(TEMPLATE_FIELD, "")
    if re.search(r"[{}]", rest):
        raise InvalidArgumentError(
            f"--to {template!r}: only the field {TEMPLATE_FIELD} may appear in braces")
    return [template.replace(TEMPLATE_FIELD, str(i)) for i in range(count)]


def _nested(a: str, b: str) -> bool:
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def check_target_paths(sources: Sequence[str], targets: Sequence[str]) -> None:
    """Targets must be distinct, none inside another, and none equal to, inside or around
    a source (a source's destroy or GC would delete a shard below it, and the reverse).

    Raises:
        InvalidArgumentError: naming the two paths.
    """
    for i, t in enumerate(targets):
        for s in sources:
            if _nested(t, s):
                raise InvalidArgumentError(
                    f"target {t!r} is, contains or lies inside source {s!r}; choose a path "
                    "outside it")
        for u in targets[i + 1:]:
            if t == u:
                raise InvalidArgumentError(f"target path {t!r} is repeated")
            if _nested(t, u):
                raise InvalidArgumentError(f"target {t!r} and target {u!r} are nested")
    if len(set(sources)) != len(sources):
        raise InvalidArgumentError(f"a source is given twice: {list(sources)}")


def manifest_span(m: Manifest) -> BytesRange | None:
    """The keys the top-level tree of ``m`` can hold: from the smallest first key to the
    largest last key of its views' effective ranges (None: no data)."""
    lo: Bound | None = None
    hi: Bound | None = None
    for view in (*m.l0, *(v for r in m.compacted for v in r.views)):
        eff = effective_range(view, m.sst(view.sst_id).info)
        if eff.is_empty():
            continue
        lo = eff.start if lo is None else _min_start(lo, eff.start)
        hi = eff.end if hi is None else _max_end(hi, eff.end)
    return None if lo is None or hi is None else BytesRange(lo, hi)


def _min_start(a: Bound, b: Bound) -> Bound:
    return a if BytesRange(a, UNBOUNDED).intersect(BytesRange(b, UNBOUNDED)).start == b else b


def _max_end(a: Bound, b: Bound) -> Bound:
    return a if BytesRange(UNBOUNDED, a).intersect(BytesRange(UNBOUNDED, b)).end == b else b


def span_union(a: BytesRange | None, b: BytesRange | None) -> BytesRange | None:
    """The smallest range holding both (None: empty)."""
    if a is None or b is None:
        return a or b
    return BytesRange(_min_start(a.start, b.start), _max_end(a.end, b.end))


def check_disjoint(spans: Sequence[tuple[str, BytesRange | None]]) -> None:
    """Sources of a merge must hold disjoint key ranges (0.17 refuses a union of
    overlapping ones).

    Raises:
        InvalidArgumentError: naming two overlapping sources and their ranges.
    """
    for i, (a, ra) in enumerate(spans):
        for b, rb in spans[i + 1:]:
            if ra is not None and rb is not None and not ra.intersect(rb).is_empty():
                raise InvalidArgumentError(
                    f"sources {a!r} {ra} and {b!r} {rb} hold overlapping key ranges: a merge "
                    "needs sources with disjoint keys (e.g. the shards of one split); nothing "
                    "was written")


# ------------------------------------------------------------------------ liveness
@dataclass(frozen=True)
class Activity:
    """What storage shows of a source's writer: ages in seconds (None: unknown/none)."""

    manifest_id: int
    manifest_age_s: float | None
    wal_id: int | None
    wal_age_s: float | None


def live_writer_evidence(manifest: Manifest, activity: Activity, *, now_s: float,
                         window_s: float) -> list[str]:
    """Why the source's writer may be live (empty: no evidence): an unexpired slatelib
    writer checkpoint, or a manifest or WAL SST written within ``window_s``. An idle
    official writer writes nothing, so no evidence does not prove it is gone."""
    out = []
    for cp in manifest.checkpoints:
        if cp.writer_epoch is not None and not cp.is_expired(now_s):
            until = "never expires" if cp.expire_time_s is None else \
                f"expires in {cp.expire_time_s - now_s:.0f}s"
            out.append(f"a slatelib writer checkpoint of writer epoch {cp.writer_epoch} is "
                       f"unexpired ({until})")
    if activity.wal_age_s is not None and activity.wal_age_s <= window_s:
        out.append(f"WAL SST {activity.wal_id} was written {activity.wal_age_s:.0f}s ago "
                   f"(window {window_s:g}s)")
    if activity.manifest_age_s is not None and activity.manifest_age_s <= window_s:
        out.append(f"manifest {activity.manifest_id} was written "
                   f"{activity.manifest_age_s:.0f}s ago (window {window_s:g}s)")
    return out


# -------------------------------------------------------------------- job record
@dataclass(frozen=True)
class PlanPart:
    """Source ``source`` (an index into :attr:`RescalePlan.sources`) projected to
    ``range`` (None: all of it)."""

    source: int
    range: BytesRange | None = None


@dataclass(frozen=True)
class PlanTarget:
    path: str
    parts: tuple[PlanPart, ...]


@dataclass(frozen=True)
class PlanSource:
    """A source and the checkpoint the job clones it from (its id chosen before it is
    created, so a rerun finds it)."""

    path: str
    checkpoint_id: str


@dataclass(frozen=True)
class RescalePlan:
    """The job record (``<source>/slatelib/rescale/active.json`` while running, then
    ``<source>/slatelib/rescale/<job_id>.json``).

    ``split_keys`` is None for a split whose keys are chosen from the checkpoint (they are
    recorded once chosen: ``auto_keys``).
    """

    job_id: str
    kind: str
    created_ms: int
    sources: tuple[PlanSource, ...]
    targets: tuple[PlanTarget, ...]
    split_keys: tuple[bytes, ...] | None = None
    auto_keys: bool = False
    status: str = "running"
    """``running``, ``validated`` (every target checked: a rerun does not check again, the
    sources' checkpoints may be released already) or ``done``."""
    options: Mapping[str, Any] = field(default_factory=dict)
    validation: Mapping[str, Any] = field(default_factory=dict)
    """The figures of the check, once ``validated``."""

    def to_json(self) -> bytes:
        data = {
            "format": PLAN_FORMAT, "job_id": self.job_id, "kind": self.kind,
            "created_ms": self.created_ms, "status": self.status,
            "sources": [{"path": s.path, "checkpoint_id": s.checkpoint_id}
                        for s in self.sources],
            "targets": [{"path": t.path, "parts": [
                {"source": p.source, "range": range_to_json(p.range)} for p in t.parts]}
                for t in self.targets],
            "split_keys": None if self.split_keys is None else [k.hex() for k in self.split_keys],
            "auto_keys": self.auto_keys, "options": dict(self.options),
            "validation": dict(self.validation),
        }
        return json.dumps(data, indent=1, sort_keys=True).encode()

    @staticmethod
    def from_json(raw: bytes, *, path: str = "") -> RescalePlan:
        """Raises:
        InvalidDbStateError: not a job record this version can read."""
        try:
            d = json.loads(raw)
            if d.get("format") != PLAN_FORMAT:
                raise ValueError(f"format {d.get('format')!r}")
            keys = d.get("split_keys")
            return RescalePlan(
                job_id=str(d["job_id"]), kind=str(d["kind"]), created_ms=int(d["created_ms"]),
                sources=tuple(PlanSource(str(s["path"]), str(s["checkpoint_id"]))
                              for s in d["sources"]),
                targets=tuple(PlanTarget(str(t["path"]), tuple(
                    PlanPart(int(p["source"]), range_from_json(p["range"]))
                    for p in t["parts"])) for t in d["targets"]),
                split_keys=None if keys is None else tuple(bytes.fromhex(k) for k in keys),
                auto_keys=bool(d.get("auto_keys", False)), status=str(d.get("status")),
                options=dict(d.get("options") or {}),
                validation=dict(d.get("validation") or {}),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidDbStateError(
                f"rescale job record {path!r} cannot be read ({exc}); remove it if no job "
                "is running") from exc

    @property
    def source_paths(self) -> tuple[str, ...]:
        return tuple(s.path for s in self.sources)

    @property
    def target_paths(self) -> tuple[str, ...]:
        return tuple(t.path for t in self.targets)


def plan_split(job_id: str, source: str, checkpoint_id: str, targets: Sequence[str],
               keys: Sequence[bytes] | None, *, now_ms: int,
               options: Mapping[str, Any] | None = None) -> RescalePlan:
    """The record of a split of ``source`` into ``targets`` at ``keys`` (None: chosen later
    from the checkpoint; :func:`with_split_keys`).

    Raises:
        InvalidArgumentError: bad keys or targets.
    """
    check_target_paths([source], targets)
    check_shard_count(len(targets))
    plan = RescalePlan(job_id, SPLIT, now_ms, (PlanSource(source, checkpoint_id),),
                       tuple(PlanTarget(t, (PlanPart(0),)) for t in targets),
                       auto_keys=keys is None, options=dict(options or {}))
    return plan if keys is None else with_split_keys(plan, keys)


def with_split_keys(plan: RescalePlan, keys: Sequence[bytes]) -> RescalePlan:
    """``plan`` with its keys and each target's range.

    Raises:
        InvalidArgumentError: not ``len(targets) - 1`` valid keys.
    """
    check_split_keys(keys, len(plan.targets))
    ranges = shard_ranges(keys)
    targets = tuple(PlanTarget(t.path, (PlanPart(0, r),))
                    for t, r in zip(plan.targets, ranges, strict=True))
    return replace(plan, targets=targets, split_keys=tuple(keys))


def plan_merge(job_id: str, sources: Sequence[tuple[str, str]], target: str, *,
               now_ms: int, options: Mapping[str, Any] | None = None) -> RescalePlan:
    """The record of a merge of ``sources`` (``(path, checkpoint id)``) into ``target``.

    Raises:
        InvalidArgumentError: fewer than 2 sources, or bad paths.
    """
    if len(sources) < 2:
        raise InvalidArgumentError("a merge needs at least 2 sources")
    check_target_paths([p for p, _ in sources], [target])
    return RescalePlan(job_id, MERGE, now_ms, tuple(PlanSource(p, c) for p, c in sources),
                       (PlanTarget(target, tuple(PlanPart(i) for i in range(len(sources)))),),
                       options=dict(options or {}))


def same_job(recorded: RescalePlan, kind: str, sources: Sequence[str], targets: Sequence[str],
             keys: Sequence[bytes] | None) -> str | None:
    """None when a request (``keys`` None: chosen automatically) is the job ``recorded``
    (a rerun resumes it), else how they differ."""
    if recorded.kind != kind:
        return f"it is a {recorded.kind}, not a {kind}"
    if recorded.source_paths != tuple(sources):
        return f"its sources are {list(recorded.source_paths)}"
    if recorded.target_paths != tuple(targets):
        return f"its targets are {list(recorded.target_paths)}"
    if kind == SPLIT:
        if keys is None and not recorded.auto_keys:
            return "its split keys were given with --at"
        if keys is not None and (recorded.auto_keys or recorded.split_keys != tuple(keys)):
            shown = "chosen automatically" if recorded.auto_keys else \
                ",".join(format_key(k) for k in recorded.split_keys or ())
            return f"its split keys are {shown}"
    return None


__all__ = [
    "MERGE",
    "SPLIT",
    "Activity",
    "PlanPart",
    "PlanSource",
    "PlanTarget",
    "RescalePlan",
    "ShardEstimate",
    "balanced_split_keys",
    "check_shard_count",
    "check_split_keys",
    "check_disjoint",
    "check_target_paths",
    "describe_range",
    "expand_template",
    "format_key",
    "live_writer_evidence",
    "manifest_span",
    "parse_key",
    "parse_split_keys",
    "plan_merge",
    "plan_split",
    "range_from_json",
    "range_to_json",
    "same_job",
    "shard_ranges",
    "span_union",
    "with_split_keys",
]
