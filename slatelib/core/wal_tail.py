"""The WAL tail a manifest promises, and the refusal when the store read lacks it. Pure.

A manifest's WAL SSTs after ``replay_after_wal_id`` up to ``wal_id_last_seen`` (format §5.2,
§8.3) were written and seen by a writer or reader, and GC keeps every one of them while that
manifest is live (format §12). A store that holds none of them is not the store that holds
this database's WAL: 0.17 can keep the WAL in a separate object store
(``with_wal_object_store``) that the manifest does not record, and a reader or writer that
is not given it sees an empty WAL tail. 0.17 then silently reads (and a writer silently
skips) the writes that only live in the WAL; slatelib refuses instead
(:class:`~slatelib.errors.WalStoreMissingError`, exit code 5).

Some but not all of the ids missing is not this error: a writer that crashed with several
WAL writes in flight can leave a gap (format §8.3), and replay stops there.
"""

from __future__ import annotations

from slatelib.core.manifest import Manifest

WAL_STORE_HINT = ("pass --wal-store URL (or set [object_store] wal_store or SLATELIB_WAL_STORE; "
                  "wal_store= in Python)")


def wal_tail(m: Manifest) -> tuple[int, int] | None:
    """``(first, last)``: the WAL ids ``(replay_after_wal_id, wal_id_last_seen]`` that
    ``m`` says exist, or None when there are none. An uninitialized manifest (a clone being
    created: its WAL SSTs are copied before it is initialized) promises none yet."""
    if not m.initialized:
        return None
    first, last = m.replay_after_wal_id + 1, m.wal_id_last_seen
    return (first, last) if last >= first else None


def ids_text(first: int, last: int) -> str:
    """``WAL 7`` or ``WAL 7..9``."""
    return f"WAL {first}" if first == last else f"WAL {first}..{last}"


def missing_tail_message(
    root: str, m: Manifest, *, manifest_id: int | None, where: str, wal_store_url: str | None,
) -> str:
    """Why a store whose WAL directory ``where`` holds none of ``m``'s WAL tail is refused
    (``wal_store_url``: the separate WAL store that was given, None: none was)."""
    tail = wal_tail(m)
    assert tail is not None
    first, last = tail
    label = "the manifest" if manifest_id is None else f"manifest {manifest_id}"
    head = (f"{root!r}: {label} says {ids_text(first, last)} exist (after "
            f"replay_after_wal_id {m.replay_after_wal_id}, up to wal_id_last_seen {last}), "
            f"but {where}/ holds none of them; ")
    if wal_store_url is None:
        return (head + "the database keeps its WAL in a separate object store (0.17's "
                f"with_wal_object_store): {WAL_STORE_HINT} naming that store. Nothing was "
                "written; reading without it would miss the writes that are only in the WAL")
    return (head + f"the WAL store {wal_store_url} given is not the one that holds this "
            "database's WAL, or the database path inside it differs (it is the same path as "
            f"in the main store): {WAL_STORE_HINT} naming the right store. Nothing was written")
