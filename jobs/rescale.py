"""``spark-submit jobs/rescale.py [options]``: the entry script of the installed job
:mod:`slatelib.jobs.rescale` (its options: ``spark-submit jobs/rescale.py --help``, or
``slate-spark rescale --help``). The code lives in slatelib, which the driver's Python must have
installed; executors get it from the packed env (``--archives dist/slatelib-executor-env.tar.gz#env``).
"""

from slatelib.jobs.rescale import main

if __name__ == "__main__":
    raise SystemExit(main())
