"""Settings: defaults, TOML layering, environment overrides, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from slatelib.config import known_env_names, load_settings, parse_duration, parse_size
from slatelib.errors import InvalidArgumentError


def test_humantime_durations() -> None:
    assert parse_duration("7days 30min 10s") == 7 * 86400 + 1800 + 10
    assert parse_duration("100ms") == pytest.approx(0.1)
    assert parse_duration("1h 2m") == 3720
    assert parse_duration("2M") == 2 * 2630016.0  # months, as humantime
    for bad in ("", "5 parsecs", "abc", "-3s", "5MS", "5Min", "1H", "\u0661\u0662s"):
        with pytest.raises(InvalidArgumentError):
            parse_duration(bad)


def test_sizes() -> None:
    assert parse_size("64MiB") == 64 << 20
    assert parse_size(4096) == 4096
    with pytest.raises(InvalidArgumentError):
        parse_size("lots")


def test_files_then_env_layering(tmp_path: Path) -> None:
    base = tmp_path / "base.toml"
    base.write_text('[writer]\nflush_interval = "10ms"\nl0_max_ssts = 4\n[sst]\nblock_size = "1KiB"\n')
    over = tmp_path / "over.toml"
    over.write_text("[writer]\nl0_max_ssts = 6\n")
    s = load_settings([base, over], env={"SLATELIB_WRITER__FLUSH_INTERVAL": "null"})
    assert s.writer.flush_interval is None
    assert s.writer.l0_max_ssts == 6
    assert s.sst.block_size == 1024


def test_unknown_keys_name_the_file(tmp_path: Path) -> None:
    f = tmp_path / "bad.toml"
    f.write_text("[writer]\nflush_intervall = '1s'\n")
    with pytest.raises(InvalidArgumentError, match="bad.toml.*flush_intervall"):
        load_settings(f, env={})
    with pytest.raises(InvalidArgumentError, match="nosuch"):
        load_settings(env={"SLATELIB_NOSUCH__X": "1"})


def test_base_toml_mirrors_the_code_defaults() -> None:
    from slatelib.config import Settings

    base = Path(__file__).resolve().parents[2] / "conf" / "base.toml"
    assert load_settings(base, env={}) == Settings()


def test_unknown_env_settings_name_the_closest_variable() -> None:
    with pytest.raises(InvalidArgumentError, match="SLATELIB_COMPACTON__POLICY.*did you mean "
                                                   "SLATELIB_COMPACTION__POLICY"):
        load_settings(env={"SLATELIB_COMPACTON__POLICY": "l0"})


def test_other_unknown_slatelib_variables_warn_once_each(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from slatelib import config

    monkeypatch.setattr(config, "_warned_env", set())
    env = {"SLATELIB_S3_ENDPIONT": "http://x", "SLATELIB_NO_NATIVE": "1",
           "SLATELIB_S3_REGION": "r", "SLATELIB_S3__X": "1", "OTHER": "1"}
    with caplog.at_level("WARNING", logger="slatelib.config"):
        load_settings(env=env)
        load_settings(env=env)  # once per process, not per load
        assert config.warn_unknown_env(env) == []
    texts = [r.getMessage() for r in caplog.records]
    assert texts == [
        "unknown environment variable SLATELIB_S3_ENDPIONT (did you mean "
        "SLATELIB_S3_ENDPOINT?): ignored",
        "unknown environment variable SLATELIB_S3__X (did you mean SLATELIB_S3_REGION?): "
        "ignored",
    ]
    assert config.closest_env_name("SLATELIB_ZZZZZZZZZZZZZZZZZZZZZZZZZZZZ") is None


@pytest.mark.parametrize("overlay", ["dev.toml", "prod.toml"])
def test_example_overlays_load(overlay: str) -> None:
    from slatelib.config import Settings

    conf = Path(__file__).resolve().parents[2] / "conf"
    s = load_settings([conf / "base.toml", conf / overlay], env={})
    assert s != Settings()
    assert s.gc.dry_run is True  # neither overlay turns deletion on by default
    assert s.spark.log_level == "WARN"


def test_object_store_and_spark_sections(tmp_path: Path) -> None:
    f = tmp_path / "s.toml"
    f.write_text('[object_store]\nendpoint = "http://h:9000"\nallow_http = true\n'
                 '[spark]\nmaster = "local[3]"\n[spark.conf]\n"spark.x" = 4\n"spark.y" = true\n')
    s = load_settings(f, env={"SLATELIB_OBJECT_STORE__REGION": "eu-west-1"})
    assert (s.object_store.endpoint, s.object_store.allow_http) == ("http://h:9000", True)
    assert s.object_store.region == "eu-west-1"
    assert s.object_store.virtual_hosted_style_request is None
    assert s.spark.master == "local[3]"
    assert s.spark.conf_dict() == {"spark.x": "4", "spark.y": "true"}
    s = load_settings(env={"SLATELIB_SPARK__CONF": '{"spark.a": "b"}'})
    assert s.spark.conf == (("spark.a", "b"),)
    with pytest.raises(InvalidArgumentError, match="spark.conf"):
        load_settings(env={"SLATELIB_SPARK__CONF": "spark.a=b"})
    bad = tmp_path / "bad.toml"
    bad.write_text('[object_store]\nsecret_access_key = "x"\n')
    with pytest.raises(InvalidArgumentError, match="secret_access_key"):
        load_settings(bad, env={})


def test_env_file_parsing_and_precedence(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from slatelib.config import load_env_files, parse_env_file

    f = tmp_path / "a.env"
    f.write_text("# comment\n\nexport SLATELIB_S3_ENDPOINT=http://h:1  # trailing\n"
                 "SLATELIB_S3_REGION='us-east-1'\nAWS_SECRET_ACCESS_KEY=\"a\\\"b#c\"\n"
                 "PATH=/evil\nSLATELIB_S3_ACCESS_KEY_ID = keep\n")
    assert parse_env_file(f) == {
        "SLATELIB_S3_ENDPOINT": "http://h:1", "SLATELIB_S3_REGION": "us-east-1",
        "AWS_SECRET_ACCESS_KEY": 'a"b#c', "PATH": "/evil", "SLATELIB_S3_ACCESS_KEY_ID": "keep"}
    g = tmp_path / "b.env"
    g.write_text("SLATELIB_S3_REGION=eu-west-1\n")
    env = {"SLATELIB_S3_ACCESS_KEY_ID": "from-env"}
    with caplog.at_level("WARNING", logger="slatelib.config"):
        loaded = load_env_files([f, g], env)
    assert env["SLATELIB_S3_ACCESS_KEY_ID"] == "from-env"  # the environment wins
    assert env["SLATELIB_S3_REGION"] == "eu-west-1"  # a later file wins over an earlier one
    assert "PATH" not in env and "PATH ignored" in caplog.text
    assert set(loaded) == {"SLATELIB_S3_ENDPOINT", "SLATELIB_S3_REGION", "AWS_SECRET_ACCESS_KEY"}
    bad = tmp_path / "bad.env"
    bad.write_text("OK=1\nthis is not a line\n")
    with pytest.raises(InvalidArgumentError, match="bad.env, line 2"):
        parse_env_file(bad)
    with pytest.raises(InvalidArgumentError, match="cannot read env file"):
        parse_env_file(tmp_path / "missing.env")


def test_gc_directory_tables_take_0_17s_names(tmp_path: Path) -> None:
    """An official ``[garbage_collector_options.*]`` block carried over as ``[gc.*]``."""
    f = tmp_path / "gc.toml"
    f.write_text('[gc]\nboundary_files_enabled = false\n'
                 '[gc.manifest_options]\ninterval = "300s"\nmin_age = "86400s"\n'
                 '[gc.wal_options]\ninterval = "60s"\nmin_age = "60s"\ndry_run = true\n'
                 '[gc.wal_fence_options]\nmin_age = "30days"\ndry_run = false\n'
                 '[gc.compactions_options]\nenabled = false\n'
                 '[gc.detach_options]\ninterval = "10min"\n')
    g = load_settings(f, env={}).gc
    assert g.boundary_files_enabled is False
    assert (g.manifest_options.interval, g.manifest_options.min_age) == (300.0, 86400.0)
    assert g.manifest_options.dry_run is None  # unset: [gc] dry_run
    assert (g.wal_options.min_age, g.wal_options.dry_run) == (60.0, True)
    assert (g.wal_fence_options.min_age, g.wal_fence_options.dry_run) == (30 * 86400.0, False)
    assert g.compactions_options.enabled is False and g.compacted_options.enabled is True
    assert g.detach_options.interval == 600.0


def test_gc_directory_tables_from_the_environment_and_their_errors(tmp_path: Path) -> None:
    g = load_settings(env={"SLATELIB_GC__WAL_OPTIONS": '{"min_age": "1h", "dry_run": false}',
                           "SLATELIB_GC__BOUNDARY_FILES_ENABLED": "false"}).gc
    assert (g.wal_options.min_age, g.wal_options.dry_run) == (3600.0, False)
    assert g.boundary_files_enabled is False
    with pytest.raises(InvalidArgumentError, match=r"gc\.wal_options: expected a table"):
        load_settings(env={"SLATELIB_GC__WAL_OPTIONS": "1h"})
    f = tmp_path / "bad.toml"
    f.write_text('[gc.wal_options]\nmin_agee = "1h"\n')
    with pytest.raises(InvalidArgumentError, match=r"bad.toml\.gc\.wal_options: unknown setting "
                                                   r"'min_agee'"):
        load_settings(f, env={})
    f.write_text('[gc.manifest_options]\nmin_age = "soon"\n')
    with pytest.raises(InvalidArgumentError, match=r"gc\.manifest_options\.min_age"):
        load_settings(f, env={})


def test_an_official_garbage_collector_options_block_is_read_as_gc(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    """0.17's own settings-file block, pasted verbatim (its documented example)."""
    f = tmp_path / "official.toml"
    f.write_text('[garbage_collector_options]\nboundary_files_enabled = false\n'
                 'object_store_max_retries = 3\n'
                 '[garbage_collector_options.manifest_options]\ninterval = "300s"\n'
                 'min_age = "86400s"\n'
                 '[garbage_collector_options.wal_options]\ninterval = "60s"\nmin_age = "60s"\n'
                 '[gc]\nmin_age = "10min"\n')
    with caplog.at_level("WARNING", logger="slatelib.config"):
        g = load_settings(f, env={}).gc
    assert (g.boundary_files_enabled, g.min_age) == (False, 600.0)
    assert (g.manifest_options.min_age, g.wal_options.interval) == (86400.0, 60.0)
    assert "object_store_max_retries: ignored ([retry] governs retries)" in caplog.text
    f.write_text('[garbage_collector_options.wal_options]\nmin_age = "60s"\n'
                 '[gc.wal_options]\nmin_age = "1h"\n')
    with pytest.raises(InvalidArgumentError, match="both \\[gc\\] and "
                                                   "\\[garbage_collector_options\\] set 'wal_opt"):
        load_settings(f, env={})
    f.write_text('[garbage_collector_options.wal_options]\nmin_agee = "60s"\n')
    with pytest.raises(InvalidArgumentError, match="gc.wal_options: unknown setting 'min_agee'"):
        load_settings(f, env={})


def test_the_wal_store_comes_from_the_settings_and_slatelib_wal_store_wins(tmp_path: Path) -> None:
    conf = tmp_path / "wal.toml"
    conf.write_text('[object_store]\nwal_store = "s3://from-conf"\n')
    assert load_settings(conf, {}).object_store.wal_store == "s3://from-conf"
    assert load_settings(conf, {"SLATELIB_WAL_STORE": " s3://env "}).object_store.wal_store == \
        "s3://env"
    assert load_settings(conf, {"SLATELIB_WAL_STORE": ""}).object_store.wal_store == ""
    same = {"SLATELIB_WAL_STORE": "s3://a", "SLATELIB_OBJECT_STORE__WAL_STORE": "s3://a"}
    assert load_settings(None, same).object_store.wal_store == "s3://a"
    with pytest.raises(InvalidArgumentError, match="disagree"):
        load_settings(None, {"SLATELIB_WAL_STORE": "s3://a",
                             "SLATELIB_OBJECT_STORE__WAL_STORE": "s3://b"})
    assert "SLATELIB_WAL_STORE" in known_env_names()
