"""The seeded soak: a randomized workload with faults and an auditor, replayable by seed.

    .venv/bin/python -m tests.faults.soak --seed 123 --minutes 1      (or make soak SEED=123 MINUTES=1)

One ``random.Random(seed)`` makes every choice (which scenario next, which writer, which
faults, kill points, clock skews, child seeds). Timing between threads and processes is
real, so a replay repeats the same choices, not necessarily the same interleaving.

A run opens a writer and both long-lived readers, then repeats until the time or the
episode budget is spent: a few background steps (writes, flushes, new writers fencing old
ones, checkpoints created and deleted, compactions, GC, reads), then one scenario of
:data:`tests.faults.scenarios.SCENARIOS` (scenarios are dealt from a shuffled deck, so a
short run covers many). At the end every child is killed, every handle closed, one more
GC runs and the final audit checks every acknowledged write through both readers.

On failure it prints the seed, the replay commands, where the database was kept and the
last events, and exits 1.
"""

from __future__ import annotations

import argparse
import faulthandler
import logging
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.faults import auditor
from tests.faults.scenarios import SCENARIOS, Scenario, background
from tests.faults.scenarios.common import gc_now, open_writer, readers, write_some
from tests.faults.world import World

MAX_EPISODES = 100_000
FULL_ROUND_GRACE_S = 60.0
"""With ``full_round``, a run goes on past its time until every scenario ran once, up to
this much longer."""
WATCHDOG_GRACE_S = 90.0
HUNG_AFTER_S = 75.0
"""A run this long past its time (a scenario overruns by seconds, not minutes) is hung."""


class SoakFailure(AssertionError):
    """A soak run failed; the message carries the seed and the replay command."""


@dataclass
class SoakResult:
    seed: int
    episodes: int
    seconds: float
    covered: dict[str, int] = field(default_factory=dict)
    ledger: dict[str, int] = field(default_factory=dict)
    events: list[str] = field(default_factory=list)

    def summary(self) -> str:
        ids = " ".join(f"{k}x{v}" for k, v in sorted(self.covered.items()))
        return (f"soak seed {self.seed}: ok, {self.episodes} episodes in {self.seconds:.1f}s, "
                f"writes {self.ledger}; scenarios {ids}")


def replay_command(seed: int, minutes: float, only: Sequence[str] | None = None) -> str:
    m = f"{minutes:g}"
    direct = f".venv/bin/python -m tests.faults.soak --seed {seed} --minutes {m}"
    if only:
        direct += f" --only {','.join(only)}"
    if direct.endswith(m):
        return f"make soak SEED={seed} MINUTES={m}\n    or: {direct}"
    return direct


class Deck:
    """Scenarios dealt in a seeded shuffled order, each once per round."""

    def __init__(self, world: World, only: Sequence[str] | None = None) -> None:
        self.world = world
        self.only = set(only or ())
        self.cards: list[Scenario] = []
        self.rounds = 0

    def deal(self) -> Scenario:
        if not self.cards:
            self.cards = [s for s in SCENARIOS
                          if not s.pending and (not self.only or s.id in self.only)]
            self.rounds += 1
            self.world.rng.shuffle(self.cards)
        return self.cards.pop()


def _episodes(world: World, only: Sequence[str] | None, full_round: bool) -> None:
    rng = world.rng
    open_writer(world)
    write_some(world, 30)
    readers(world)
    deck = Deck(world, only)
    hard_stop = world.deadline + FULL_ROUND_GRACE_S

    def more() -> bool:
        if world.episode >= world.max_episodes or time.monotonic() > hard_stop:
            return False
        return world.time_left() > 0 or (full_round and deck.rounds == 1 and bool(deck.cards))

    while more():
        world.episode += 1
        for _ in range(rng.randint(0, 2)):
            background(world)
        scenario = deck.deal()
        world.log(f"scenario {scenario.id}: {scenario.title}")
        scenario.run(world)


def run_soak(seed: int, *, minutes: float, max_episodes: int = MAX_EPISODES,
             root: Path | None = None, keep: bool = False,
             only: Sequence[str] | None = None, full_round: bool = False) -> SoakResult:
    """Run one seed for ``minutes`` (or ``max_episodes``; with ``full_round``, at least
    until every scenario ran once); raise :class:`SoakFailure`."""
    work = root or Path(tempfile.mkdtemp(prefix=f"slatelib-soak-{seed}-"))
    work.mkdir(parents=True, exist_ok=True)
    world = World(seed, work, deadline=time.monotonic() + minutes * 60.0,
                  max_episodes=max_episodes)
    watchdog = threading.Timer(minutes * 60.0 + HUNG_AFTER_S, _hung, args=(world, seed, minutes))
    watchdog.daemon = True
    watchdog.start()
    failed = True
    try:
        try:
            _episodes(world, only, full_round)
        finally:
            world.log("shutdown: every child killed, every writer and reader closed")
            world.close()
        gc_now(world, kind="slatelib", min_age=0.5, what="final gc")
        auditor.final_audit(world)
        failed = False
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        scenario = next((e for e in reversed(world.events) if "scenario " in e), "(none)")
        (work / "events.log").write_text("\n".join(world.events) + "\n")
        events = "\n  ".join(world.events[-40:])
        raise SoakFailure(
            f"SOAK FAILED: seed {seed}, episode {world.episode}: "
            f"{type(exc).__name__}: {exc}\n"
            f"last scenario: {scenario}\n"
            f"replay: {replay_command(seed, minutes, only)}\n"
            f"database kept at {work} (every event in {work / 'events.log'})\n"
            f"last events:\n  {events}") from exc
    finally:
        watchdog.cancel()
        if not failed and not keep and root is None:
            shutil.rmtree(work, ignore_errors=True)
    return SoakResult(seed, world.episode, time.monotonic() - world.started,
                      dict(world.covered), world.ledger.counts(), list(world.events))


def _hung(world: World, seed: int, minutes: float) -> None:
    """The run is past its time by far: save the events and say so (the faulthandler
    watchdog of :func:`main` then dumps every thread's stack and exits)."""
    (world.root / "events.log").write_text("\n".join(world.events) + "\n")
    events = "\n  ".join(world.events[-30:])
    print(f"SOAK HUNG: seed {seed}, episode {world.episode}\n"
          f"replay: {replay_command(seed, minutes)}\n"
          f"database kept at {world.root} (every event in {world.root / 'events.log'})\n"
          f"last events:\n  {events}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.faults.soak", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--minutes", type=float, default=1.0)
    p.add_argument("--episodes", type=int, default=MAX_EPISODES)
    p.add_argument("--root", type=Path, default=None, help="work directory (default: a temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    p.add_argument("--only", default=None,
                   help="comma-separated scenario ids to deal (default: all)")
    p.add_argument("-v", "--verbose", action="store_true", help="print the event log")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.CRITICAL)
    # A hung run dumps every thread's stack and exits (every wait of the harness is bounded;
    # this catches one that is not).
    faulthandler.dump_traceback_later(args.minutes * 60.0 + WATCHDOG_GRACE_S, exit=True)
    print(f"soak seed {args.seed} for {args.minutes:g} min; replay: "
          f"{replay_command(args.seed, args.minutes)}", flush=True)
    try:
        result = run_soak(args.seed, minutes=args.minutes, max_episodes=args.episodes,
                          root=args.root, keep=args.keep,
                          only=args.only.split(",") if args.only else None)
    except SoakFailure as exc:
        print(str(exc), file=sys.stderr, flush=True)
        return 1
    if args.verbose:
        print("\n".join(result.events))
    print(result.summary(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
