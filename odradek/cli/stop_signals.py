"""How ``odradek consume`` stops on Ctrl-C (SIGINT) or SIGTERM: within 2 s of the signal,
even when its brokers are gone.

A console consumer waits on brokers at its start (metadata, joining the group, positions)
and at its end (committing what it printed, leaving its group), and the client waits for an
answer up to ``request.timeout.ms`` (30 s) or ``default.api.timeout.ms`` (60 s): with the
broker gone (killed, or stopped and not answering) nothing answers. So:

- the signal handlers only note the signal (``StopSignals``); nothing is raised into the
  code that prints a record and counts it, so what was printed is what is committed;
- the start runs on a thread of its own (``run_until_stopped``): a signal during it ends
  the command at once, leaving the half-started consumer to the process's exit (nothing was
  printed, nothing is committed);
- records are read between checks of the signal, each poll at most half a second;
- the last steps get what is left of ``SHUTDOWN_SECONDS`` (1.5 s) after the signal, on a
  thread of their own (``finish``): the command ends when they are done or the time is up,
  saying on standard error what it could not finish. Records printed but not committed are
  read again by the group's next member (at least once), as when any consumer dies.

With the brokers up these steps take milliseconds, so a signal changes nothing else. The
threads left behind are daemons, silenced: the process exits without waiting for them. Signals reach
the main thread only: run in another thread (tests drive the command in process), nothing
is installed and no signal is ever noted.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time

SHUTDOWN_SECONDS = 1.5
_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_WAKE_SECONDS = 0.05  # how often a wait for a thread looks at the signal


class StopSignals:
    """SIGINT and SIGTERM noted in ``event`` for the life of a ``with`` block."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signalled_at: float | None = None
        self._previous: dict = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self._on_signal) for s in _SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)

    def _on_signal(self, signum, frame) -> None:
        if self.signalled_at is None:
            self.signalled_at = time.monotonic()
        self.event.set()

    def is_set(self) -> bool:
        return self.event.is_set()

    def seconds_left(self) -> float:
        """What is left of SHUTDOWN_SECONDS since the signal (all of it without one)."""
        if self.signalled_at is None:
            return SHUTDOWN_SECONDS
        return max(0.0, SHUTDOWN_SECONDS - (time.monotonic() - self.signalled_at))


def run_until_stopped(work, stop: StopSignals):
    """``work()``'s result, its exception raised here; None when a signal comes first (the
    thread running it is left behind)."""
    outcome: list = []

    def run() -> None:
        try:
            outcome.append((True, work()))
        except BaseException as e:  # noqa: BLE001 - raised again in the caller's thread
            outcome.append((False, e))

    worker = threading.Thread(target=run, name="odradek-consume-start", daemon=True)
    worker.start()
    while worker.is_alive() and not stop.is_set():
        worker.join(_WAKE_SECONDS)
    if not outcome:
        _abandon()
        return None
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def finish(steps, stop: StopSignals, what: str) -> None:
    """Run ``steps()``: in this thread when no signal came (its errors raised as usual);
    after a signal, on a daemon thread for at most what is left of SHUTDOWN_SECONDS, then
    one line on standard error if it failed or did not end in time."""
    if not stop.is_set():
        steps()
        return
    failure: list[BaseException] = []

    def run() -> None:
        try:
            steps()
        except BaseException as e:  # noqa: BLE001 - said below, in one line
            failure.append(e)

    worker = threading.Thread(target=run, name="odradek-consume-finish", daemon=True)
    worker.start()
    worker.join(stop.seconds_left())
    if worker.is_alive():
        _abandon()
        print(f"odradek consume: stopped before it could {what} (no answer within {SHUTDOWN_SECONDS:g} s "
              "of the signal); records printed since the last commit will be read again", file=sys.stderr)
    elif failure:
        text = " ".join(str(failure[0]).split()) or type(failure[0]).__name__
        print(f"odradek consume: could not {what}: {text}", file=sys.stderr)


def _abandon() -> None:
    """Silence the threads left behind: the client's warnings about brokers that do not answer
    would otherwise come after the command's last line, or be half-written to standard error
    when the process exits (which Python may abort on, when a daemon thread holds its lock)."""
    logging.disable(logging.CRITICAL)
