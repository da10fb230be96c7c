"""Key conditions as one exact key range."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slatelib.core.key_bounds import OPS, condition_range, conditions_range, prefix_end
from slatelib.errors import InvalidArgumentError


def _holds(op: str, key: bytes, k: bytes) -> bool:
    return {"=": k == key, ">": k > key, ">=": k >= key, "<": k < key, "<=": k <= key,
            "prefix": k.startswith(key)}[op]


@given(st.lists(st.tuples(st.sampled_from(OPS), st.binary(max_size=3)), max_size=4),
       st.binary(max_size=4))
def test_a_key_is_in_the_range_exactly_when_every_condition_holds(
        conds: list[tuple[str, bytes]], k: bytes) -> None:
    assert conditions_range(conds).contains(k) == all(_holds(op, key, k) for op, key in conds)


def test_prefix_end() -> None:
    assert prefix_end(b"ab") == b"ac"
    assert prefix_end(b"a\xff") == b"b"
    assert prefix_end(b"\xff\xff") is None
    assert prefix_end(b"") is None


def test_contradicting_conditions_give_an_empty_range() -> None:
    assert conditions_range([(">", b"m"), ("<", b"c")]).is_empty()


def test_unknown_operator_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="unknown key condition"):
        condition_range("!=", b"a")
