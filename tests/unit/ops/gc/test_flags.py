"""The per-directory GC flags of ``slate gc`` and ``jobs/gc.py`` (slatelib.ops.gc.flags)."""

from __future__ import annotations

import argparse

import pytest

from slatelib.config import GcDirectorySettings, GcSettings, Settings
from slatelib.core.gc_rules import ObjectKind
from slatelib.ops.gc.flags import add_gc_args, gc_options_from_args

K = ObjectKind


def parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_gc_args(p)
    return p.parse_args(argv)


def gc_flags(p: argparse.ArgumentParser) -> dict[str, tuple[object, ...]]:
    return {a.dest: (tuple(a.option_strings), type(a).__name__, a.default, a.help)
            for a in p._actions if a.dest not in ("help",)}


def test_slate_gc_and_the_gc_job_take_the_same_gc_flags_defined_once() -> None:
    from slatelib.cli.app import build_parser as slate_parser
    from slatelib.jobs.gc import build_parser

    job = gc_flags(build_parser())
    sub = next(a for a in slate_parser()._actions if isinstance(a, argparse._SubParsersAction))
    cli = gc_flags(sub.choices["gc"])
    alone = argparse.ArgumentParser()
    add_gc_args(alone)
    mine = gc_flags(alone)
    assert mine and all(job[d] == v and cli[d] == v for d, v in mine.items())


def test_a_negative_min_age_reaches_its_own_check() -> None:
    assert parse("--min-age", "-5min").min_age == "-5min"


def test_per_directory_flags_set_each_directory() -> None:
    s = Settings(gc=GcSettings(wal_options=GcDirectorySettings(min_age=7200)))
    args = parse("--min-age", "10min", "--wal-fence-min-age", "30days", "--no-wal-fence-dry-run",
                 "--compacted-dry-run", "--no-boundary-files", "--no-dry-run")
    o, forced = gc_options_from_args(s, args)
    assert forced is False and o.dry_run is False and o.boundary_files_enabled is False
    p = o.policies()
    assert (p[K.WAL_FENCE].min_age_s, p[K.WAL_FENCE].dry_run) == (30 * 86400, False)
    assert (p[K.COMPACTED].dry_run, p[K.MANIFEST].dry_run) == (True, False)
    assert (p[K.WAL].min_age_s, p[K.MANIFEST].min_age_s) == (7200, 600)


def test_no_flags_leave_everything_to_the_settings() -> None:
    o, forced = gc_options_from_args(Settings(), parse())
    assert forced is False and o.dry_run is True and o.boundary_files_enabled is True
    assert o.writes_nothing()
    o, forced = gc_options_from_args(Settings(), parse("--dry-run", "--no-wal-dry-run"))
    assert forced is True  # --dry-run: the whole run, whatever a directory says


def test_a_directory_flag_given_both_ways_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse("--wal-dry-run", "--no-wal-dry-run")
    assert exc.value.code == 2
