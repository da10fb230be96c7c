"""``plan_options``: the ``[compaction]`` settings of the size-tiered scheduler reach it."""

from __future__ import annotations

from slatelib.config import CompactionSettings, Settings
from slatelib.ops.compaction.run import plan_options


def test_every_scheduler_option_reaches_the_planner() -> None:
    s = Settings(compaction=CompactionSettings(
        min_compaction_sources=2, max_compaction_sources=3, include_size_threshold=2.5,
        sorted_run_consolidation_threshold=5))
    st = plan_options(s, None, None).size_tiered
    assert (st.min_compaction_sources, st.max_compaction_sources, st.include_size_threshold,
            st.sorted_run_consolidation_threshold) == (2, 3, 2.5, 5)
