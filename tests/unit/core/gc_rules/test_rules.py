"""GC options (slatelib.core.gc_rules.rules): the min_age floor and duration checks."""

from __future__ import annotations

from dataclasses import replace

import pytest

from slatelib.core.gc_rules import GcOptions
from slatelib.errors import InvalidArgumentError


def test_min_age_below_the_floor_is_refused_without_force() -> None:
    with pytest.raises(InvalidArgumentError, match=r"min_age 1m is below the safety floor 5m.*force"):
        GcOptions(min_age_s=60).check()
    GcOptions(min_age_s=60, force=True).check()
    GcOptions(min_age_s=300).check()


@pytest.mark.parametrize("field", ["min_age_s", "min_age_floor_s", "db_delete_grace_s"])
def test_negative_or_infinite_durations_are_refused(field: str) -> None:
    for bad in (-1.0, float("inf"), float("nan")):
        with pytest.raises(InvalidArgumentError, match=field):
            replace(GcOptions(force=True), **{field: bad}).check()
