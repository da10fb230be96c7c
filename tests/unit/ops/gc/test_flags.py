"""The per-directory GC flags of ``slate gc`` and ``jobs/gc.py`` (slatelib.ops.gc.flags)."""

from __future__ import annotations

import argparse

import pytest

from slatelib.config import GcDirectorySettings, GcSettings, Settings
from slatelib.core.gc_rules import ObjectKind
from slatelib.flags import OnOffFlag
from slatelib.ops.gc.flags import add_gc_option_args, gc_options_from_args

K = ObjectKind


def parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--min-age")
    p.add_argument("--force", action="store_true")
    p.add_argument("--dry-run", action=OnOffFlag, default=None)
    add_gc_option_args(p)
    return p.parse_args(argv)


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
