"""``slate config show``: effective settings and store options, secrets redacted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slatelib.cli.app import EXIT_OK, EXIT_USAGE, main


def slate(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SLATELIB_S3_ENDPOINT", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL",
                 "AWS_ENDPOINT", "SLATELIB_S3_ALLOW_HTTP", "AWS_ALLOW_HTTP",
                 "SLATELIB_S3_ACCESS_KEY_ID", "SLATELIB_S3_SECRET_ACCESS_KEY",
                 "SLATELIB_S3_SESSION_TOKEN", "SLATELIB_S3_REGION", "AWS_REGION",
                 "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)


def test_json_shows_files_then_env_and_redacts_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "a.toml"
    conf.write_text('[gc]\nmin_age = "10min"\n[writer]\nl0_max_ssts = 3\n')
    monkeypatch.setenv("SLATELIB_WRITER__L0_MAX_SSTS", "5")
    monkeypatch.setenv("SLATELIB_S3_ENDPOINT", "http://localhost:9000")
    monkeypatch.setenv("SLATELIB_S3_ACCESS_KEY_ID", "AKID")
    monkeypatch.setenv("SLATELIB_S3_SECRET_ACCESS_KEY", "very-secret")
    monkeypatch.setenv("SLATELIB_S3_SESSION_TOKEN", "tok-secret")
    code, out, _ = slate(["config", "show", "--format", "json", "--conf", str(conf),
                          "--db", "s3://bkt/a/db"], capsys)
    assert code == EXIT_OK
    assert "very-secret" not in out and "tok-secret" not in out
    got = json.loads(out)
    assert got["conf_files"] == [str(conf)]
    assert got["settings"]["gc"]["min_age"] == 600.0
    assert got["settings"]["writer"]["l0_max_ssts"] == 5
    store = got["store"]
    assert (store["url"], store["scheme"], store["path"]) == ("s3://bkt", "s3", "a/db")
    assert store["options"] == {
        "endpoint": {"value": "http://localhost:9000", "from": "SLATELIB_S3_ENDPOINT"},
        "allow_http": {"value": "true", "from": "inferred from the http:// endpoint"},
    }
    assert store["credentials"] == {"from": "SLATELIB_S3_*", "access_key_id": "AKID",
                                    "secret_access_key": "***", "session_token": "***"}


def test_toml_is_the_default_and_has_no_store_without_db(
    capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = slate(["config", "show"], capsys)
    assert code == EXIT_OK
    assert "[settings.gc]\n" in out and "dry_run = true\n" in out and "[store]" not in out
    assert 'default_ttl_millis = "null"\n' in out  # loadable: optional settings take "null"


def test_other_stores_redact_their_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_KEY", "k-secret")
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_NAME", "acct")
    code, out, _ = slate(["config", "show", "--db", "az://c/db"], capsys)
    assert code == EXIT_OK and "k-secret" not in out
    assert 'AZURE_STORAGE_ACCOUNT_KEY = "***"' in out and 'AZURE_STORAGE_ACCOUNT_NAME = "acct"' in out


def test_misconfigured_store_is_shown_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SLATELIB_S3_ENDPOINT", "http://localhost:9000")
    monkeypatch.setenv("SLATELIB_S3_ALLOW_HTTP", "false")
    code, out, _ = slate(["config", "show", "--format", "json", "--db", "s3://b/db"], capsys)
    assert code == EXIT_USAGE
    assert "SLATELIB_S3_ALLOW_HTTP" in json.loads(out)["store"]["error"]


def test_store_misconfiguration_exits_2_from_any_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SLATELIB_S3_ENDPOINT", "localhost:9000")
    code, _, err = slate(["summary", "--db", "s3://b/db"], capsys)
    assert code == EXIT_USAGE
    assert "SLATELIB_S3_ENDPOINT" in err and "not an endpoint URL" in err


def test_object_store_settings_show_with_their_source_and_env_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from slatelib.objstore.registry import set_store_defaults

    conf = tmp_path / "dev.toml"
    conf.write_text('[object_store]\nendpoint = "http://127.0.0.1:9000"\nregion = "r1"\n')
    env_file = tmp_path / "s3.env"
    env_file.write_text("SLATELIB_S3_REGION=r-env\nSLATELIB_S3_SECRET_ACCESS_KEY=shh\n"
                        "SLATELIB_S3_ACCESS_KEY_ID=AKID\n")
    monkeypatch.setenv("SLATELIB_OBJECT_STORE__TIMEOUT", "30s")
    try:
        code, out, _ = slate(["config", "show", "--format", "json", "--db", "s3://b/db",
                              "--conf", str(conf), "--env-file", str(env_file)], capsys)
    finally:
        set_store_defaults(None)
        for name in ("SLATELIB_S3_SECRET_ACCESS_KEY", "SLATELIB_S3_ACCESS_KEY_ID",
                     "SLATELIB_S3_REGION"):
            monkeypatch.delenv(name, raising=False)  # set by the env file
    assert code == EXIT_OK
    assert "shh" not in out
    got = json.loads(out)
    assert got["env_files"] == [str(env_file)]
    assert got["object_store"] == {
        "endpoint": {"value": "http://127.0.0.1:9000", "from": str(conf)},
        "region": {"value": "r1", "from": str(conf)},
        "timeout": {"value": "30s", "from": "SLATELIB_OBJECT_STORE__TIMEOUT"},
    }
    options = got["store"]["options"]
    assert options["endpoint"] == {"value": "http://127.0.0.1:9000",
                                   "from": "[object_store] endpoint"}
    assert options["region"] == {"value": "r-env", "from": "SLATELIB_S3_REGION"}  # env wins
    assert options["allow_http"]["value"] == "true"
    assert got["store"]["credentials"]["secret_access_key"] == "***"
