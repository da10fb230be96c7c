"""The manifest of one database: the one handle that reads it, changes it with CAS, and
owns its checkpoints and external databases.

In the spirit of SlateDB's ``StoredManifest`` / ``FenceableManifest``: callers build one
:class:`DbManifest` per database (``DbManifest(store, root)``, the only place a
:class:`~slatelib.store.manifest_store.ManifestStore` is constructed) and pass it on.
It reads like a :class:`ManifestStore` (it is one: every reader that takes the versions
takes the handle), and every change goes through :meth:`DbManifest.update`, which is
:func:`slatelib.txn.transact` ("fence, deadline, did it land").

Checkpoints are created, refreshed and deleted here, and only here; a checkpoint that is
part of a larger change (a compaction commit's marker, a fence manifest's claim marker, a
writer's or reader's own checkpoint) is built by the pure rules of
:mod:`slatelib.core.checkpoints` inside that change's step.

Every step below is a pure function of the version it is given
(docs/rfcs/0020-house-second-step.md, "manifest"). Design doc 'checkpoints and clones' and format §5.5.7.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from slatelib.clock import SYSTEM_CLOCK, Clock
from slatelib.core.checkpoints import (
    add_checkpoint,
    new_checkpoint,
    refresh_checkpoint,
    remove_checkpoints,
)
from slatelib.core.gc_plan import remove_detached, without_expired_checkpoints
from slatelib.core.manifest import Checkpoint, Manifest
from slatelib.store.manifest_store import ManifestStore, StoredManifest
from slatelib.txn import Deadline, transact

if TYPE_CHECKING:
    from slatelib.objstore import ObjectStore

log = logging.getLogger(__name__)

Step = Callable[[StoredManifest], Manifest | None]


def checkpoint_step(
    checkpoint_id: uuid.UUID,
    *,
    clock: Clock = SYSTEM_CLOCK,
    lifetime_s: float | None = None,
    source: uuid.UUID | None = None,
    name: str | None = None,
    renew: bool = False,
    check: Callable[[Manifest], None] | None = None,
    also: Callable[[Manifest], Manifest] | None = None,
) -> Step:
    """The pure step of :meth:`DbManifest.create_checkpoint` (applied without writing, it
    checks that the checkpoint can be created)."""
    def step(cur: StoredManifest) -> Manifest | None:
        now_s = clock.now_ms() / 1000
        if cur.value.checkpoint(checkpoint_id) is not None:
            if not renew:
                return None  # there already: an earlier attempt landed, or a rerun
            return refresh_checkpoint(cur.value, checkpoint_id, now_s=now_s,
                                      lifetime_s=lifetime_s)
        if check is not None:
            check(cur.value)
        cp = new_checkpoint(cur.value, cur.id + 1, now_s=now_s, lifetime_s=lifetime_s,
                            source=source, name=name, checkpoint_id=checkpoint_id)
        out = add_checkpoint(cur.value, cp)
        return out if also is None else also(out)

    return step


class DbManifest(ManifestStore):
    """The manifest versions of the database at ``root`` and every change to them."""

    def __init__(self, store: ObjectStore, root: str) -> None:
        super().__init__(store, root)

    def update(
        self,
        step: Step,
        *,
        clock: Clock = SYSTEM_CLOCK,
        current: StoredManifest | None = None,
        fence: Callable[[Manifest], None] | None = None,
        landed: Callable[[Manifest], bool] | None = None,
        deadline: Deadline | None = None,
        what: str = "manifest update",
    ) -> StoredManifest:
        """One manifest CAS, retried on conflicts (:func:`slatelib.txn.transact`).
        ``current``: a version just read, tried first."""
        return transact(self, step, clock=clock, fence=fence, landed=landed,
                        deadline=deadline, current=current, what=what)

    # ------------------------------------------------------------------ checkpoints
    def create_checkpoint(
        self,
        *,
        clock: Clock = SYSTEM_CLOCK,
        lifetime_s: float | None = None,
        source: uuid.UUID | None = None,
        name: str | None = None,
        checkpoint_id: uuid.UUID | None = None,
        renew: bool = False,
        check: Callable[[Manifest], None] | None = None,
        also: Callable[[Manifest], Manifest] | None = None,
        current: StoredManifest | None = None,
    ) -> tuple[Checkpoint, StoredManifest]:
        """Add checkpoint ``checkpoint_id`` (a new id when None): of the current manifest
        (it pins latest + 1), or a copy of checkpoint ``source``. When it is there already
        (an earlier attempt landed, or a rerun) it is kept as it is, or with ``renew`` its
        expiry is set to now + ``lifetime_s``. ``check`` (raising) runs on the version the
        checkpoint is added to; ``also`` changes that version further in the same CAS.
        Returns the checkpoint and the version returned by the CAS.

        Raises:
            InvalidDbStateError: uninitialized or destroyed, or ``source`` is missing or
                expired (also from ``check``).
            InvalidArgumentError: a bad lifetime or name.
        """
        cid = checkpoint_id or uuid.uuid4()
        step = checkpoint_step(cid, clock=clock, lifetime_s=lifetime_s, source=source,
                               name=name, renew=renew, check=check, also=also)
        stored = self.update(step, clock=clock, current=current, what="create checkpoint")
        cp = stored.value.checkpoint(cid)
        assert cp is not None
        return cp, stored

    def refresh_checkpoint(self, checkpoint_id: uuid.UUID, *, lifetime_s: float | None,
                           clock: Clock = SYSTEM_CLOCK) -> Checkpoint:
        """Set the expiry of checkpoint ``checkpoint_id`` to now + ``lifetime_s`` (None: it
        never expires).

        Raises:
            InvalidDbStateError: no such checkpoint.
        """
        stored = self.update(lambda cur: refresh_checkpoint(
            cur.value, checkpoint_id, now_s=clock.now_ms() / 1000, lifetime_s=lifetime_s),
            clock=clock, what="refresh checkpoint")
        cp = stored.value.checkpoint(checkpoint_id)
        assert cp is not None
        return cp

    def delete_checkpoints(self, ids: Collection[uuid.UUID], *, clock: Clock = SYSTEM_CLOCK,
                           current: StoredManifest | None = None,
                           ) -> tuple[set[uuid.UUID], StoredManifest]:
        """Delete the checkpoints ``ids`` (idempotent). Returns those this call removed
        (the ones absent already are not) and the resulting version.

        Raises:
            ManifestMissingError / NotADatabaseRootError: no manifest.
        """
        wanted = set(ids)
        removed: set[uuid.UUID] = set()

        def step(cur: StoredManifest) -> Manifest | None:
            here = {c.id for c in cur.value.checkpoints} & wanted
            removed.update(here)  # an attempt whose response was lost removed them too
            return remove_checkpoints(cur.value, here) if here else None

        stored = self.update(step, clock=clock, current=current, what="delete checkpoint")
        return removed, stored

    def delete_checkpoint(self, checkpoint_id: uuid.UUID, *,
                          clock: Clock = SYSTEM_CLOCK) -> bool:
        """Delete one checkpoint: the one way every caller does it. True when this call
        removed it, False when it was already gone (as 0.17, not an error).

        Raises:
            ManifestMissingError / NotADatabaseRootError: no manifest.
        """
        removed, _ = self.delete_checkpoints({checkpoint_id}, clock=clock)
        if removed:
            log.info("checkpoint deleted [path=%s, id=%s]", self.root, checkpoint_id)
        return bool(removed)

    def remove_expired_checkpoints(self, *, clock: Clock,
                                   current: StoredManifest | None = None,
                                   also: Collection[uuid.UUID] = (),
                                   ) -> tuple[StoredManifest, list[Checkpoint]]:
        """Remove the checkpoints expired by ``clock`` (0.17 keeps one while
        ``expire_time > now``), and in the same CAS the checkpoints ``also`` (those
        present). Returns the resulting version and what was removed."""
        removed: list[Checkpoint] = []
        extra = set(also)

        def step(cur: StoredManifest) -> Manifest | None:
            kept, expired = without_expired_checkpoints(cur.value, clock.now_ms() / 1000)
            gone = {c.id for c in expired}
            named = [c for c in kept.checkpoints if c.id in extra and c.id not in gone]
            removed[:] = expired + named
            if not removed:
                return None
            return remove_checkpoints(kept, {c.id for c in named}) or kept

        got = self.update(step, clock=clock, current=current, what="remove expired checkpoints")
        return got, removed

    # ------------------------------------------------------------ external databases
    def drop_external_dbs(self, final_ids: set[uuid.UUID], *,
                          clock: Clock = SYSTEM_CLOCK) -> StoredManifest:
        """Remove the external databases detached under ``final_ids`` (only entries whose
        ``sst_ids`` are still empty)."""
        return self.update(lambda cur: remove_detached(cur.value, final_ids), clock=clock,
                           what="drop external databases")
