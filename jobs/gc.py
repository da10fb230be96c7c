"""``spark-submit jobs/gc.py [options]``: the entry script of the installed job
:mod:`slatelib.jobs.gc` (its options: ``spark-submit jobs/gc.py --help``, or
``slate-spark gc --help``). The code lives in slatelib, which the driver's Python must have
installed; executors get it from the packed env (``--archives dist/slatelib-executor-env.tar.gz#env``).
"""

from slatelib.jobs.gc import main

if __name__ == "__main__":
    raise SystemExit(main())
