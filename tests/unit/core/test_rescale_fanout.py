"""How a rescale spreads its work: targets at once, ranges per target, chunks per target."""

from __future__ import annotations

import pytest

from slatelib.core.rescale_fanout import MAX_AT_ONCE, WAVES, Fanout, plan_fanout
from slatelib.errors import InvalidArgumentError


def test_a_split_of_four_on_two_slots_runs_one_task_per_target_per_step() -> None:
    # every target in flight (4 = WAVES * 2 slots), one range each: 4 compaction tasks, and
    # one scan chunk each: 4 check tasks, two per slot in both steps
    assert WAVES == 2
    assert plan_fanout(4, 2, db_concurrency=2) == Fanout(concurrency=4, ranges=1, chunks=1)


def test_a_merge_spreads_its_one_target_over_every_slot_twice() -> None:
    assert plan_fanout(1, 2, db_concurrency=2) == Fanout(concurrency=1, ranges=4, chunks=4)


def test_many_slots_give_each_target_a_share() -> None:
    assert plan_fanout(8, 100, db_concurrency=4) == Fanout(8, 25, 25)
    # at most MAX_AT_ONCE by default (driver memory), unless db_concurrency asks for more
    assert plan_fanout(64, 100, db_concurrency=4) == Fanout(MAX_AT_ONCE, 25, 4)
    assert plan_fanout(64, 100, db_concurrency=16) == Fanout(16, 13, 4)
    # more targets than WAVES * slots: db_concurrency's floor, then at least 1 of each
    assert plan_fanout(64, 2, db_concurrency=8) == Fanout(8, 1, 1)
    assert plan_fanout(64, 2, db_concurrency=2) == Fanout(4, 1, 1)


def test_given_values_are_kept() -> None:
    assert plan_fanout(4, 2, db_concurrency=2, concurrency=1) == Fanout(1, 4, 1)
    assert plan_fanout(4, 2, db_concurrency=2, parallelism=3) == Fanout(4, 3, 1)
    assert plan_fanout(9, 2, db_concurrency=2, concurrency=20) == Fanout(9, 1, 1)


def test_the_parallelism_setting_is_left_to_the_compaction() -> None:
    assert plan_fanout(4, 2, db_concurrency=2, parallelism_setting=6) == Fanout(4, None, 1)
    assert plan_fanout(4, 2, db_concurrency=2, parallelism=2,
                       parallelism_setting=6).ranges == 2


@pytest.mark.parametrize("kwargs, message", [
    ({"targets": 0}, "targets"),
    ({"slots": 0}, "slots"),
    ({"db_concurrency": 0}, "db_concurrency"),
    ({"concurrency": 0}, "concurrency must be positive"),
    ({"parallelism": -1}, "parallelism must be positive"),
    ({"parallelism_setting": -1}, "must not be negative"),
])
def test_bad_counts_are_refused(kwargs: dict[str, int], message: str) -> None:
    args = {"targets": 4, "slots": 2, "db_concurrency": 2, **kwargs}
    with pytest.raises(InvalidArgumentError, match=message):
        plan_fanout(args.pop("targets"), args.pop("slots"), **args)
