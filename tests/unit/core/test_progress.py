"""Progress state: smoothed rate, ETA, one-line rendering and throttling, on a fake clock."""

from __future__ import annotations

import math

import pytest

from slatelib.core.progress import RATE_TAU_S, ProgressState, Throttle, fmt_eta


def test_steady_progress_has_its_rate_and_the_eta_of_what_is_left() -> None:
    p = ProgressState("gc delete", started_s=100.0, total=100_000)
    for second in range(1, 6):
        p.update(second * 8_000, 100.0 + second)
    assert p.rate == pytest.approx(8_000)
    assert p.eta_s(105.0) == pytest.approx(60_000 / 8_000)
    assert p.render(105.0) == "gc delete  40,000/100,000 objects  8,000/s  ETA 8s"


def test_the_rate_is_smoothed_not_the_last_instant() -> None:
    p = ProgressState("gc delete", started_s=0.0, total=1_000_000)
    for t in range(1, 11):
        p.update(t * 1_000, float(t))
    p.update(10_000 + 10_000, 11.0)  # one fast second: 10x the rate
    assert p.rate is not None
    expected = 1_000 + (1 - math.exp(-1 / RATE_TAU_S)) * (10_000 - 1_000)
    assert p.rate == pytest.approx(expected, rel=1e-6)
    assert 1_000 < p.rate < 10_000


def test_done_never_goes_back() -> None:
    p = ProgressState("gc list", started_s=0.0)
    p.update(50, 1.0)
    p.update(20, 2.0)  # a lagging counter
    assert p.done == 50


def test_unknown_total_has_no_eta_unless_a_fraction_is_known() -> None:
    p = ProgressState("gc list tenants/a/db/wal", started_s=0.0)
    p.update(12_000, 4.0)
    assert p.eta_s(4.0) is None
    assert p.render(4.0) == "gc list tenants/a/db/wal  12,000 objects  3,000/s"
    p.update(12_000, 4.0, fraction=0.25, detail="1/4 tasks")
    assert p.eta_s(4.0) == pytest.approx(12.0)
    assert p.render(4.0).endswith("ETA 12s  1/4 tasks")


def test_bytes_render_as_sizes_and_the_final_line_has_the_average_rate() -> None:
    p = ProgressState("compact db", started_s=0.0, unit="bytes", total=31_500_000)
    p.update(12_000_000, 4.0)
    assert p.render(4.0) == "compact db  12.0 MB/31.5 MB  3.0 MB/s  ETA 7s"
    p.update(31_500_000, 9.0)
    assert p.render(9.0, final=True) == "compact db  31.5 MB/31.5 MB  3.5 MB/s  done in 9.0s"


def test_a_phase_without_a_unit_shows_only_its_time() -> None:
    p = ProgressState("rescale split compact", started_s=0.0, unit="")
    p.update(0, 0.0)
    assert p.render(0.5) == "rescale split compact"
    assert p.render(72.0, final=True) == "rescale split compact  done in 1m12s"


def test_nothing_done_has_no_eta_and_a_finished_total_has_zero() -> None:
    p = ProgressState("gc delete", started_s=0.0, total=10)
    p.update(0, 1.0)
    assert p.eta_s(1.0) is None
    p.update(10, 2.0)
    assert p.eta_s(2.0) == 0.0


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0s"), (6.2, "7s"), (59, "59s"), (125, "2m05s"), (3725, "1h02m"),
])
def test_eta_text(seconds: float, text: str) -> None:
    assert fmt_eta(seconds) == text


def test_throttle_lets_one_line_through_per_interval_and_forced_ones_always() -> None:
    th = Throttle(10.0, last_s=0.0)
    assert [th.due(t) for t in (1.0, 9.9, 10.0, 15.0, 20.5)] == [False, False, True, False,
                                                                 True]
    assert th.due(21.0, force=True)
    assert not th.due(25.0)
    only_forced = Throttle(0.0)
    assert not only_forced.due(100.0) and only_forced.due(100.0, force=True)
