"""One exit-code table for ``slate`` and every job (slatelib/exit_codes.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import slatelib.spark.gc
from slatelib import errors
from slatelib.cli.app import exit_code_for as cli_exit_code_for
from slatelib.exit_codes import EXIT_NAMES, exit_code_for, exit_name
from slatelib.jobs import compact as compact_job
from slatelib.jobs import gc as gc_job
from slatelib.jobs._common import DbTarget, settings_from
from slatelib.spark.isolation import run_isolated

CASES = [
    (errors.CompactorActiveError("x"), 7),
    (errors.FencedError("x"), 3),
    (errors.AlreadyExistsError("x"), 4),
    (errors.ConflictError("x"), 4),
    (errors.InvalidArgumentError("x"), 2),
    (errors.ChecksumMismatchError("x"), 5),
    (errors.SstMissingError("x"), 5),
    (errors.InvalidDbStateError("x"), 5),
    (errors.UnavailableError("x"), 6),
    (errors.StorageError("x"), 6),
    (errors.CommitStateUnknownError("x"), 6),
    (errors.InternalError("x"), 1),
    (RuntimeError("x"), 1),
]


@pytest.mark.parametrize("exc,code", CASES, ids=[type(e).__name__ for e, _ in CASES])
def test_every_error_kind_has_one_code_everywhere(exc: BaseException, code: int) -> None:
    assert exit_code_for(exc) == cli_exit_code_for(exc) == code
    assert exit_name(code) == EXIT_NAMES[code]


@pytest.mark.parametrize("exc,code", CASES[:-1], ids=[type(e).__name__ for e, _ in CASES[:-1]])
def test_the_compact_and_gc_jobs_report_the_same_code_for_the_same_error(
    exc: BaseException, code: int, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    """Each job's per-database runner fails with ``exc``; both report ``code``."""
    def boom(*_: Any, **__: Any) -> Any:
        raise exc

    monkeypatch.setattr(compact_job, "run_compaction", boom)
    monkeypatch.setattr(gc_job, "run_gc", boom)
    monkeypatch.setattr(slatelib.spark.gc, "SparkBackend", lambda *a, **k: None)
    got = {}
    for name, job in (("compact", compact_job), ("gc", gc_job)):
        args = job.build_parser().parse_args(["--db", f"file://{tmp_path}/db", "--dry-run"])
        report, rc = job.run(None, settings_from(args), args)
        [one] = report["databases"]
        got[name] = (rc, one["status"], one["exit_code"])
    assert got["compact"] == got["gc"] == (code, EXIT_NAMES[code], code)


def test_isolation_gives_an_unexpected_exception_code_1() -> None:
    def crash(_: DbTarget) -> dict[str, Any]:
        raise KeyError("bug")

    results, code = run_isolated([DbTarget("memory:///", "db", "db")], crash)
    assert code == 1 and results[0]["status"] == "error"


def test_names_cover_exactly_the_codes() -> None:
    assert sorted(EXIT_NAMES) == list(range(8))
    assert len(set(EXIT_NAMES.values())) == 8
    assert exit_name(99) == "error"
