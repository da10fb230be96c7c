"""The WAL tail a manifest promises, and the refusal text."""

from __future__ import annotations

from dataclasses import replace

from slatelib.core.manifest import Manifest
from slatelib.core.wal_tail import ids_text, missing_tail_message, wal_tail


def test_the_tail_is_the_ids_after_replay_after_up_to_the_last_seen() -> None:
    m = Manifest.initial()
    assert wal_tail(replace(m, replay_after_wal_id=4, wal_id_last_seen=4)) is None
    assert wal_tail(replace(m, replay_after_wal_id=4, wal_id_last_seen=3)) is None
    assert wal_tail(replace(m, replay_after_wal_id=2, wal_id_last_seen=4)) == (3, 4)
    assert wal_tail(replace(m, replay_after_wal_id=2, wal_id_last_seen=4,
                            initialized=False)) is None  # a clone still being made
    assert ids_text(3, 3) == "WAL 3" and ids_text(3, 4) == "WAL 3..4"


def test_the_message_names_the_ids_the_place_and_the_option() -> None:
    m = replace(Manifest.initial(), replay_after_wal_id=2, wal_id_last_seen=4)
    none_given = missing_tail_message("a/db", m, manifest_id=8, where="file:///x/a/db/wal",
                                      wal_store_url=None)
    assert "manifest 8 says WAL 3..4 exist" in none_given
    assert "file:///x/a/db/wal/ holds none of them" in none_given
    assert "--wal-store" in none_given and "Nothing was written" in none_given
    wrong = missing_tail_message("a/db", m, manifest_id=None, where="s3://w/a/db/wal",
                                 wal_store_url="s3://w")
    assert "the WAL store s3://w given is not the one" in wrong and "--wal-store" in wrong
