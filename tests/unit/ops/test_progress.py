"""The progress shell: a terminal line rewritten in place, a log line per interval, nothing
when none is installed, and the flags."""

from __future__ import annotations

import argparse
import io

from slatelib.ops import progress
from slatelib.ops.progress import (
    ProgressOutput,
    add_progress_args,
    progress_output,
    progress_output_from_args,
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_terminal_gets_one_line_rewritten_at_most_ten_times_a_second() -> None:
    stream, clock = io.StringIO(), Clock()
    out = ProgressOutput(stream, tty=True, clock=clock)
    p = out.start("gc delete", total=1000)
    for i in range(1, 101):  # 100 updates over 1 s
        clock.now = i / 100
        p.update(i * 10)
    p.finish()
    text = stream.getvalue()
    assert text.endswith("\n") and text.count("\n") == 1
    frames = text.split("\r")[1:]
    assert 9 <= len(frames) <= 12  # ~10 rewrites plus the last line
    assert all(f.rstrip("\n").endswith("\x1b[K") for f in frames)
    assert frames[-1] == "gc delete  1,000/1,000 objects  1,000/s  done in 1.0s\x1b[K\n"


def test_a_log_gets_a_plain_line_per_interval_and_the_last_one() -> None:
    stream, clock = io.StringIO(), Clock()
    out = ProgressOutput(stream, tty=False, interval_s=10.0, clock=clock)
    p = out.start("gc list db/wal")
    for second in range(1, 26):
        clock.now = float(second)
        p.update(second * 100)
    p.finish()
    p.finish()  # once only
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue()
    assert lines == ["gc list db/wal  1,000 objects  100/s",
                     "gc list db/wal  2,000 objects  100/s",
                     "gc list db/wal  2,500 objects  100/s  done in 25.0s"]


def test_interval_zero_logs_only_the_last_line() -> None:
    stream, clock = io.StringIO(), Clock()
    out = ProgressOutput(stream, tty=False, interval_s=0.0, clock=clock)
    with out.start("export db", unit="tasks") as p:
        for t in range(1, 50):
            clock.now = t
            p.update(t, total=100)
    assert stream.getvalue().splitlines() == ["export db  49/100 tasks  1/s  done in 49.0s"]


def test_nothing_is_written_without_an_installed_output() -> None:
    assert progress.current() is None
    p = progress.start("gc delete", total=5)
    p.update(3)
    p.add(2)
    p.finish()
    assert p.state.done == 0  # a no-op: not even counted


def test_flags_install_an_output_for_the_block_only() -> None:
    parser = argparse.ArgumentParser()
    add_progress_args(parser)
    stream = io.StringIO()  # not a terminal
    for argv, default, on in [([], None, False), ([], True, True), (["--progress"], None, True),
                              (["--no-progress"], True, False)]:
        args = parser.parse_args(argv)
        with progress_output_from_args(args, default=default, stream=stream) as out:
            assert (out is not None) is on and (progress.current() is out)
        assert progress.current() is None
    args = parser.parse_args(["--progress", "--progress-interval", "2.5"])
    with progress_output_from_args(args, stream=stream) as out:
        assert out is not None and (out.tty, out.interval_s) == (False, 2.5)
        progress.start("gc list db/wal").finish(7)
    assert stream.getvalue().startswith("gc list db/wal  7 objects")


def test_a_closed_stderr_never_fails_the_work() -> None:
    stream, clock = io.StringIO(), Clock()
    out = ProgressOutput(stream, tty=True, clock=clock)
    p = out.start("gc delete", total=3)
    stream.close()
    clock.now = 1.0
    p.add(3)
    p.finish()
    out.end_line()
    assert p.state.done == 3


def test_threads_adding_at_once_lose_nothing() -> None:
    import threading

    out = ProgressOutput(io.StringIO(), tty=False, interval_s=0.0, clock=Clock())
    p = out.start("compact db", unit="bytes")
    workers = [threading.Thread(target=lambda: [p.add(1) for _ in range(2000)])
               for _ in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert p.state.done == 16_000


def test_on_a_terminal_a_log_record_ends_the_open_line_first() -> None:
    import logging

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with progress_output(True, stream=stream, tty=True) as out:
            assert out is not None
            progress.start("gc list db/wal").update(5)
            logging.getLogger("slatelib.test").warning("a log line")
        logging.getLogger("slatelib.test").warning("after")
    finally:
        root.removeHandler(handler)
    text = stream.getvalue()
    assert "\x1b[K\na log line\n" in text
    assert text.endswith("a log line\nafter\n")
    assert not handler.filters  # detached with the output
