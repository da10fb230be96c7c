"""The backend of each scheme (slatelib/objstore/backends.py): file, memory and S3 stores and
their options, below the environment and ``[object_store]``."""

from __future__ import annotations

from pathlib import Path

import pytest

from slatelib.errors import InvalidArgumentError, PathIsFileError
from slatelib.objstore import StoreSpec, open_raw_store, reset_memory_stores, split_db_url
from slatelib.objstore.backends import resolve_s3_options


def test_file_url_roots_store_in_directory_and_creates_it(tmp_path: Path) -> None:
    root = tmp_path / "new" / "deep"
    store = open_raw_store(f"file://{root}")
    assert root.is_dir()
    store.put("x/y", b"1")
    assert (root / "x" / "y").read_bytes() == b"1"
    assert store.url == f"file://{root}"


def test_file_root_url_is_the_file_system_root(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"abc")
    root_url, db_path = split_db_url(f"file://{tmp_path}/f")
    assert open_raw_store(root_url).get(db_path) == b"abc"


def test_file_root_that_is_a_file_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "afile").write_bytes(b"")
    # A data error (exit code 5), not a storage failure that a retry policy would retry.
    with pytest.raises(PathIsFileError, match="store root '.*/afile' is a file, not a directory"):
        open_raw_store(f"file://{tmp_path}/afile")


def test_file_and_memory_stores_take_no_options(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="no options"):
        open_raw_store(f"file://{tmp_path}", endpoint="x")
    with pytest.raises(InvalidArgumentError, match="no options"):
        open_raw_store("memory:///", region="x")


def test_memory_url_is_process_wide_and_resettable() -> None:
    open_raw_store("memory:///").put("x/db/a", b"1")
    assert open_raw_store("memory:///").get("x/db/a") == b"1"
    assert open_raw_store("memory:///x").get("db/a") == b"1"  # rooted view of the same store
    assert [m.path for m in open_raw_store("memory:///x").list("")] == ["db/a"]
    assert list(open_raw_store("memory://other/").list("")) == []
    reset_memory_stores()
    assert list(open_raw_store("memory:///").list("")) == []


def test_named_memory_stores_are_separate() -> None:
    open_raw_store("memory://a/").put("k", b"a")
    open_raw_store("memory://b").put("k", b"b")
    assert open_raw_store("memory://a").get("k") == b"a"
    assert open_raw_store("memory://b/").get("k") == b"b"


def test_s3_store_spec_keeps_only_explicit_options() -> None:
    store = open_raw_store("s3://bucket/pre", region="eu-west-1", allow_http=True)
    assert store.spec == StoreSpec.of(
        "s3://bucket/pre", {"region": "eu-west-1", "allow_http": "true"}
    )
    assert store.url == "s3://bucket/pre"


def test_s3_unknown_option_is_invalid_argument_naming_it() -> None:
    with pytest.raises(InvalidArgumentError, match="bogus_option"):
        open_raw_store("s3://bucket", bogus_option="1")
    with pytest.raises(InvalidArgumentError, match="allow_http"):
        open_raw_store("s3://bucket", allow_http="maybe")
    with pytest.raises(InvalidArgumentError, match="max_retries"):
        open_raw_store("s3://bucket", max_retries="-1")


def test_resolve_s3_options_precedence() -> None:
    env = {
        "SLATELIB_S3_ENDPOINT": "http://slatelib:1",
        "AWS_ENDPOINT_URL": "http://aws:2",
        "AWS_REGION": "aws-region",
        "AWS_DEFAULT_REGION": "default-region",
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "aws-key",
        "AWS_SECRET_ACCESS_KEY": "aws-secret",
    }
    config, creds = resolve_s3_options({"region": "opt-region"}, env)
    assert config == {"region": "opt-region", "endpoint": "http://slatelib:1", "allow_http": "true"}
    assert creds is None  # AWS_* credentials are left to obstore's own chain
    env2 = {"AWS_ENDPOINT_URL_S3": "http://s3:3", "AWS_ENDPOINT_URL": "http://aws:2"}
    assert resolve_s3_options({}, env2)[0] == {"endpoint": "http://s3:3"}
    assert resolve_s3_options({}, {"AWS_DEFAULT_REGION": "d"})[0] == {"region": "d"}


def test_resolve_s3_credentials_come_as_a_group() -> None:
    env = {
        "SLATELIB_S3_ACCESS_KEY_ID": "k",
        "SLATELIB_S3_SECRET_ACCESS_KEY": "s",
        "SLATELIB_S3_SESSION_TOKEN": "t",
        "AWS_SESSION_TOKEN": "aws-token",
    }
    assert resolve_s3_options({}, env)[1] == ("k", "s", "t")
    opts = {"access_key_id": "ok", "secret_access_key": "os"}
    config, creds = resolve_s3_options(opts, env)
    assert creds == ("ok", "os", None)  # no token mixed in from another source
    assert "access_key_id" not in config
    with pytest.raises(InvalidArgumentError, match="together"):
        resolve_s3_options({"access_key_id": "only"}, {})


def test_open_store_reads_slatelib_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLATELIB_S3_ALLOW_HTTP", "not-a-bool")
    with pytest.raises(InvalidArgumentError, match="allow_http"):
        open_raw_store("s3://bucket")


def test_http_endpoint_infers_allow_http() -> None:
    from slatelib.objstore.backends import check_s3_config, s3_option_sources

    env = {"SLATELIB_S3_ENDPOINT": "http://localhost:9000"}
    config, _ = resolve_s3_options({}, env)
    assert check_s3_config(config, s3_option_sources({}, env)) == {
        "endpoint": "http://localhost:9000", "allow_http": "true"}
    https = {"endpoint": "https://s3.example.com"}
    assert check_s3_config(https, {}) == https
    both = {"SLATELIB_S3_ENDPOINT": "http://h:1", "AWS_ALLOW_HTTP": "true"}
    assert check_s3_config(resolve_s3_options({}, both)[0], s3_option_sources({}, both)) == {
        "endpoint": "http://h:1", "allow_http": "true"}


@pytest.mark.parametrize("env, options, message", [
    ({"SLATELIB_S3_ENDPOINT": "http://h:9000", "SLATELIB_S3_ALLOW_HTTP": "false"}, {},
     "SLATELIB_S3_ENDPOINT .* is plain HTTP but SLATELIB_S3_ALLOW_HTTP .* is 'false'"),
    ({}, {"endpoint": "http://h:9000", "allow_http": False},
     "store option 'endpoint' .* plain HTTP but store option 'allow_http'"),
    ({"SLATELIB_S3_ENDPOINT": "htp//bad"}, {}, "SLATELIB_S3_ENDPOINT .* not an endpoint URL"),
    ({"AWS_ENDPOINT_URL": "ftp://h"}, {}, "AWS_ENDPOINT_URL .* not an endpoint URL"),
    ({"SLATELIB_S3_ENDPOINT": "http://h:notaport"}, {}, "not an endpoint URL"),
    ({"SLATELIB_S3_ENDPOINT": "http://"}, {}, "not an endpoint URL"),
    ({}, {"endpoint": "localhost:9000"}, "store option 'endpoint' .* not an endpoint URL"),
    ({"SLATELIB_S3_ALLOW_HTTP": "maybe"}, {}, "SLATELIB_S3_ALLOW_HTTP .* true or false"),
])
def test_s3_misconfiguration_is_refused_naming_the_variable(
    env: dict[str, str], options: dict[str, object], message: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("SLATELIB_S3_ENDPOINT", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL",
                 "AWS_ENDPOINT", "SLATELIB_S3_ALLOW_HTTP", "AWS_ALLOW_HTTP"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(InvalidArgumentError, match=message):
        open_raw_store("s3://bucket", **options)  # type: ignore[arg-type]


def test_s3_store_opens_with_an_http_endpoint_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLATELIB_S3_ENDPOINT", "http://localhost:9000")
    monkeypatch.delenv("SLATELIB_S3_ALLOW_HTTP", raising=False)
    monkeypatch.delenv("AWS_ALLOW_HTTP", raising=False)
    assert open_raw_store("s3://bucket/db").url == "s3://bucket/db"


def test_s3_reader_warns_about_misspelled_s3_variables(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from slatelib import config

    monkeypatch.setattr(config, "_warned_env", set())
    monkeypatch.setenv("SLATELIB_S3_ENDPIONT", "http://localhost:9000")
    with caplog.at_level("WARNING", logger="slatelib.config"):
        open_raw_store("s3://bucket")
    assert [r.getMessage() for r in caplog.records] == [
        "unknown environment variable SLATELIB_S3_ENDPIONT (did you mean "
        "SLATELIB_S3_ENDPOINT?): ignored"]


def test_object_store_settings_sit_below_the_environment() -> None:
    from slatelib.config import ObjectStoreSettings
    from slatelib.objstore.backends import apply_conf_defaults, check_s3_config, s3_option_sources
    from slatelib.objstore.registry import conf_store_defaults

    conf = ObjectStoreSettings(endpoint="http://conf:9000", region="conf-region",
                               virtual_hosted_style_request=False, azure_account_name="acct",
                               gcs_base_url="http://gcs:4443")
    defaults = conf_store_defaults(conf)
    assert defaults["s3"] == {"endpoint": "http://conf:9000", "region": "conf-region",
                              "virtual_hosted_style_request": "false"}
    assert defaults["az"] == {"endpoint": "http://conf:9000", "account_name": "acct"}
    assert defaults["gs"] == {"base_url": "http://gcs:4443"}
    env = {"AWS_REGION": "env-region"}
    config, _ = resolve_s3_options({}, env, defaults["s3"])
    sources = s3_option_sources({}, env, defaults["s3"])
    assert check_s3_config(config, sources) == {
        "endpoint": "http://conf:9000", "region": "env-region",
        "virtual_hosted_style_request": "false", "allow_http": "true"}
    assert sources["endpoint"] == "[object_store] endpoint"
    assert sources["region"] == "AWS_REGION"
    # explicit options beat both
    assert resolve_s3_options({"endpoint": "https://opt"}, env, defaults["s3"])[0][
        "endpoint"] == "https://opt"
    # gs/az: a default applies only when its environment variables are unset
    assert apply_conf_defaults("az", {}, defaults["az"],
                               {"AZURE_STORAGE_ACCOUNT_NAME": "env"}) == {
        "endpoint": "http://conf:9000"}
    # an http:// endpoint with allow_http false in conf is refused, naming the setting
    bad = conf_store_defaults(ObjectStoreSettings(endpoint="http://h:1", allow_http=False))
    with pytest.raises(InvalidArgumentError, match=r"\[object_store\] allow_http"):
        check_s3_config(resolve_s3_options({}, {}, bad["s3"])[0],
                        s3_option_sources({}, {}, bad["s3"]))


def test_the_http_client_retries_are_settings_of_every_cloud_scheme() -> None:
    """A store that does not answer fails in ``max_retries`` tries within ``retry_timeout``
    (obstore retries that long before slatelib's own ``[retry]`` attempts)."""
    from slatelib.config import ObjectStoreSettings, load_settings
    from slatelib.objstore.backends import _split_client_options
    from slatelib.objstore.registry import conf_store_defaults

    conf = ObjectStoreSettings(max_retries=1, retry_timeout=5.0)
    for scheme in ("s3", "gs", "az"):
        assert conf_store_defaults(conf)[scheme] == {"max_retries": "1",
                                                     "retry_timeout_s": "5.0"}
    client, retry = _split_client_options({"max_retries": "1", "retry_timeout_s": "5.0"})
    assert client == {} and retry["max_retries"] == 1
    assert retry["retry_timeout"].total_seconds() == 5.0
    assert conf_store_defaults(ObjectStoreSettings()) == {}
    parsed = load_settings([], env={"SLATELIB_OBJECT_STORE__RETRY_TIMEOUT": "2min",
                                    "SLATELIB_OBJECT_STORE__MAX_RETRIES": "3"})
    assert (parsed.object_store.retry_timeout, parsed.object_store.max_retries) == (120.0, 3)


def test_s3_access_for_other_clients_follows_the_stores_precedence() -> None:
    from slatelib.objstore.backends import resolve_s3_access

    env = {"SLATELIB_S3_ENDPOINT": "http://127.0.0.1:9000", "AWS_REGION": "eu-west-1",
           "SLATELIB_S3_ACCESS_KEY_ID": "slate", "SLATELIB_S3_SECRET_ACCESS_KEY": "s1",
           "AWS_ACCESS_KEY_ID": "aws", "AWS_SECRET_ACCESS_KEY": "s2"}
    got = resolve_s3_access({}, env, {"region": "us-west-2", "virtual_hosted_style_request": "true"})
    assert (got.endpoint, got.region, got.allow_http, got.virtual_hosted_style) == (
        "http://127.0.0.1:9000", "eu-west-1", True, True)
    assert (got.access_key_id, got.secret_access_key, got.credentials_from) == (
        "slate", "s1", "SLATELIB_S3_*")
    aws_only = {k: v for k, v in env.items() if not k.startswith("SLATELIB_S3_ACCESS")
                and not k.startswith("SLATELIB_S3_SECRET")}
    got = resolve_s3_access({}, {**aws_only, "AWS_SESSION_TOKEN": "t"})
    assert (got.access_key_id, got.session_token, got.credentials_from) == ("aws", "t", "AWS_*")
    assert got.virtual_hosted_style is None
    got = resolve_s3_access({"access_key_id": "o", "secret_access_key": "p"}, env)
    assert (got.access_key_id, got.credentials_from) == ("o", "store options")
    none = resolve_s3_access({}, {})
    assert (none.endpoint, none.access_key_id, none.credentials_from) == (None, None, "")
    with pytest.raises(InvalidArgumentError, match="AWS_SECRET_ACCESS_KEY"):
        resolve_s3_access({}, {"AWS_ACCESS_KEY_ID": "half"})
    with pytest.raises(InvalidArgumentError, match="SLATELIB_S3_ENDPOINT"):
        resolve_s3_access({}, {"SLATELIB_S3_ENDPOINT": "localhost:9000"})
