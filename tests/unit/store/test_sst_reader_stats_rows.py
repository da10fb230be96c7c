"""``SstReader.stats_rows``: the stats block's row totals without its per-block stats."""

from __future__ import annotations

import uuid

from slatelib.core.row import TOMBSTONE, VALUE
from slatelib.objstore import open_store
from slatelib.store.manifest_store import ManifestStore
from slatelib.store.sst_reader import SstReader
from slatelib.store.table_store import TableStore
from tests.compaction_fixtures import NOW_MS, flush_l0, new_db


def test_stats_rows_is_the_stats_blocks_total() -> None:
    store = open_store(f"memory://{uuid.uuid4().hex}/")
    new_db(store, "db")
    rows = [(b"k%04d" % k, 1, TOMBSTONE if k % 7 == 0 else VALUE,
             b"" if k % 7 == 0 else b"v%d" % k, None, NOW_MS) for k in range(300)]
    flush_l0(store, "db", rows)
    manifest = ManifestStore(store, "db").read_latest().value
    view = manifest.l0[0]
    reader = SstReader(store, TableStore(store, "db").sst_path(view.sst_id),
                       manifest.sst(view.sst_id))
    stats = reader.stats()
    assert stats is not None and stats.num_deletes == 43  # the tombstones are counted
    assert reader.stats_rows() == stats.num_rows == 300
