"""jobs/export.py: arguments, checked before Spark starts."""

from __future__ import annotations

import pytest

from slatelib.errors import InvalidArgumentError
from slatelib.jobs.export import build_parser, export_args, main


def _args(*argv: str) -> object:
    return build_parser().parse_args(["--db", "file:///d/db", "--to", "file:///t", *argv])


def test_arguments_to_export_args() -> None:
    a = export_args(_args("--format", "delta", "--mode", "incremental", "--columns", "value,seq",
                          "--checkpoint-lifetime", "2days", "--partitions", "4"))
    assert a.format == "delta" and a.mode == "incremental" and a.partitions == 4
    assert a.columns == ("key", "value", "seq") and a.checkpoint_lifetime_s == 2 * 86400
    assert a.parquet_writer == "spark"
    assert export_args(_args("--format", "parquet", "--parquet-writer", "arrow")
                       ).parquet_writer == "arrow"


@pytest.mark.parametrize("argv, message", [
    (("--format", "parquet", "--mode", "incremental"), "needs --format delta"),
    (("--format", "delta", "--partitions", "0"), "--partitions"),
    (("--format", "delta", "--checkpoint-lifetime", "soon"), "checkpoint-lifetime"),
    (("--format", "delta", "--columns", "ttl"), "unknown column"),
    (("--format", "delta", "--parquet-writer", "arrow"), "needs --format parquet"),
])
def test_bad_arguments_are_refused(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        export_args(_args(*argv))


def test_main_exits_2_before_spark_starts(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--db", "file:///d/db", "--to", "file:///t", "--format", "parquet",
                 "--mode", "incremental"])
    assert code == 2
    assert "needs --format delta" in capsys.readouterr().err


def test_only_an_s3_target_brings_the_s3a_jars() -> None:
    from slatelib.jobs.export import export_jars

    assert export_jars("s3://lake/t") == export_jars("s3a://lake/t") == ("delta", "s3a")
    assert export_jars("file:///lake/t") == export_jars("/lake/t") == ("delta",)
    assert export_jars("s3:///t") == ("delta",)  # malformed: refused before Spark starts
