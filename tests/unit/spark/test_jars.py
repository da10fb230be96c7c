"""The pinned Spark jars: the lock, fetching with a checksum check, and the launch's --jars."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from slatelib.errors import InvalidArgumentError, SlateError
from slatelib.spark import jars
from slatelib.spark.session import delta_conf, launch_jars

REPO = Path(__file__).resolve().parents[3]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_the_shipped_lock_pins_delta_for_the_installed_spark_and_s3a_for_its_hadoop() -> None:
    import pyspark

    pinned = {j.artifact: j for j in jars.pinned()}
    spark_jars = Path(pyspark.__file__).parent / "jars"
    hadoop = next(spark_jars.glob("hadoop-client-api-*.jar")).name
    assert pinned["hadoop-aws"].version == hadoop.removeprefix("hadoop-client-api-").removesuffix(".jar")
    scala = next(spark_jars.glob("scala-library-*.jar")).name.split("-")[2]
    assert pinned[f"delta-spark_{scala[:4]}"].feature == "delta"
    from importlib.metadata import version

    # the PyPI delta-spark is the release of the jars
    assert version("delta-spark") == pinned[f"delta-spark_{scala[:4]}"].version
    assert {j.feature for j in pinned.values()} == set(jars.FEATURES)


@pytest.mark.parametrize("line, what", [
    ("io.delta:delta-spark_2.13:4.4.0 abc delta", "SHA-256"),
    ("io.delta:delta-spark_2.13 " + "a" * 64 + " delta", "coordinates"),
    ("io.delta:delta-spark_2.13:4.4.0 " + "a" * 64 + " hdfs", "unknown feature"),
    ("io.delta:delta-spark_2.13:4.4.0 " + "a" * 64, "expected"),
])
def test_a_malformed_lock_line_is_refused_with_its_line_number(line: str, what: str) -> None:
    with pytest.raises(InvalidArgumentError, match=f"jars.lock line 2: .*{what}|line 2: {what}"):
        jars.parse_lock("# comment\n" + line + "\n")


def test_a_jar_pinned_twice_is_refused() -> None:
    line = "g:a:1 " + "b" * 64 + " delta\n"
    with pytest.raises(InvalidArgumentError, match="pinned twice"):
        jars.parse_lock(line + line)


class FakeMvn:
    """``mvn dependency:copy`` writing ``content`` per artifact into the output folder."""

    def __init__(self, content: dict[str, bytes], code: int = 0) -> None:
        self.content, self.code, self.calls = content, code, []  # type: ignore[var-annotated]

    def __call__(self, argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append(argv)
        coords = next(a for a in argv if a.startswith("-Dartifact=")).split("=", 1)[1]
        out = Path(next(a for a in argv if a.startswith("-DoutputDirectory=")).split("=", 1)[1])
        g, a, v = coords.split(":")
        if self.code == 0:
            (out / f"{a}-{v}.jar").write_bytes(self.content[a])
        return subprocess.CompletedProcess(argv, self.code, "", "no such artifact" if self.code else "")


def test_fetch_copies_checks_and_keeps_a_good_jar(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jars.shutil, "which", lambda _: "/usr/bin/mvn")
    lock = jars.parse_lock(f"g:one:1 {_sha(b'one')} delta\ng:two:2 {_sha(b'two')} s3a\n")
    mvn = FakeMvn({"one": b"one", "two": b"two"})
    paths = jars.fetch(tmp_path, lock, run=mvn, log=lambda _: None)
    assert [p.read_bytes() for p in paths] == [b"one", b"two"] and len(mvn.calls) == 2
    jars.fetch(tmp_path, lock, run=mvn, log=lambda _: None)
    assert len(mvn.calls) == 2  # both already there with their checksums: no mvn call
    (tmp_path / "one-1.jar").write_bytes(b"tampered")
    jars.fetch(tmp_path, lock, run=mvn, log=lambda _: None)
    assert len(mvn.calls) == 3 and (tmp_path / "one-1.jar").read_bytes() == b"one"


def test_fetch_deletes_a_jar_whose_checksum_differs(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jars.shutil, "which", lambda _: "/usr/bin/mvn")
    lock = jars.parse_lock(f"g:one:1 {_sha(b'one')} delta\n")
    with pytest.raises(SlateError, match="g:one:1: SHA-256 .* differs"):
        jars.fetch(tmp_path, lock, run=FakeMvn({"one": b"evil"}), log=lambda _: None)
    assert not (tmp_path / "one-1.jar").exists()


def test_fetch_reports_a_failing_or_missing_mvn(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    lock = jars.parse_lock(f"g:one:1 {_sha(b'one')} delta\n")
    monkeypatch.setattr(jars.shutil, "which", lambda _: "/usr/bin/mvn")
    with pytest.raises(SlateError, match="g:one:1 with mvn failed .exit 1.:\nno such artifact"):
        jars.fetch(tmp_path, lock, run=FakeMvn({}, code=1), log=lambda _: None)
    monkeypatch.setattr(jars.shutil, "which", lambda _: None)
    with pytest.raises(SlateError, match="no 'mvn' on PATH"):
        jars.fetch(tmp_path, lock, log=lambda _: None)


def test_launch_jars_merges_the_users_jars_and_adds_only_fetched_features(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(jars.JARS_DIR_ENV, str(tmp_path))
    delta = jars.select(["delta"])
    for jar in delta:
        (tmp_path / jar.filename).write_bytes(b"x")
    env = {"PYSPARK_SUBMIT_ARGS": "--jars /opt/a.jar pyspark-shell"}
    out = launch_jars(["--master", "local[1]", "--conf", "spark.jars=/opt/b.jar"],
                      ["delta", "s3a"], environ=env)
    assert out[:4] == ["--master", "local[1]", "--conf", "spark.jars=/opt/b.jar"]
    assert out[-2] == "--jars"
    assert out[-1].split(",") == ["/opt/a.jar", "/opt/b.jar",
                                  *(str(tmp_path / j.filename) for j in delta)]
    # s3a is not fetched: none of its jars are added; nothing fetched: launch unchanged
    assert launch_jars(["--master", "x"], ["s3a"], environ={}) == ["--master", "x"]


def test_a_jar_the_user_gives_by_the_same_name_is_not_added_twice(tmp_path: Path) -> None:
    mine = tmp_path / "delta-storage-4.4.0.jar"
    out = jars.with_jars(["--jars=/opt/delta-storage-4.4.0.jar"], [mine])
    assert out[-1] == "/opt/delta-storage-4.4.0.jar"


def test_delta_conf_keeps_other_extensions_and_catalogs() -> None:
    assert delta_conf({}) == {"spark.sql.extensions": jars.DELTA_EXTENSION,
                              "spark.sql.catalog.spark_catalog": jars.DELTA_CATALOG}
    out = delta_conf({"spark.sql.extensions": "com.x.Ext",
                      "spark.sql.catalog.spark_catalog": "com.x.Catalog"})
    assert out == {"spark.sql.extensions": f"com.x.Ext,{jars.DELTA_EXTENSION}"}
    assert delta_conf({"spark.sql.extensions": jars.DELTA_EXTENSION,
                       "spark.sql.catalog.spark_catalog": jars.DELTA_CATALOG}) == {}


def test_the_cli_names_the_packages_and_lists_the_pins() -> None:
    run = subprocess.run([sys.executable, "-m", "slatelib.spark.jars", "packages"],
                         capture_output=True, text=True, check=True, cwd=REPO)
    coords = run.stdout.strip().split(",")
    pinned = {f"{j.group}:{j.artifact}": j.version for j in jars.pinned()}
    assert coords == [f"io.delta:delta-spark_2.13:{pinned['io.delta:delta-spark_2.13']}",
                      f"org.apache.hadoop:hadoop-aws:{pinned['org.apache.hadoop:hadoop-aws']}"]
    bad = subprocess.run([sys.executable, "-m", "slatelib.spark.jars", "print",
                          "--features", "hdfs"], capture_output=True, text=True, cwd=REPO)
    assert bad.returncode == 2 and "unknown jar feature" in bad.stderr
