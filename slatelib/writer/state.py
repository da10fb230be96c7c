"""The writer's read state: one manifest version plus its memtables, swapped atomically."""

from __future__ import annotations

import threading

from slatelib.core.merge import MergeOperator
from slatelib.store.manifest_store import StoredManifest
from slatelib.store.memtables import WalMemTable
from slatelib.store.read_view import ReadView
from slatelib.store.table_store import TableStore


class DbState:
    """``stored`` (the manifest the writer reads from), the active memtable and the
    immutable ones (newest first). Immutable: changes make a new state with :meth:`replace`.
    The active memtable itself grows in place (acknowledged rows)."""

    __slots__ = ("stored", "active", "imms", "_tables", "_merge_operator", "_view", "_lock")

    def __init__(
        self,
        stored: StoredManifest,
        active: WalMemTable,
        imms: tuple[WalMemTable, ...],
        tables: TableStore,
        merge_operator: MergeOperator | None,
    ) -> None:
        self.stored = stored
        self.active = active
        self.imms = imms
        self._tables = tables
        self._merge_operator = merge_operator
        self._view: ReadView | None = None
        self._lock = threading.Lock()

    def replace(
        self,
        *,
        stored: StoredManifest | None = None,
        active: WalMemTable | None = None,
        imms: tuple[WalMemTable, ...] | None = None,
    ) -> DbState:
        return DbState(
            self.stored if stored is None else stored,
            self.active if active is None else active,
            self.imms if imms is None else imms,
            self._tables,
            self._merge_operator,
        )

    def view(self) -> ReadView:
        """Reads over the memtables (newest first), L0 and sorted runs (built once)."""
        view = self._view
        if view is None:
            with self._lock:
                view = self._view
                if view is None:
                    tables = [self.active.table, *(i.table for i in self.imms)]
                    view = ReadView(self._tables, self.stored.value, tables, self._merge_operator)
                    self._view = view
        return view
