"""docs/fault-scenarios.md and the harness's scenario registry list the same scenarios,
each exercised by the function the document names, with the same status."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from tests.faults.scenarios import SCENARIOS

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "fault-scenarios.md"
ROW = re.compile(r"^\| ([FR]\d\d) \| ([^|]+) \|[^|]*\| `([\w.]+)`[^|]*\| ([^|]+) \|$", re.MULTILINE)


def doc_rows() -> dict[str, tuple[str, str, str]]:
    rows = {m[1]: (m[2].strip(), m[3], m[4].strip())
            for m in ROW.finditer(DOC.read_text(encoding="utf-8"))}
    assert rows, "no scenario rows found in docs/fault-scenarios.md"
    return rows


def resolve(qualname: str) -> object:
    module, _, name = qualname.rpartition(".")
    return getattr(importlib.import_module(module), name)


def test_every_listed_scenario_is_in_the_registry_and_the_other_way_round() -> None:
    assert sorted(doc_rows()) == sorted(s.id for s in SCENARIOS)


def test_each_scenario_names_the_function_that_exercises_it() -> None:
    rows = doc_rows()
    for s in SCENARIOS:
        _title, where, _status = rows[s.id]
        assert resolve(where) is s.where, f"{s.id}: the document names {where}, " \
                                          f"the registry runs {s.qualname}"


def test_the_status_matches_and_pending_entries_say_what_they_wait_for() -> None:
    rows = doc_rows()
    for s in SCENARIOS:
        status = rows[s.id][2]
        if s.pending:
            assert status.startswith("pending: "), (s.id, status)
        else:
            assert status == "covered", (s.id, status)


def test_every_covered_scenario_function_records_its_id() -> None:
    """The function's source marks the scenario (``world.note("F..")``), so a run's
    coverage report names it."""
    import inspect

    for s in SCENARIOS:
        if s.pending:
            continue
        source = inspect.getsource(s.where)
        assert f'"{s.id}"' in source, f"{s.qualname} does not note {s.id}"
