"""The cluster tier: one Spark standalone cluster (a master and two one-core workers, each
its own host) for every test of ``tests/cluster`` (``harness.py``).

The cluster needs what ``make test`` builds first: the packed executor env and the node
install (``make package-executor-env``). Without them the tier fails and says how to make
them; it never skips.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.harness import NODE_ENV, PACKED_ENV, Cluster

CLUSTER_TOML = """\
# The cluster tier's settings: small databases still split into several key ranges, the
# standing modes poll fast, and a store that does not answer fails in seconds.
[object_store]
max_retries = 1
retry_timeout = "5s"
[retry]
max_attempts = 2
[compaction]
min_range_bytes = "1"
[worker]
compactions_poll_interval = "200ms"
heartbeat_interval = "1s"
[service]
poll_interval = "300ms"
status_interval = "1s"
[gc]
min_age_floor = "0s"
driver_listing_max = 0              # list and decide on the executors, however small
"""


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    for what in (PACKED_ENV, NODE_ENV / "bin" / "python"):
        assert what.exists(), (f"{what} is missing: run `make package-executor-env` (make "
                               "test does) before the cluster tier")
    c = Cluster()
    c.start()
    (c.base / "cluster.toml").write_text(CLUSTER_TOML)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="session")
def cluster_conf(cluster: Cluster) -> Path:
    """The settings file the tier's jobs take (``--conf``)."""
    return cluster.base / "cluster.toml"
