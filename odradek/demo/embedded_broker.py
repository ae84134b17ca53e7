"""The demo's own broker: ``odradek broker`` in a child process (its own GIL, so producing
and Spark's readers do not slow it down), on an ephemeral 127.0.0.1 port, with its data in
the demo's directory so a later run finds the earlier runs' topics.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

__all__ = ["EmbeddedBroker"]


class EmbeddedBroker:
    def __init__(self, data_dir: Path, partitions: int = 4) -> None:
        self.data_dir = Path(data_dir)
        self.partitions = partitions
        self.proc: subprocess.Popen | None = None
        self.bootstrap: str | None = None
        self.output: list[str] = []

    def start(self, timeout: float = 60) -> "EmbeddedBroker":
        self.data_dir.mkdir(parents=True, exist_ok=True)
        props = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(self.data_dir), "node.id": "1",
                 "num.partitions": str(self.partitions), "log.cleaner.backoff.ms": "5000"}
        args = [sys.executable, "-m", "odradek.cli.main", "broker", "--log-level", "WARNING"]
        for key, value in props.items():
            args += ["--override", f"{key}={value}"]
        # A session of its own: Ctrl-C in the terminal is for the demo, which then still
        # needs its broker to drain the streams and report.
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env=dict(os.environ, PYTHONUNBUFFERED="1"), start_new_session=True)
        timer = threading.Timer(timeout, self.proc.kill)
        timer.start()
        try:
            for line in self.proc.stdout:
                self.output.append(line)
                found = re.search(r"--bootstrap-server (\S+)", line)
                if found:
                    self.bootstrap = found.group(1)
                    break
        finally:
            timer.cancel()
        if self.bootstrap is None:
            raise RuntimeError("the embedded broker did not start:\n" + "".join(self.output[-20:]))
        threading.Thread(target=self._drain, daemon=True).start()
        return self

    def _drain(self) -> None:
        for line in self.proc.stdout:
            self.output.append(line)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)

    def __enter__(self) -> "EmbeddedBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
