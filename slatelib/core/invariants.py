"""Fencing and the invariants of every manifest and compactions-file mutation. Pure.

Fencing (format §8.2): a writer owns the database through ``writer_epoch``, a compactor
through ``compactor_epoch`` (in the manifest and in the compactions file). A party whose
epoch is below the stored one has been fenced and must stop; one whose epoch is above the
stored one sees state that went backwards, which no correct party writes.

:func:`check_manifest_successor` is what :func:`slatelib.txn.update_versioned` checks
before writing any new manifest version over its predecessor: the fields that only ever
grow do not shrink, and a destroyed or initialized database does not come back. A mutation
that would break one raises :class:`~slatelib.errors.InternalError` (a bug in slatelib:
nothing is written).
"""

from __future__ import annotations

from slatelib.core.compactions import Compactions
from slatelib.core.manifest import Manifest
from slatelib.errors import FencedError, InternalError, InvalidDbStateError


def check_writer_epoch(manifest: Manifest, epoch: int) -> None:
    """Raise :class:`FencedError` when a newer writer owns the database."""
    if manifest.writer_epoch > epoch:
        raise FencedError(
            f"fenced: writer epoch {manifest.writer_epoch} in the manifest is newer than "
            f"ours ({epoch})")


def _check_owned(stored: int, ours: int, where: str) -> None:
    """Raise unless ``ours`` is the compactor epoch stored ``where``.

    Raises:
        FencedError: a newer compactor took over.
        InvalidDbStateError: the stored epoch is below ours (it went backwards).
    """
    if stored > ours:
        raise FencedError(f"fenced: compactor epoch {stored} in {where} is newer than ours "
                          f"({ours})")
    if stored < ours:
        raise InvalidDbStateError(f"compactor epoch in {where} went backwards: {stored} is "
                                  f"below ours ({ours})")


def check_compactor_epoch(manifest: Manifest, epoch: int) -> None:
    """Raise unless ``epoch`` is still the manifest's compactor epoch (see
    :func:`_check_owned`)."""
    _check_owned(manifest.compactor_epoch, epoch, "the manifest")


def check_compactions_epoch(state: Compactions, epoch: int) -> None:
    """Raise unless ``epoch`` owns the compactions file (see :func:`_check_owned`)."""
    _check_owned(state.compactor_epoch, epoch, "the compactions file")


def check_compactions_claimable(state: Compactions, epoch: int) -> None:
    """Raise :class:`FencedError` unless a compactor of ``epoch`` may claim the file (its
    epoch is below ours)."""
    if state.compactor_epoch >= epoch:
        raise FencedError(
            f"fenced: compactions file epoch {state.compactor_epoch} is not below ours "
            f"({epoch})")


_GROWING = ("writer_epoch", "compactor_epoch", "replay_after_wal_id", "wal_id_last_seen",
            "last_l0_seq")


def check_manifest_successor(old: Manifest, new: Manifest) -> None:
    """Raise :class:`InternalError` when ``new`` cannot follow ``old``: a fencing epoch,
    the WAL replay position or the L0 sequence went backwards, or an initialized or
    destroyed database stopped being so."""
    for name in _GROWING:
        before, after = getattr(old, name), getattr(new, name)
        if after < before:
            raise InternalError(f"manifest update would move {name} backwards "
                                f"({before} -> {after}); nothing was written")
    if old.initialized and not new.initialized:
        raise InternalError("manifest update would un-initialize the database")
    if old.destroyed_at_s is not None and new.destroyed_at_s != old.destroyed_at_s:
        raise InternalError("manifest update would undo or move the database's destruction")
