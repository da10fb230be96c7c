"""Compatibility alias: the compaction API moved to :mod:`slatelib.ops.compaction`.

``from slatelib.ops.compact import run_compaction, ThreadTaskRunner, ...`` keeps working;
new code imports from :mod:`slatelib.ops.compaction`. Re-exports only, no logic.
"""

from __future__ import annotations

from slatelib.ops.compaction import *  # noqa: F403 - the alias re-exports the package API
from slatelib.ops.compaction import __all__ as __all__
