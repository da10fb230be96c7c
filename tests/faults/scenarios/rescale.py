"""pending: rescale. The harness hook for rescaling (docs/fault-scenarios.md, R01).

Rescaling (projected and union clones that split or merge databases by key range) does
not exist yet. When it does, this scenario should run it under the same faults as the
clone scenarios (a crash at any write and a retry, a destroy of a source meanwhile, GC of
the sources and the results) and check that every result database reads exactly its
range of the source checkpoints, through both readers. Until then it is registered as
pending and never scheduled.
"""

from __future__ import annotations

from tests.faults.world import World


def rescale_pending(world: World) -> None:
    """R01 (pending: rescale): rescale a database under faults."""
    raise NotImplementedError("pending: rescale")
