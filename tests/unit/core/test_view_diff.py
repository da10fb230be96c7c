"""diff_views: applying the difference to the old view gives the new view."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from slatelib.core.view_diff import DELETE, UPSERT, diff_views

views = st.dictionaries(st.binary(min_size=1, max_size=2), st.binary(max_size=2), max_size=20)


@given(views, views)
def test_applying_the_diff_to_old_gives_new(old: dict[bytes, bytes],
                                            new: dict[bytes, bytes]) -> None:
    table = dict(old)
    changes = list(diff_views(sorted(old.items()), sorted(new.items())))
    for change, (k, v) in changes:
        if change == DELETE:
            assert k in old and k not in new
            del table[k]
        else:
            assert change == UPSERT and new[k] == v and old.get(k) != v
            table[k] = v
    assert table == new
    keys = [row[0] for _, row in changes]
    assert keys == sorted(keys)  # key order, one change per key
    assert len(set(keys)) == len(keys)


def test_unchanged_rows_are_not_emitted_but_changed_metadata_is() -> None:
    old = [(b"a", b"1", 1), (b"b", b"2", 2)]
    new = [(b"a", b"1", 1), (b"b", b"2", 3)]
    assert list(diff_views(old, new)) == [(UPSERT, (b"b", b"2", 3))]
