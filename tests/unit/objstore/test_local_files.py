"""A local file where a path needs a directory: PathIsFileError naming the file, for every
operation (not a retryable storage failure), and nothing created on the way."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from slatelib.errors import ObjectMissingError, PathIsFileError, StorageError
from slatelib.exit_codes import EXIT_DATA, exit_code_for
from slatelib.objstore import ObjectStore, open_raw_store, open_store
from slatelib.objstore.local_files import file_in_the_way
from slatelib.objstore.obstore_errors import is_not_a_directory, map_error


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "afile").write_bytes(b"not a directory")
    return tmp_path / "root"


OPS: dict[str, Callable[[ObjectStore, str], Any]] = {
    "list": lambda s, p: list(s.list(p)),
    "get": lambda s, p: s.get(p),
    "get_with_meta": lambda s, p: s.get_with_meta(p),
    "head": lambda s, p: s.head(p),
    "get_range": lambda s, p: s.get_range(p, 0, 4),
    "put": lambda s, p: s.put(p, b"x"),
    "put_if_absent": lambda s, p: s.put_if_absent(p, b"x"),
    "put_if_match (create)": lambda s, p: s.put_if_match(p, b"x", None),
    "put_if_match (etag)": lambda s, p: s.put_if_match(p, b"x", '"1-2-3"'),
}


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("path", ["afile/x", "afile/x/y.sst"])
@pytest.mark.parametrize("retrying", [False, True])
def test_every_operation_below_a_file_names_the_file(
    root: Path, op: str, path: str, retrying: bool
) -> None:
    store = (open_store if retrying else open_raw_store)(f"file://{root}")
    before = tree(root)
    with pytest.raises(PathIsFileError, match=r"'afile' is a file, not a directory") as info:
        OPS[op](store, path)
    assert info.value.file == "afile" and info.value.path == path
    assert isinstance(info.value, ObjectMissingError)  # nothing can exist below a file
    assert exit_code_for(info.value) == EXIT_DATA  # not 6: retrying cannot help
    assert "Generic LocalFileSystem error" not in str(info.value)
    assert tree(root) == before


def test_delete_below_a_file_is_a_no_op_like_any_missing_object(root: Path) -> None:
    store = open_raw_store(f"file://{root}")
    store.delete("afile/x")
    store.delete_many(["afile/x", "afile/y/z"])
    assert tree(root) == {"afile"}


def test_listing_the_file_itself_is_empty_as_on_s3(root: Path) -> None:
    assert list(open_raw_store(f"file://{root}").list("afile")) == []


@pytest.mark.parametrize("sub, what", [("", "is a file"), ("/deeper", "lies below")])
def test_a_store_root_that_is_a_file_is_refused_when_opened(
    root: Path, sub: str, what: str
) -> None:
    before = tree(root)
    with pytest.raises(PathIsFileError, match=f"the store root '{root}/afile{sub}' {what}"):
        open_store(f"file://{root}/afile{sub}")
    assert tree(root) == before


def test_file_in_the_way_finds_the_shortest_file_prefix(root: Path) -> None:
    assert file_in_the_way(str(root), "afile/x/y") == "afile"
    assert file_in_the_way(str(root), "afile") == "afile"
    assert file_in_the_way(str(root), "missing/x") is None
    assert file_in_the_way(str(root.parent), "root/afile/x") == "root/afile"


def test_only_not_a_directory_errors_become_path_is_file() -> None:
    assert is_not_a_directory(NotADirectoryError(20, "Not a directory"))
    assert not is_not_a_directory(PermissionError(13, "Permission denied"))
    err = map_error(NotADirectoryError(20, "Not a directory"), op="get", path="a/b", url="file:///")
    assert isinstance(err, PathIsFileError) and err.file is None
    other = map_error(PermissionError(13, "denied"), op="get", path="a/b", url="file:///")
    assert type(other) is StorageError
