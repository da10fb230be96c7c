"""The store registry (slatelib/objstore/registry.py): a spec reopens its store, with the
``[object_store]`` defaults it was opened with."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from slatelib.objstore import open_raw_store


def test_spec_is_picklable_and_reopens_the_same_store(tmp_path: Path) -> None:
    store = open_raw_store(f"file://{tmp_path}/r")
    store.put("k", b"v")
    spec = pickle.loads(pickle.dumps(store.spec))
    assert spec == store.spec
    assert spec.open().get("k") == b"v"
    memory = open_raw_store("memory://spec/")
    memory.put("k", b"m")
    assert pickle.loads(pickle.dumps(memory.spec)).open().get("k") == b"m"


def test_registered_store_defaults_travel_in_the_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    from slatelib.config import ObjectStoreSettings
    from slatelib.objstore.registry import set_store_defaults, store_defaults

    for name in ("SLATELIB_S3_ENDPOINT", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL",
                 "AWS_ENDPOINT", "SLATELIB_S3_REGION", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    set_store_defaults(ObjectStoreSettings(endpoint="http://127.0.0.1:9", region="r"))
    try:
        assert store_defaults("s3") == {"endpoint": "http://127.0.0.1:9", "region": "r"}
        store = open_raw_store("s3://bkt/pre")
        spec = store.spec
        assert spec.options == ()
        assert dict(spec.defaults) == {"endpoint": "http://127.0.0.1:9", "region": "r"}
        again = pickle.loads(pickle.dumps(spec))
        set_store_defaults(None)
        assert store_defaults("s3") == {}
        assert again.open().spec == spec  # an executor uses the spec's defaults
        assert open_raw_store("file:///tmp").spec.defaults == ()
    finally:
        set_store_defaults(None)


def test_every_scheme_of_a_url_has_a_backend_and_a_spec_opens_through_the_registry() -> None:
    from slatelib.objstore import spec as spec_module
    from slatelib.objstore.registry import BACKENDS, open_spec
    from slatelib.objstore.url import SCHEMES

    assert set(BACKENDS) == set(SCHEMES)
    assert spec_module._opener is open_spec  # registered by importing slatelib.objstore
