"""A few fixed seeds of the soak (``make soak`` runs one long seed): about a minute in all.

Each seed deals a quarter of the scenarios (interleaved, so each mixes writer, compaction,
GC, checkpoint and clone cases) at least once, with the background workload around them;
together they cover every scenario of docs/fault-scenarios.md. A failure prints the seed
and the replay command.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.scenarios import SCENARIOS
from tests.faults.soak import SoakFailure, run_soak

pytestmark = [pytest.mark.integration, pytest.mark.interop]

MINUTES = 0.2
"""Per seed; a seed runs on until each of its scenarios ran once (see run_soak)."""
MAX_EPISODES = 40
COVERED = [s.id for s in SCENARIOS if not s.pending]
GROUPS = {seed: COVERED[i::4] for i, seed in enumerate((1101, 2202, 3303, 4404))}


def test_the_seed_groups_cover_every_scenario() -> None:
    assert sorted(sum(GROUPS.values(), [])) == sorted(COVERED)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("seed", sorted(GROUPS))
def test_soak_seed(seed: int, tmp_path: Path) -> None:
    only = GROUPS[seed]
    try:
        result = run_soak(seed, minutes=MINUTES, max_episodes=MAX_EPISODES,
                          root=tmp_path / "soak", only=only, full_round=True)
    except SoakFailure as exc:
        pytest.fail(str(exc), pytrace=False)
    missing = set(only) - set(result.covered)
    assert not missing, f"seed {seed}: scenarios {sorted(missing)} never ran\n{result.summary()}"
    print(result.summary())
