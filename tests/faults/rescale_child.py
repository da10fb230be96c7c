"""Subprocess entry of scenario R01 (``python -m tests.faults.rescale_child ...``): one
rescale job (:func:`slatelib.ops.rescale.split_database` or
:func:`~slatelib.ops.rescale.merge_databases`, threads only, no Spark) on the local store,
with the ``--hook WHEN:AT:MATCH`` of :mod:`tests.faults.child` (SIGKILL before or after
the AT-th store write whose path contains MATCH, or a pause; ``HOOK`` / ``PAUSED`` lines go
to stderr).

    split --root DIR --source db --target a --target b [--at HEX ...] [--fence-source]
    merge --root DIR --source a --source b --target m [--fence-source | --allow-live-source]

It prints one line on stdout at the end: ``RESULT <status> <job id>``, or
``ERROR <exception type> <message>`` (the parent judges it), and exits 0.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - subprocess
    p = argparse.ArgumentParser(prog="python -m tests.faults.rescale_child")
    p.add_argument("kind", choices=("split", "merge"))
    p.add_argument("--root", required=True)
    p.add_argument("--source", action="append", required=True)
    p.add_argument("--target", action="append", required=True)
    p.add_argument("--at", action="append", default=None, help="a split key, in hex")
    p.add_argument("--fence-source", action="store_true")
    p.add_argument("--allow-live-source", action="store_true")
    p.add_argument("--hook", default=None)
    args = p.parse_args(argv)

    from tests.faults.child import install_hook

    install_hook(args.hook, sys.stderr)

    from slatelib.objstore import open_store
    from slatelib.ops.rescale import merge_databases, split_database, thread_mapper
    from tests.faults.scenarios.common import maint_settings
    from tests.faults.scenarios.rescale import job_options

    store = open_store(f"file://{args.root}")
    options = job_options(fence_source=args.fence_source,
                          allow_live_source=args.allow_live_source)
    try:
        if args.kind == "split":
            at = None if args.at is None else [bytes.fromhex(k) for k in args.at]
            report = split_database(args.source[0], store, args.target, at=at,
                                    settings=maint_settings(), options=options,
                                    mapper=thread_mapper(2))
        else:
            report = merge_databases(args.source, args.target[0], store,
                                     settings=maint_settings(), options=options,
                                     mapper=thread_mapper(2))
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which judges it
        print(f"ERROR {type(exc).__name__} {str(exc)[:400]!r}", flush=True)
        return 0
    print(f"RESULT {report.status} {report.job_id}", flush=True)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
