"""The GC flags that ``slate gc`` and ``jobs/gc.py`` share (:func:`add_gc_args`, defined
once here), and the options they make (docs/rfcs/0013-gc-options.md).

``--min-age``, ``--force`` and ``--dry-run`` / ``--no-dry-run`` apply to the whole run.

Each of 0.17's directories (``manifest``, ``wal``, ``wal-fence``, ``compacted``,
``compactions``) gets ``--<dir>-min-age DURATION`` and ``--<dir>-dry-run`` /
``--no-<dir>-dry-run``, the per-directory forms of ``--min-age`` and ``--dry-run``;
``--no-boundary-files`` is 0.17's ``disable_boundary_files`` (``[gc]
boundary_files_enabled = false``). A flag for one directory wins over the settings of that
directory, which win over ``--min-age`` / ``--no-dry-run``, which win over ``[gc]
min_age`` / ``dry_run``. ``--dry-run`` makes the whole run a dry run whatever the rest says.
"""

from __future__ import annotations

import argparse

from slatelib.config import Settings
from slatelib.core.gc_rules import GC_KINDS, GcOptions
from slatelib.flags import OnOffFlag, accept_dash_values
from slatelib.ops.gc.collect import gc_options

FLAG_NAMES = {kind: kind.value.replace("_", "-") for kind in GC_KINDS}
"""Kind -> the directory's name in flags (``wal-fence``)."""


def add_gc_args(p: argparse.ArgumentParser) -> None:
    """Add every GC flag: ``--min-age``, ``--force``, ``--dry-run`` / ``--no-dry-run`` and
    the per-directory ones (:func:`add_gc_option_args`); ``--min-age -5min`` reaches its
    own check ("must not be negative")."""
    accept_dash_values(p)
    p.add_argument("--min-age", metavar="DURATION",
                   help="only objects older than this may go (default [gc] min_age, 5min)")
    p.add_argument("--force", action="store_true",
                   help="allow --min-age below [gc] min_age_floor (5min)")
    p.add_argument("--dry-run", action=OnOffFlag, default=None,
                   help="decide and report only; --no-dry-run deletes; giving both is refused "
                        "(default: [gc] dry_run, true)")
    add_gc_option_args(p)


def add_gc_option_args(p: argparse.ArgumentParser) -> None:
    """Add the per-directory flags and ``--boundary-files`` / ``--no-boundary-files``."""
    for kind, name in FLAG_NAMES.items():
        p.add_argument(f"--{name}-min-age", metavar="DURATION", dest=f"{kind.value}_min_age",
                       help=f"min_age of {kind.value} GC (default [gc.{kind.value}_options] "
                            "min_age, else --min-age)")
    for kind, name in FLAG_NAMES.items():
        p.add_argument(f"--{name}-dry-run", action=OnOffFlag, default=None,
                       dest=f"{kind.value}_dry_run",
                       help=f"dry run of {kind.value} GC only; --no-{name}-dry-run deletes "
                            f"(default [gc.{kind.value}_options] dry_run, else the run's)")
    p.add_argument("--boundary-files", action=OnOffFlag, default=None,
                   help="advance gc/*.boundary before deleting manifests and compactions "
                        "files; --no-boundary-files (0.17's disable_boundary_files) for a "
                        "store without If-Match (default [gc] boundary_files_enabled, true)")


def gc_options_from_args(settings: Settings, args: argparse.Namespace) -> tuple[GcOptions, bool]:
    """The options the flags and settings make, and whether ``--dry-run`` forces a dry run
    of the whole run.

    Raises:
        InvalidArgumentError: a malformed duration.
    """
    forced = args.dry_run is True
    options = gc_options(
        settings, min_age=args.min_age, force=args.force,
        dry_run=False if args.dry_run is False else None,
        min_ages={k.value: getattr(args, f"{k.value}_min_age", None) for k in GC_KINDS},
        dry_runs={k.value: getattr(args, f"{k.value}_dry_run", None) for k in GC_KINDS},
        boundary_files=getattr(args, "boundary_files", None),
    )
    return options, forced
