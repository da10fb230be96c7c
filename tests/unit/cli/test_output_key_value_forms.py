"""Keys and values a person can type and read in every command (issue 27, "the first
hour"): the ``auto`` key rule, ``--value-format``, ``load``'s input forms, and the errors
that name what to do."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from slatelib.cli import output
from slatelib.cli.app import EXIT_OK, EXIT_USAGE
from slatelib.errors import InvalidArgumentError
from tests.unit.cli.test_output import slate

LINES = [
    {"key": "user:00100", "value": "alice"},                     # text key and value
    {"key": "user:00150", "value": "hex:ff00"},                  # a value that is not UTF-8
    {"key": "hex:757365723a30303230", "value": "b64:Ym9i"},      # prefixed: user:0020, bob
    {"key_utf8": "user:00200", "key": "ignored", "value_utf8": "carol", "value": "x"},
    {"key": "757365723a303033", "value": "6361726f6c"},          # the older hex form
]


@pytest.fixture
def db(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in LINES))
    url = f"file://{tmp_path}/db"
    code, _, err = slate(capsys, "--db", url, "load", str(src))
    assert code == EXIT_OK, err
    assert "loaded 5 rows into 1 SST(s)" in err and f"at {url};" in err  # the URL typed
    return url


def test_auto_reads_hex_digits_as_hex_and_anything_else_as_text() -> None:
    assert output.parse_key("user:1", default="auto") == b"user:1"
    assert output.parse_key("75736572", default="auto") == b"user"
    assert output.parse_key("abc", default="auto") == b"abc"       # odd count: text
    assert output.parse_key("utf8:cafe", default="auto") == b"cafe"
    with pytest.raises(InvalidArgumentError, match="for text, write utf8:user:1"):
        output.parse_key("user:1", default="hex", what="--start")


def test_every_key_argument_takes_text(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = slate(capsys, "--db", db, "scan", "--start", "user:00100", "--end",
                           "user:00200", "--key-format", "utf8")
    assert code == EXIT_OK, err
    assert [json.loads(x)["key_utf8"] for x in out.splitlines()] == [
        "user:00100", "user:00150", "user:0020"]  # byte order
    code, out, _ = slate(capsys, "--db", db, "get", "user:00100")
    assert code == EXIT_OK and json.loads(out)["value"] == b"alice".hex()
    code, out, _ = slate(capsys, "--db", db, "get", b"user:00200".hex())  # hex still works
    assert json.loads(out)["value"] == b"carol".hex()
    code, out, _ = slate(capsys, "--db", db, "get", "--key", "user:003")
    assert json.loads(out)["value"] == b"carol".hex()


def test_value_format_in_json_and_tables(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = slate(capsys, "--db", db, "get", "user:00100", "--value-format", "utf8")
    assert code == EXIT_OK
    assert json.loads(out) == {"key": b"user:00100".hex(), "value": b"alice".hex(),
                               "value_utf8": "alice"}
    code, out, _ = slate(capsys, "--db", db, "get", "user:0020", "--value-format", "base64")
    assert json.loads(out)["value_base64"] == "Ym9i"
    code, out, _ = slate(capsys, "--db", db, "scan", "--value-format", "hex", "--format",
                         "table", "--start", "user:0020", "--end", "user:003")
    assert out.splitlines()[0].split() == ["user:0020", b"bob".hex()]
    code, out, _ = slate(capsys, "--db", db, "scan", "--start", "user:00150", "--limit", "1",
                         "--value-format", "base64")
    assert json.loads(out)["value_base64"] == "/wA="


def test_a_value_that_is_not_utf8_is_an_error_naming_its_key(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for fmt in ("json", "table"):
        code, _, err = slate(capsys, "--db", db, "get", "user:00150", "--value-format", "utf8",
                             "--format", fmt)
        assert code == EXIT_USAGE
        assert "the value of key user:00150 is not valid UTF-8" in err
        assert "--value-format hex or base64" in err


def test_scan_output_loads_back_unchanged(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, before, _ = slate(capsys, "--db", db, "scan")
    for fmts in ((), ("--key-format", "utf8", "--value-format", "base64")):
        _, dump, _ = slate(capsys, "--db", db, "scan", *fmts)
        copy = f"file://{tmp_path}/copy{len(fmts)}"
        monkeypatch.setattr("sys.stdin", io.StringIO(dump))
        code, _, err = slate(capsys, "--db", copy, "load", "-")
        assert code == EXIT_OK, err
        _, after, _ = slate(capsys, "--db", copy, "scan")
        assert after == before


def test_load_names_the_line_and_the_forms_it_takes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"key": "a", "value": "b"}\n{"key": "hex:zz", "value": "c"}\n')
    code, _, err = slate(capsys, "--db", f"file://{tmp_path}/db", "load", str(bad))
    assert code == EXIT_USAGE and f"{bad}:2:" in err and "key_utf8" in err
    assert "not hex digits after 'hex:'" in err


def test_a_misspelled_option_shows_the_command_usage_and_a_suggestion(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = slate(capsys, "--db", db, "scan", "--strat", "user:1")
    assert code == EXIT_USAGE
    assert err.startswith("usage: slate scan ")
    assert "did you mean --start" in err
    code, _, err = slate(capsys, "--db", db, "scan", "--zzzzzz")
    assert code == EXIT_USAGE and "unrecognized arguments: --zzzzzz" in err
    assert "did you mean" not in err


def test_help_names_metavars_not_internal_dests(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = slate(capsys, "scan", "--help")
    assert code == EXIT_OK
    assert "_SUB_" not in out and "--db URL" in out and "--start KEY" in out
