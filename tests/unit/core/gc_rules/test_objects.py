"""Listed objects (slatelib.core.gc_rules.objects): their kind, and names SlateDB does not
write, which are always kept."""

from __future__ import annotations

import pytest

from slatelib.core.gc_rules import Action, ObjectKind, classify, decide
from slatelib.ids import format_id
from tests.unit.core.gc_rules.support import OLD, P, rules_for, simple_live
from tests.unit.gc_support import ulid_at


@pytest.mark.parametrize("name", [
    "wal/17.sst", "wal/00000000000000000017.sst.tmp", "wal/sub/00000000000000000017.sst",
    "manifest/00000000000000000001.manifest.bak", "manifest/1.manifest",
    "compacted/notaulid.sst", "compacted/01m80gfcqm0py0saw13yesd6tg.sst",
    "compactions/00000000000000000001.compact", "other/x", "gc/../x",
    "compacted/01M80GFCQM0PY0SAW13YESD6TG%2Esst", "compacted/01M80GFCQM0PY0SAW13YESD6TG.SST",
    "wal/%30%30000000000000000017.sst",
])
def test_names_that_slatedb_does_not_write_are_kept(name: str) -> None:
    d = decide(rules_for(simple_live()), f"t/db/{name}", 5, OLD)
    assert d.action is Action.KEEP and d.kind in (ObjectKind.UNKNOWN, ObjectKind.BOUNDARY)
    assert "never deletes a name it does not recognise" in d.reason or name.startswith("gc/")


def test_classify_recognises_exactly_slatedb_names() -> None:
    sid = ulid_at(OLD)
    assert classify("t/db", P.compacted(sid), 1).id == sid
    assert classify("t/db", P.wal(5), 0).kind is ObjectKind.WAL_FENCE
    assert classify("t/db", f"t/db/wal/{format_id(5)}.sst", 3).kind is ObjectKind.WAL
    assert classify("t/db", "t/db-clone/wal/00000000000000000005.sst", 3).in_layout is False
    assert classify("", "wal/00000000000000000005.sst", 3).id == 5


def test_gc_files_are_named_for_what_they_are_and_always_kept() -> None:
    r = rules_for(simple_live())
    cases = {
        "t/db/gc/manifest.boundary": (ObjectKind.BOUNDARY, "GC boundary of manifest/ (SlateDB RFC-0026)"),
        "t/db/gc/compactions.boundary": (ObjectKind.BOUNDARY, "GC boundary of compactions/"),
        "t/db/gc/manifest.boundary.lock": (
            ObjectKind.BOUNDARY, "lock file of gc/manifest.boundary: serialises its conditional"),
        "t/db/gc/notes.lock": (ObjectKind.UNKNOWN, "not a boundary file or the lock file of one"),
    }
    for path, (kind, why) in cases.items():
        c = classify("t/db", path, 0)
        assert c.kind is kind and c.why.startswith(why), (path, c)
        d = decide(r, path, 0, OLD)
        assert d.action is Action.KEEP and d.reason.startswith(f"kept: {why}"), d.reason
