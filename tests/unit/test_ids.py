"""ULID text: the fast formatter and parser against the per-digit definition (Crockford)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slatelib.errors import InvalidArgumentError
from slatelib.ids import CROCKFORD, ULID_MAX, ulid_from_str, ulid_to_str

_ULIDS = st.one_of(st.integers(0, ULID_MAX), st.sampled_from([0, 1, 31, 32, 1 << 70, ULID_MAX]))
_TEXT = st.text(CROCKFORD + CROCKFORD.lower() + "ILOUilou_ +-0", min_size=26, max_size=26)


def _reference_str(value: int) -> str:
    return "".join(CROCKFORD[(value >> (5 * i)) & 31] for i in reversed(range(26)))


def _reference_parse(text: str) -> int | None:
    digits = {c: i for i, c in enumerate(CROCKFORD)} | {c.lower(): i for i, c in enumerate(CROCKFORD)}
    v = 0
    for c in text:
        if c not in digits:
            return None
        v = (v << 5) | digits[c]
    return v if v <= ULID_MAX else None


@given(_ULIDS)
def test_ulid_text_is_26_crockford_digits_and_parses_back(value: int) -> None:
    text = ulid_to_str(value)
    assert text == _reference_str(value)
    assert ulid_from_str(text) == ulid_from_str(text.lower()) == value


@given(_TEXT)
def test_ulid_parser_accepts_exactly_the_crockford_digits(text: str) -> None:
    expected = _reference_parse(text)
    if expected is None:
        with pytest.raises(InvalidArgumentError, match="not a ULID"):
            ulid_from_str(text)
    else:
        assert ulid_from_str(text) == expected


@pytest.mark.parametrize("value", [-1, ULID_MAX + 1])
def test_out_of_range_ulids_are_refused(value: int) -> None:
    with pytest.raises(InvalidArgumentError):
        ulid_to_str(value)


def test_ulid_parse_errors_name_the_problem() -> None:
    with pytest.raises(InvalidArgumentError, match="bad character 'U'"):
        ulid_from_str("0" * 25 + "U")
    with pytest.raises(InvalidArgumentError, match="overflow"):
        ulid_from_str("8" + "0" * 25)
    with pytest.raises(InvalidArgumentError, match="length 3"):
        ulid_from_str("000")
