"""A database root that is a file (or lies below one) is "not a database root", for the
manifest and compactions stores alike; a file further down is a damaged database."""

from __future__ import annotations

from pathlib import Path

import pytest

from slatelib.core.manifest import Manifest
from slatelib.errors import (
    DataError,
    ManifestMissingError,
    NotADatabaseRootError,
    PathIsFileError,
    StorageError,
    UnavailableError,
)
from slatelib.exit_codes import EXIT_DATA, EXIT_UNAVAILABLE, exit_code_for
from slatelib.objstore import ObjectStore, open_store
from slatelib.objstore.obstore_errors import map_error
from slatelib.store.compactions_store import CompactionsStore
from slatelib.store.db_root import database_root
from slatelib.store.manifest_store import ManifestStore
from slatelib.testing.faulty import FlakyObjectStore


@pytest.fixture
def store(tmp_path: Path) -> ObjectStore:
    (tmp_path / "afile").write_bytes(b"x")
    (tmp_path / "empty").mkdir()
    return open_store(f"file://{tmp_path}")


def tree(tmp_path: Path) -> set[str]:
    return {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")}


ROOT_FILE = [
    ("afile", r"^'afile' is a file, not a database root$"),
    ("afile/db", r"^'afile/db' is not a database root: 'afile' is a file, not a directory$"),
]


@pytest.mark.parametrize("root, message", ROOT_FILE)
def test_manifest_store_refuses_a_file_root_for_every_read_and_write(
    store: ObjectStore, tmp_path: Path, root: str, message: str
) -> None:
    ms = ManifestStore(store, root)
    before = tree(tmp_path)
    for call in (ms.read_latest, ms.try_read_latest, ms.list_ids, lambda: ms.read(1),
                 lambda: ms.try_read(1), lambda: ms.write(1, Manifest.initial())):
        with pytest.raises(NotADatabaseRootError, match=message) as info:
            call()
        assert info.value.root == root and info.value.file == "afile"
        assert exit_code_for(info.value) == EXIT_DATA
    assert tree(tmp_path) == before


@pytest.mark.parametrize("root, message", ROOT_FILE)
def test_compactions_store_refuses_a_file_root_too(
    store: ObjectStore, root: str, message: str
) -> None:
    with pytest.raises(NotADatabaseRootError, match=message):
        CompactionsStore(store, root).try_read_latest()


@pytest.mark.parametrize("root", ["empty", "missing", "missing/deeper"])
def test_a_directory_without_manifest_is_not_a_database_root(
    store: ObjectStore, tmp_path: Path, root: str
) -> None:
    before = tree(tmp_path)
    with pytest.raises(NotADatabaseRootError,
                       match=f"^no manifest under '{root}': not a database root$"):
        ManifestStore(store, root).read_latest()
    assert ManifestStore(store, root).try_read_latest() is None  # a writer may create it
    assert tree(tmp_path) == before


def test_a_file_below_the_root_is_a_damaged_database_not_a_wrong_path(
    store: ObjectStore, tmp_path: Path
) -> None:
    (tmp_path / "db").mkdir()
    (tmp_path / "db" / "manifest").write_bytes(b"x")
    ms = ManifestStore(store, "db")
    assert ms.list_ids() == [] and ms.try_read(1) is None  # as on S3: no manifest below
    with pytest.raises(PathIsFileError, match="'db/manifest' is a file") as info:
        with database_root("db"):
            store.get(ms.path(1))
    assert not isinstance(info.value, ManifestMissingError)


@pytest.mark.parametrize("error", [UnavailableError, StorageError])
@pytest.mark.parametrize("root", ["empty", "missing", "db"])
def test_storage_failures_stay_storage_failures(
    store: ObjectStore, root: str, error: type[Exception]
) -> None:
    flaky = FlakyObjectStore(store)
    flaky.fail_before("list", error=lambda: error("connection reset by peer"))
    with pytest.raises(error) as info:
        ManifestStore(flaky, root).read_latest()
    assert not isinstance(info.value, DataError)
    assert exit_code_for(info.value) == EXIT_UNAVAILABLE  # retried, never "not a database"


def test_transient_obstore_errors_are_not_mistaken_for_a_file() -> None:
    import obstore.exceptions as oe

    exc = oe.GenericError("Generic S3 error: error sending request: connection reset")
    err = map_error(exc, op="list", path="db/manifest", url="s3://b")
    assert isinstance(err, UnavailableError)


@pytest.mark.parametrize("path", ["afile", "afile/db"])
def test_creating_a_database_at_a_file_is_refused_before_any_write(
    store: ObjectStore, tmp_path: Path, path: str
) -> None:
    from slatelib import Db, bulk_load, create_clone

    bulk_load("parent", store, [(b"k", b"v")])
    before = tree(tmp_path)
    with pytest.raises(NotADatabaseRootError, match="not a database root|not a directory"):
        Db.open(path, store)
    with pytest.raises(NotADatabaseRootError):
        bulk_load(path, store, [(b"k", b"v")])
    with pytest.raises(NotADatabaseRootError):
        create_clone(path, "parent", store)  # before the parent gets a checkpoint
    assert tree(tmp_path) == before
