"""Object-path rules: what check_path/check_prefix accept, and that accepted paths
round-trip exactly (written spelling == listed spelling) on memory and local stores."""

from __future__ import annotations

import string
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slatelib.errors import InvalidArgumentError
from slatelib.objstore import (
    FORBIDDEN_PATH_CHARS,
    ObjectStore,
    check_path,
    check_prefix,
    open_raw_store,
)

ACCEPTED = [
    "a",
    "a/b/c",
    "db/manifest/00000000000000000001.manifest",
    "db/compacted/01M80GFD6SP0G0WV2BZ9T18VEJ.sst",
    "a b/c d",  # spaces
    "x+y/p=q,r;s@u$v&w!x'(y)",  # characters object_store leaves alone
    "..x/x../.hidden/x.",  # dots inside segments are fine
    "tenant-1/db_2/x-y.z",
]

REJECTED = [
    ("", "empty"),
    ("/a", "start or end"),
    ("a/", "start or end"),
    ("a//b", "empty segment"),
    ("a/./b", "'.'"),
    ("a/../b", "'..'"),
    ("..", "'..'"),
    ("../etc/passwd", "'..'"),
    ("a\\b", "backslash"),
    ("a\nb", "control"),
    ("a\x00b", "control"),
    ("a\x7fb", "control"),
    ("caf\u00e9", "printable ASCII"),
    ("emoji\U0001f600", "printable ASCII"),
    ("nbsp\u00a0x", "printable ASCII"),
    ("p%20q", "printable ASCII"),
    ("x#1", "printable ASCII"),
    ("pipe|x", "printable ASCII"),
    ("t~x", "printable ASCII"),
    ("q?x", "printable ASCII"),
    ("star*", "printable ASCII"),
    ("db/A:", "printable ASCII"),  # the local file system cannot write it
    ("2024-01-01T00:00:00", "printable ASCII"),
    ("a" * 256, "segment longer"),
    ("/".join(["abcdefgh"] * 120), "longer than 1024"),
]


@pytest.mark.parametrize("path", ACCEPTED)
def test_check_path_accepts_and_returns_path_unchanged(path: str) -> None:
    assert check_path(path) == path


@pytest.mark.parametrize(("path", "reason"), REJECTED)
def test_check_path_rejects_with_clear_message(path: str, reason: str) -> None:
    with pytest.raises(InvalidArgumentError, match="path") as info:
        check_path(path)
    assert reason in str(info.value)


@pytest.mark.parametrize("ch", sorted(FORBIDDEN_PATH_CHARS))
def test_every_forbidden_character_is_rejected_in_paths_and_prefixes(ch: str) -> None:
    with pytest.raises(InvalidArgumentError):
        check_path(f"db/a{ch}b")
    with pytest.raises(InvalidArgumentError):
        check_prefix(f"db/a{ch}b")


def test_forbidden_set_is_object_store_percent_encode_set_plus_colon() -> None:
    # Rust object_store's PathPart INVALID set, minus '/' (the delimiter) and controls,
    # plus ':' (obstore's LocalStore fails on a last segment like "A:").
    assert FORBIDDEN_PATH_CHARS == set('\\{^}%`]">[~<#|*?:')


def test_check_path_names_the_argument() -> None:
    with pytest.raises(InvalidArgumentError, match="^start_after"):
        check_path("a//b", what="start_after")


def test_check_path_rejects_non_strings() -> None:
    with pytest.raises(InvalidArgumentError):
        check_path(b"a/b")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("prefix", "expected"), [("", ""), ("/", ""), ("db", "db"), ("db/", "db"), ("/a/b/", "a/b")]
)
def test_check_prefix_strips_slashes(prefix: str, expected: str) -> None:
    assert check_prefix(prefix) == expected


@pytest.mark.parametrize("prefix", ["a//b", "a/../b", "a/./b", "x#", "caf\u00e9"])
def test_check_prefix_rejects_bad_prefixes(prefix: str) -> None:
    with pytest.raises(InvalidArgumentError):
        check_prefix(prefix)


_SEGMENT_CHARS = "".join(
    ch for ch in string.printable if " " <= ch <= "~" and ch not in FORBIDDEN_PATH_CHARS
).replace("/", "")
_segments = st.text(alphabet=_SEGMENT_CHARS, min_size=1, max_size=12).filter(
    lambda s: s not in (".", "..")
)
_paths = st.lists(_segments, min_size=1, max_size=4).map("/".join)


@pytest.fixture(scope="module")
def roundtrip_stores(tmp_path_factory: pytest.TempPathFactory) -> list[ObjectStore]:
    root: Path = tmp_path_factory.mktemp("roundtrip")
    return [open_raw_store(f"memory://rt{uuid.uuid4().hex[:8]}/"), open_raw_store(f"file://{root}")]


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(path=_paths)
def test_accepted_paths_round_trip_exactly_through_list_and_head(
    roundtrip_stores: list[ObjectStore], path: str
) -> None:
    assert check_path(path) == path
    for store in roundtrip_stores:
        prefix = f"p{uuid.uuid4().hex[:8]}"
        full = f"{prefix}/{path}"
        store.put(full, full.encode())
        assert [m.path for m in store.list(prefix)] == [full]
        assert store.head(full).path == full
        assert store.get(full) == full.encode()
        store.delete(full)
