"""How a rescale spreads its work over the executors: targets compacted at once, key ranges
per target compaction, scan chunks per target. Pure (docs/rfcs/0008-rescale-job.md,
"Fixed costs").

A rescale's targets are compacted (slatelib/ops/rescale/pipeline.py), then checked, on the
executor slots. Two things keep the job short:

- few Spark jobs: the key ranges of the targets compacted at once run as one job (which
  also checks them, slatelib/ops/rescale/task_check.py), and a separate check of the
  targets those tasks could not vouch for as one more; a job costs tens of milliseconds of
  driver CPU;
- few tasks, but enough: each one costs tens of milliseconds of scheduling, worker round
  trips and reader opens, which is most of what a small target's task does; about
  :data:`WAVES` per slot per step keeps every slot busy and evens out an unlucky split.
"""

from __future__ import annotations

from dataclasses import dataclass

from slatelib.errors import InvalidArgumentError

WAVES = 2
"""Tasks per executor slot a step aims at: one running and one queued behind it, or two
halves that even out an unlucky split."""

MAX_AT_ONCE = 8
"""Most targets compacted at once by default (``db_concurrency`` may ask for more): each
holds its compaction's driver state (manifests, its input SSTs' indexes and filters), and
past the point where their ranges fill every slot more of them add only driver memory."""


@dataclass(frozen=True)
class Fanout:
    """``concurrency``: targets compacted at once (driver threads, one Spark job each);
    ``ranges``: key ranges per target compaction (None: the compaction's own default, the
    ``[compaction] parallelism`` setting); ``chunks``: the least scan chunks per target
    (more when the target has more SSTs)."""

    concurrency: int
    ranges: int | None
    chunks: int


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def plan_fanout(targets: int, slots: int, *, db_concurrency: int,
                concurrency: int | None = None, parallelism: int | None = None,
                parallelism_setting: int = 0) -> Fanout:
    """The fan-out of a rescale of ``targets`` targets on ``slots`` executor slots.

    - ``concurrency`` (given: kept) defaults to every target, up to the larger of
      ``db_concurrency`` and ``WAVES * slots`` (at most :data:`MAX_AT_ONCE`): their ranges
      run as one batch (one Spark job), so the more targets in it, the fewer jobs.
    - ``parallelism`` (given: kept), else ``parallelism_setting`` when set (None: the
      compaction reads it itself), else ``WAVES * slots`` ranges shared by the targets
      compacted at once, at least 1 each.
    - chunks: ``WAVES * slots`` shared by all targets, at least 1 each.

    Raises:
        InvalidArgumentError: a count below 1 (``targets``, ``slots``, ``db_concurrency``,
            a given ``concurrency`` or ``parallelism``) or a negative ``parallelism_setting``.
    """
    if min(targets, slots, db_concurrency) < 1:
        raise InvalidArgumentError(
            f"targets ({targets}), slots ({slots}) and db_concurrency ({db_concurrency}) must "
            "be positive")
    for name, value in (("concurrency", concurrency), ("parallelism", parallelism)):
        if value is not None and value < 1:
            raise InvalidArgumentError(f"{name} must be positive, got {value}")
    if parallelism_setting < 0:
        raise InvalidArgumentError(
            f"[compaction] parallelism must not be negative, got {parallelism_setting}")
    work = WAVES * slots
    at_once = min(targets, concurrency or max(db_concurrency, min(work, MAX_AT_ONCE)))
    if parallelism is not None:
        ranges: int | None = parallelism
    elif parallelism_setting:
        ranges = None
    else:
        ranges = max(1, _ceil_div(work, at_once))
    return Fanout(at_once, ranges, max(1, _ceil_div(work, targets)))
