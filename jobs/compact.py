"""``spark-submit jobs/compact.py [options]``: the entry script of the installed job
:mod:`slatelib.jobs.compact` (its options: ``spark-submit jobs/compact.py --help``, or
``slate-spark compact --help``). The code lives in slatelib, which the driver's Python must have
installed; executors get it from the packed env (``--archives dist/slatelib-executor-env.tar.gz#env``).
"""

from slatelib.jobs.compact import main

if __name__ == "__main__":
    raise SystemExit(main())
