"""The one external-database path check (slatelib.core.external_dbs) shared by GC, destroy,
clone, compaction and reads."""

from __future__ import annotations

import uuid

import pytest

from slatelib.core.external_dbs import check_external_db, check_external_dbs, external_roots
from slatelib.core.manifest import ExternalDb
from slatelib.errors import CorruptObjectError
from slatelib.exit_codes import EXIT_DATA, exit_code_for
from slatelib.ids import Ulid
from tests.unit.gc_support import manifest


def ext(path: str, *sst_ids: int) -> ExternalDb:
    return ExternalDb(path, uuid.uuid4(), uuid.uuid4(), tuple(Ulid(s) for s in sst_ids))


@pytest.mark.parametrize("path, why", [
    ("../parent", "has a '..' segment"),
    ("t/./db", "has a '.' segment"),
    ("/abs/parent", "is absolute (starts with '/')"),
    ("s3://other-bucket/db", "is a URL"),
    ("file:db", "contains ':'"),
    ("a//b", "empty segment"),
    ("", "is empty"),
    ("t/db-parent/", "not canonical (SlateDB would have written 't/db-parent')"),
    ("t/d b%20", "contains '%'"),
    ("t/db\\x", "backslash"),
    ("t/db", "is this database itself"),
    ("t/db/inner", "lies inside this database"),
    ("t/db/compacted", "lies inside this database"),
])
def test_unsafe_paths_are_refused_naming_database_manifest_entry_and_path(
    path: str, why: str
) -> None:
    m = manifest(external_dbs=[ext("t/ok"), ext(path)])
    with pytest.raises(CorruptObjectError) as info:
        check_external_dbs("t/db", m, manifest_id=7)
    text = str(info.value)
    assert text.startswith(f"database 't/db', manifest 7: external_dbs[1] path {path!r} ")
    assert why in text and text.endswith("refusing to follow it")
    assert exit_code_for(info.value) == EXIT_DATA


def test_siblings_and_databases_containing_this_one_are_accepted() -> None:
    # a clone at t/db-clone of t/db, and one nested at t/db-clone/inner... of t (nesting is legal)
    m = manifest(external_dbs=[ext("t/db", 1), ext("t", 2), ext("t/db-clone-2", 3)])
    check_external_dbs("t/db-clone", m)
    assert external_roots("t/db-clone", m) == {Ulid(1): "t/db", Ulid(2): "t", Ulid(3): "t/db-clone-2"}


def test_without_a_root_or_shape_only_the_database_itself_is_not_refused() -> None:
    m = manifest(external_dbs=[ext("t/db/inner", 1)])
    assert external_roots(None, m) == {Ulid(1): "t/db/inner"}
    assert external_roots("t/db", m, shape_only=True) == {Ulid(1): "t/db/inner"}
    with pytest.raises(CorruptObjectError, match="^a database: external_dbs.0. path '../x'"):
        external_roots(None, manifest(external_dbs=[ext("../x")]))
    with pytest.raises(CorruptObjectError, match="^database 't/db': .* is absolute"):
        external_roots("t/db", manifest(external_dbs=[ext("/t/x")]), shape_only=True)


def test_a_database_at_the_store_root_contains_every_other_path() -> None:
    with pytest.raises(CorruptObjectError, match="^the database at the store root: .*inside"):
        check_external_db("", 0, ext("parent"))


