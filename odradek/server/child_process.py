"""Brokers (and a local cluster's ZooKeeper) in child processes.

`broker_command` is the command line of ``odradek broker`` with Kafka-named overrides.

`BrokerChildProcess` is one broker with its own GIL, found by the bootstrap address it prints.
Contract: ``start`` returns once the child printed ``--bootstrap-server HOST:PORT`` (then
``bootstrap`` is that address), or raises RuntimeError with the child's last output when it
exits or stays silent for ``timeout`` seconds (it is killed then). The child's output (stdout
and stderr, merged) is kept in ``output``, read by a daemon thread so the child never blocks
on a full pipe. ``stop`` asks for a clean shutdown (SIGTERM, then SIGKILL after ``timeout``);
``kill`` is kill -9: no flush, no checkpoint, no clean-shutdown marker.

`popen_child` starts the processes of a local cluster (odradek/server/local_cluster/): output
appended to a file, no stdin. ``die_with_parent`` sets ``PR_SET_PDEATHSIG`` (Linux's prctl 1)
to SIGKILL in the forked child before exec: the kernel kills the child when the *thread* that
forked it ends, so a crashed or kill -9'd test run or ``odradek cluster`` leaves no process
behind. Start children from a thread that lives as long as they should (the main thread).
``new_session`` puts the child in a session of its own (``setsid``): Ctrl-C in the terminal
then reaches only the parent, which stops its children in order (brokers first, ZooKeeper last).
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Self

__all__ = ["BrokerChildProcess", "broker_command", "popen_child"]

_BOOTSTRAP = re.compile(r"--bootstrap-server (\S+)")
_PR_SET_PDEATHSIG = 1


def broker_command(props: dict[str, str], log_level: str) -> list[str]:
    """``python -m odradek.cli.main broker --log-level LEVEL --override key=value ...``."""
    args = [sys.executable, "-m", "odradek.cli.main", "broker", "--log-level", log_level]
    for key, value in props.items():
        args += ["--override", f"{key}={value}"]
    return args


def popen_child(args: list[str], output: Path, *, env: dict[str, str] | None = None, cwd: Path | None = None,
                die_with_parent: bool = True, new_session: bool = False) -> subprocess.Popen:
    """Start ``args`` with stdout and stderr appended to ``output``; ``env`` is added to this
    process's environment."""
    output.parent.mkdir(parents=True, exist_ok=True)
    if die_with_parent and sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)  # loaded here, not between fork and exec
        preexec = lambda: libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # noqa: E731
    else:
        preexec = None
    with open(output, "ab") as out:
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=cwd, env={**os.environ, **(env or {})}, preexec_fn=preexec,
                                start_new_session=new_session)


class BrokerChildProcess:
    def __init__(self, props: dict[str, str], *, cwd: Path | None = None, new_session: bool = False,
                 env: dict[str, str] | None = None) -> None:
        """``props``: broker configuration overrides (``listeners``, ``log.dirs``, ...).
        ``new_session``: the child does not get the terminal's Ctrl-C. ``env``: variables set
        for the child on top of this process's environment."""
        self.props = props
        self.cwd = cwd
        self.new_session = new_session
        self.env = env or {}
        self.proc: subprocess.Popen | None = None
        self.bootstrap: str | None = None
        self.output: list[str] = []

    def start(self, timeout: float = 60) -> Self:
        self.proc = subprocess.Popen(broker_command(self.props, "WARNING"), stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True,
                                     env={**os.environ, **self.env, "PYTHONUNBUFFERED": "1"}, cwd=self.cwd,
                                     start_new_session=self.new_session)
        timer = threading.Timer(timeout, self.proc.kill)
        timer.start()
        try:
            for line in self.proc.stdout:
                self.output.append(line)
                found = _BOOTSTRAP.search(line)
                if found:
                    self.bootstrap = found.group(1)
                    break
        finally:
            timer.cancel()
        if self.bootstrap is None:
            self.proc.wait(30)
            raise RuntimeError("the broker did not start:\n" + "".join(self.output[-20:]))
        threading.Thread(target=self._drain, daemon=True).start()
        return self

    def _drain(self) -> None:
        for line in self.proc.stdout:
            self.output.append(line)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self, timeout: float = 60) -> int | None:
        """Clean shutdown; the exit status (None when it was not running)."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.proc.returncode

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
