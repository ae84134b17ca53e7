"""A broker in a child process: ``odradek broker`` started with Kafka-named overrides, its own
GIL, found by the bootstrap address it prints.

Contract: ``start`` returns once the child printed ``--bootstrap-server HOST:PORT`` (then
``bootstrap`` is that address), or raises RuntimeError with the child's last output when it
exits or stays silent for ``timeout`` seconds (it is killed then). The child's output (stdout
and stderr, merged) is kept in ``output``, read by a daemon thread so the child never blocks
on a full pipe. ``stop`` asks for a clean shutdown (SIGTERM, then SIGKILL after ``timeout``);
``kill`` is kill -9: no flush, no checkpoint, no clean-shutdown marker.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Self

__all__ = ["BrokerChildProcess"]

_BOOTSTRAP = re.compile(r"--bootstrap-server (\S+)")


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
        args = [sys.executable, "-m", "odradek.cli.main", "broker", "--log-level", "WARNING"]
        for key, value in self.props.items():
            args += ["--override", f"{key}={value}"]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
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
