"""StoreSpec (slatelib/objstore/spec.py): canonical options, secrets hidden."""

from __future__ import annotations

import pytest

from slatelib.errors import InvalidArgumentError
from slatelib.objstore import StoreSpec


def test_spec_canonicalizes_options_and_hides_secrets() -> None:
    spec = StoreSpec.of(
        "s3://b", {"secret_access_key": "SHH", "allow_http": True, "region": "r", "max_retries": 3}
    )
    assert spec.options == (
        ("allow_http", "true"),
        ("max_retries", "3"),
        ("region", "r"),
        ("secret_access_key", "SHH"),
    )
    assert "SHH" not in repr(spec) and "***" in repr(spec)
    assert hash(spec) == hash(StoreSpec.of("s3://b", dict(spec.options)))


def test_spec_rejects_bad_option_values() -> None:
    with pytest.raises(InvalidArgumentError):
        StoreSpec.of("s3://b", {"region": ["x"]})  # type: ignore[dict-item]
    with pytest.raises(InvalidArgumentError):
        StoreSpec.of("", {})
