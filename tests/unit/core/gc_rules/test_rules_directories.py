"""Per-directory GC options (GcOptions.directory and friends, docs/rfcs/0013-gc-options.md):
0.17's manifest/wal/wal_fence/compacted/compactions options resolved against the run's
defaults, and the refusals."""

from __future__ import annotations

import pytest

from slatelib.core.gc_rules import DirOptions, GcOptions, ObjectKind
from slatelib.errors import InvalidArgumentError

K = ObjectKind


def opts(**dirs: DirOptions) -> GcOptions:
    return GcOptions(min_age_s=600, directories=tuple((K(k), v) for k, v in dirs.items()))


def test_unset_directory_options_take_the_runs_defaults() -> None:
    o = opts()
    for kind in (K.MANIFEST, K.WAL, K.COMPACTED, K.COMPACTIONS):
        p = o.directory(kind)
        assert (p.enabled, p.min_age_s, p.dry_run, p.explicit_dry_run) == (True, 600, False,
                                                                           False)
    fence = o.directory(K.WAL_FENCE)  # 0.17: wal_fence_options dry_run is true by default
    assert (fence.min_age_s, fence.dry_run, fence.explicit_dry_run) == (600, True, True)


def test_a_directorys_own_options_win_over_the_defaults() -> None:
    o = opts(wal=DirOptions(min_age_s=3600, dry_run=True, interval_s=60),
             wal_fence=DirOptions(min_age_s=86400 * 30, dry_run=False),
             compactions=DirOptions(enabled=False))
    assert o.directory(K.WAL) == o.policies()[K.WAL]
    assert o.directory(K.WAL).to_json() == {"enabled": True, "min_age_s": 3600, "dry_run": True,
                                            "interval_s": 60}
    assert o.directory(K.WAL_FENCE).dry_run is False
    assert o.directory(K.WAL_FENCE).min_age_s == 86400 * 30
    assert o.disabled_kinds() == {K.COMPACTIONS}


def test_the_default_dry_run_covers_the_fence_even_when_its_own_default_is_off() -> None:
    o = GcOptions(dry_run=True, wal_fence_dry_run=False)
    assert o.directory(K.WAL_FENCE).dry_run is True
    assert o.directory(K.WAL_FENCE).explicit_dry_run is False
    assert o.writes_nothing()


def test_writes_nothing_only_when_every_enabled_directory_and_detach_are_dry() -> None:
    assert not GcOptions().writes_nothing()
    assert GcOptions(dry_run=True).writes_nothing()
    one_real = GcOptions(dry_run=True, directories=((K.WAL, DirOptions(dry_run=False)),))
    assert not one_real.writes_nothing()
    all_dry = tuple((k, DirOptions(dry_run=True)) for k in
                    (K.MANIFEST, K.WAL, K.WAL_FENCE, K.COMPACTED, K.COMPACTIONS))
    assert not GcOptions(directories=all_dry).writes_nothing()  # detach still writes
    assert GcOptions(directories=all_dry, detach_enabled=False).writes_nothing()
    real_but_disabled = ((K.WAL, DirOptions(enabled=False, dry_run=False)),)
    assert GcOptions(dry_run=True, directories=real_but_disabled).writes_nothing()


def test_dry_kinds_of_a_whole_dry_run_are_only_the_directories_own() -> None:
    o = GcOptions(dry_run=True, directories=((K.COMPACTED, DirOptions(dry_run=True)),
                                             (K.WAL, DirOptions(dry_run=False))))
    assert o.dry_kinds(whole_dry_run=False) == {K.MANIFEST, K.WAL_FENCE, K.COMPACTED,
                                                K.COMPACTIONS}
    # a dry run of the whole database reports what a run would delete, except where the
    # directory itself is configured as a dry run
    assert o.dry_kinds(whole_dry_run=True) == {K.WAL_FENCE, K.COMPACTED}


def test_each_enabled_directorys_min_age_is_held_to_the_floor() -> None:
    with pytest.raises(InvalidArgumentError, match="wal_options min_age 1m is below the safety"):
        opts(wal=DirOptions(min_age_s=60)).check()
    opts(wal=DirOptions(min_age_s=60, enabled=False)).check()
    GcOptions(min_age_s=600, force=True,
              directories=((K.WAL, DirOptions(min_age_s=0)),)).check()
    with pytest.raises(InvalidArgumentError, match="gc min_age 1m is below"):
        GcOptions(min_age_s=60, directories=((K.WAL, DirOptions(min_age_s=60)),)).check()


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_bad_directory_durations_are_refused(bad: float) -> None:
    with pytest.raises(InvalidArgumentError, match="gc wal_options min_age_s must be a finite"):
        opts(wal=DirOptions(min_age_s=bad)).check()
    with pytest.raises(InvalidArgumentError, match="compacted_options interval_s"):
        opts(compacted=DirOptions(interval_s=bad)).check()


def test_options_for_a_kind_without_a_directory_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="no directory options for 'boundary'"):
        GcOptions(directories=((K.BOUNDARY, DirOptions()),)).check()
