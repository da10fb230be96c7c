"""Helpers for writer tests (unit, integration and interop): settings, a test compactor."""

from __future__ import annotations

import uuid
from dataclasses import replace

from slatelib.config import ReaderSettings, Settings, SstSettings, WriterSettings
from slatelib.core.manifest import Manifest, SortedRun, SstHandle, SstView
from slatelib.core.row import Row
from slatelib.format.sst import SstWriter, SstWriterOptions
from slatelib.ids import UlidGenerator
from slatelib.objstore import ObjectStore, open_store
from slatelib.store.manifest_store import ManifestStore, StoredManifest
from slatelib.store.read_view import ReadView
from slatelib.store.table_store import TableStore
from slatelib.txn import update_versioned


def memory_store() -> ObjectStore:
    """A fresh, private in-memory store."""
    return open_store(f"memory://{uuid.uuid4().hex}/")


def writer_settings(**writer: object) -> Settings:
    """Settings for tests: no flush timer, no manifest polling unless asked (so the writer
    checkpoint lives 4 hours), small SSTs."""
    w: dict[str, object] = {"flush_interval": None, "manifest_poll_interval": 3600.0,
                            "checkpoint_lifetime": 4 * 3600.0}
    w.update(writer)
    return replace(
        Settings(),
        writer=replace(WriterSettings(), **w),  # type: ignore[arg-type]
        sst=replace(SstSettings(), min_filter_keys=1),
        reader=replace(ReaderSettings(), manifest_poll_interval=1.0, checkpoint_lifetime=60.0,
                       io_threads=2),
    )


def _newest_versions(rows: list[Row]) -> list[Row]:
    out: list[Row] = []
    for r in rows:
        if not out or out[-1][0] != r[0]:
            out.append(r)
    return out


def compact_l0(store: ObjectStore, path: str, *, now_ms: int) -> StoredManifest:
    """A minimal compactor: every L0 view (and every sorted run) into one new sorted run,
    committed with a manifest CAS the way 0.17's compactor does (new run, L0 removed,
    ``last_compacted_l0_sst_view_id`` set). Tombstones are kept."""
    manifests = ManifestStore(store, path)
    latest = manifests.read_latest()
    m = latest.value
    rows = _newest_versions(list(ReadView(TableStore(store, path), replace(m), []).iter_rows()))
    writer = SstWriter(SstWriterOptions(min_filter_keys=1))
    writer.add_rows(rows)
    encoded = writer.finish()
    sst_id = UlidGenerator().new(now_ms)
    TableStore(store, path).write_sst(sst_id, encoded)
    handle = SstHandle(sst_id, encoded.info, encoded.format_version)
    inputs = {v.id for v in m.l0}
    newest = m.l0[0].id if m.l0 else m.last_compacted_l0_sst_view_id
    run_id = max((r.id for r in m.compacted), default=-1) + 1

    def mutate(cur: StoredManifest) -> Manifest | None:
        c = cur.value
        if c.last_compacted_l0_sst_view_id == newest and any(
                v.sst_id == sst_id for r in c.compacted for v in r.views):
            return None
        run = SortedRun(run_id, (SstView.identity(sst_id),))
        out = c.with_trees(l0=[v for v in c.l0 if v.id not in inputs], compacted=[run],
                           new_ssts=[handle])
        return replace(out, last_compacted_l0_sst_view_id=newest)

    return update_versioned(manifests, mutate)
