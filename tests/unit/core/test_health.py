"""check_thresholds: strictly above the limit, unknown values, never compacted, foreign
compactor."""

from __future__ import annotations

from dataclasses import replace

from slatelib.core.compactor_claim import ClaimVerdict, Holder
from slatelib.core.health import THRESHOLDS, Thresholds, check_thresholds
from tests.unit.core.test_db_stats import HOUR, T0, Db


def test_each_threshold_is_crossed_only_above_its_limit() -> None:
    s = Db().stats()  # L0 2, runs 2, manifests 3, GC 177 B / 6 objects, WAL to replay 3
    at = Thresholds(max_l0=2, max_sorted_runs=2, max_manifests=3, max_gc_backlog_bytes=177,
                    max_gc_backlog_objects=6, max_wal_to_replay=3,
                    max_compaction_age_s=2 * 3600)
    assert check_thresholds(s, at) == []
    below = Thresholds(max_l0=1, max_sorted_runs=1, max_manifests=2, max_gc_backlog_bytes=176,
                       max_gc_backlog_objects=5, max_wal_to_replay=2,
                       max_compaction_age_s=3600)
    got = check_thresholds(s, below)
    assert [b.flag for b in got] == [t.flag for t in THRESHOLDS if t.flag !=
                                     "--max-checkpoint-age"]
    assert got[0].message == "L0 SSTs of the deepest tree 2 > --max-l0 1"
    assert got[3].message == "bytes GC could reclaim 177 B > --max-gc-backlog-bytes 176 B"
    assert got[-1].value == 2 * 3600 and "2h00m > --max-compaction-age 1h00m" in got[-1].message


def test_unknown_values_cross_nothing_but_never_compacting_does() -> None:
    db = Db()
    s = db.stats()
    assert s.oldest_checkpoint_age_s is None
    assert check_thresholds(s, Thresholds(max_checkpoint_age_s=0)) == []
    db.m = replace(db.m, compacted=())
    never = db.stats()
    [b] = check_thresholds(never, Thresholds(max_compaction_age_s=HOUR / 1000))
    assert b.value is None and b.message.startswith("never compacted, with 2 L0 SSTs waiting")


def test_a_foreign_compactor_is_a_breach_only_when_asked() -> None:
    s = Db().stats(verdict=ClaimVerdict(Holder.FOREIGN, 4, "not claimed by slatelib"))
    assert check_thresholds(s, Thresholds()) == []
    [b] = check_thresholds(s, Thresholds(no_foreign_compactor=True))
    assert b.flag == "--no-foreign-compactor" and b.message.startswith(
        "a foreign compactor holds epoch 4 (not claimed")
    assert T0 > 0
