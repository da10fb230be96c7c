"""The seeded fault harness (``make soak``; a few seeds run in ``make test``).

A randomized workload of writers (slatelib ``Db`` in and out of process, official 0.17
``Db``), readers (slatelib and official), checkpoints, compactions, GC runs and clones on
one local store, under seeded faults (store errors before and after a call takes effect,
lost responses, latency, SIGKILLed and paused processes, stalled threads, clock skew), with
an auditor that checks every acknowledged write and every referenced object. See
``docs/fault-scenarios.md`` for the scenarios and :mod:`tests.faults.soak` for a run.
"""
