"""``spark-submit jobs/export.py [options]``: the entry script of the installed job
:mod:`slatelib.jobs.export` (its options: ``spark-submit jobs/export.py --help``, or
``slate-spark export --help``). The code lives in slatelib, which the driver's Python must have
installed; executors get it from the packed env (``--archives dist/slatelib-executor-env.tar.gz#env``).
"""

from slatelib.jobs.export import main

if __name__ == "__main__":
    raise SystemExit(main())
