"""The demo's own broker: ``odradek broker`` in a child process (its own GIL, so producing
and Spark's readers do not slow it down), on an ephemeral 127.0.0.1 port, with its data in
the demo's directory so a later run finds the earlier runs' topics.
"""

from __future__ import annotations

from pathlib import Path
from typing import Self

from odradek.server.child_process import BrokerChildProcess

__all__ = ["EmbeddedBroker"]


class EmbeddedBroker(BrokerChildProcess):
    def __init__(self, data_dir: Path, partitions: int = 4) -> None:
        self.data_dir = Path(data_dir)
        self.partitions = partitions
        props = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(self.data_dir), "node.id": "1",
                 "num.partitions": str(partitions), "log.cleaner.backoff.ms": "5000"}
        # A session of its own: Ctrl-C in the terminal is for the demo, which then still
        # needs its broker to drain the streams and report.
        super().__init__(props, new_session=True)

    def start(self, timeout: float = 60) -> Self:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        return super().start(timeout)
