"""slatelib.flags: bounded whole numbers, sizes, and on/off flags given one way only."""

from __future__ import annotations

import argparse

import pytest

from slatelib.flags import OnOffFlag, accept_dash_values, size, whole_number


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="t", exit_on_error=False)
    p.add_argument("--limit", type=whole_number(minimum=0))
    p.add_argument("--id", type=whole_number(minimum=1))
    p.add_argument("--sst-size", type=size(minimum=1))
    p.add_argument("--dry-run", action=OnOffFlag, default=None)
    p.add_argument("--age")
    return p


@pytest.mark.parametrize("argv, attr, value", [
    (["--limit", "0"], "limit", 0), (["--limit", "7"], "limit", 7), (["--id", "1"], "id", 1),
    (["--sst-size", "1"], "sst_size", 1), (["--sst-size", "64MiB"], "sst_size", 64 << 20),
])
def test_values_in_range_are_taken(argv: list[str], attr: str, value: int) -> None:
    assert getattr(parser().parse_args(argv), attr) == value


@pytest.mark.parametrize("argv, message", [
    (["--limit", "-1"], "argument --limit: must be at least 0, got '-1'"),
    (["--limit=-1"], "argument --limit: must be at least 0, got '-1'"),
    (["--limit", "x"], "argument --limit: expected a whole number of at least 0, got 'x'"),
    (["--limit", "1.5"], "expected a whole number"),
    (["--id", "0"], "argument --id: must be at least 1, got '0'"),
    (["--sst-size", "0"], "argument --sst-size: must be at least 1 bytes, got '0'"),
    (["--sst-size", "0MiB"], "must be at least 1 bytes"),
    (["--sst-size=-1"], "argument --sst-size: cannot parse size '-1'"),
    (["--sst-size", "lots"], "argument --sst-size: cannot parse size 'lots'"),
])
def test_values_out_of_range_are_refused_naming_the_flag(argv: list[str], message: str) -> None:
    with pytest.raises(argparse.ArgumentError, match=message):
        parser().parse_args(argv)


@pytest.mark.parametrize("argv, value", [
    ([], None), (["--dry-run"], True), (["--no-dry-run"], False),
    (["--dry-run", "--dry-run"], True), (["--no-dry-run", "--no-dry-run"], False),
    (["--dry"], True), (["--no-dry"], False),  # abbreviations resolve to the full flag
])
def test_on_off_flag_one_way(argv: list[str], value: bool | None) -> None:
    assert parser().parse_args(argv).dry_run is value


@pytest.mark.parametrize("argv, first, second", [
    (["--dry-run", "--no-dry-run"], "--dry-run", "--no-dry-run"),
    (["--no-dry-run", "--dry-run"], "--no-dry-run", "--dry-run"),
    (["--dry-run", "--limit", "1", "--no-dry"], "--dry-run", "--no-dry-run"),
])
def test_on_off_flag_both_ways_is_refused_naming_both(
    argv: list[str], first: str, second: str
) -> None:
    with pytest.raises(argparse.ArgumentError,
                       match=f"^{first} and {second} contradict each other: give one of them$"):
        parser().parse_args(argv)


def test_one_parser_parses_many_command_lines_independently() -> None:
    p = parser()
    assert p.parse_args(["--dry-run"]).dry_run is True
    assert p.parse_args(["--no-dry-run"]).dry_run is False
    assert p.parse_args([]).dry_run is None


def test_on_off_flag_exits_2_through_argparse(capsys: pytest.CaptureFixture[str]) -> None:
    p = argparse.ArgumentParser(prog="t")
    p.add_argument("--dry-run", action=OnOffFlag, default=None)
    with pytest.raises(SystemExit) as info:
        p.parse_args(["--dry-run", "--no-dry-run"])
    assert info.value.code == 2
    assert "t: error: --dry-run and --no-dry-run contradict each other" in capsys.readouterr().err


def test_accept_dash_values_passes_dash_values_on() -> None:
    p = parser()
    with pytest.raises(argparse.ArgumentError, match="expected one argument"):
        p.parse_args(["--age", "-5min"])
    accept_dash_values(p)
    assert p.parse_args(["--age", "-5min"]).age == "-5min"
