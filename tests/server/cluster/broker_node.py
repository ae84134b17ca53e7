"""One broker child process of a test cluster (`BrokerNode`), and reading its log bytes.

The process control (fixed id, port and data directory across restarts; kill, pause, resume,
terminate; death with the test process through ``PR_SET_PDEATHSIG``, so start nodes from the
test's main thread) is odradek's own, odradek/server/local_cluster/broker_node.py; this
subclass adds the cluster tests' settings, one output file per start (``broker-<n>.log`` in its
directory), and reading a replica's log. See harness.py for the cluster around the nodes.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from odradek.server.local_cluster import broker_node
from odradek.server.local_cluster.broker_node import free_port  # noqa: F401 - re-exported for the tests
from odradek.testing.local_cluster import QUICK_PROPS

REPO_ROOT = Path(__file__).resolve().parents[3]
SESSION_TIMEOUT_MS = int(QUICK_PROPS["zookeeper.session.timeout.ms"])

# Broker settings every cluster test shares: Kafka's names, small and quick.
BASE_PROPS = {
    **QUICK_PROPS,
    "controlled.shutdown.enable": "true",
    "auto.leader.rebalance.enable": "false",
    "auto.create.topics.enable": "false",
    # Deleted logs are renamed "-delete" and erased this long after, by the retention pass.
    "log.segment.delete.delay.ms": "200",
    "log.retention.check.interval.ms": "1000",
    "num.partitions": "1",
}


def log_batches(data: bytes) -> list[tuple[int, int, bytes]]:
    """``(base_offset, last_offset, raw bytes)`` of each whole v2 batch framed in ``data``
    (baseOffset int64, batchLength int32, ...; lastOffsetDelta int32 at byte 23), stopping at
    a partial or zero-length tail (what a crash or a space reservation leaves)."""
    out, pos = [], 0
    while pos + 12 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        end = pos + 12 + length
        if length <= 0 or end > len(data):
            break
        last_delta = struct.unpack_from(">i", data, pos + 23)[0] if length >= 15 else 0
        out.append((base, base + last_delta, bytes(data[pos:end])))
        pos = end
    return out


class BrokerNode(broker_node.BrokerNode):
    """One broker process of a cluster: fixed id, port and data directory across restarts.
    ``placement`` is passed on to odradek's node: ``port``, ``host``, ``command_prefix``
    (tests/server/cluster/netns_cluster.py runs each broker in a network namespace)."""

    def __init__(self, broker_id: int, directory: Path, connect: str, props: dict[str, str],
                 **placement) -> None:
        env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
        super().__init__(broker_id, directory, {**BASE_PROPS, "zookeeper.connect": connect, **props},
                         log_level=os.environ.get("ODRADEK_CLUSTER_LOG_LEVEL", "INFO"), env=env, **placement)

    @property
    def log_path(self) -> Path:
        return self.directory / f"broker-{self.starts}.log"

    # --- its data --------------------------------------------------------------------------

    def partition_dir(self, topic: str, partition: int) -> Path:
        return self.data_dir / f"{topic}-{partition}"

    def partition_dirs(self, topic: str) -> list[Path]:
        """This broker's directories of ``topic``'s partitions, live ones and ones awaiting
        deletion (``<topic>-<p>.<uuid>-delete``)."""
        if not self.data_dir.is_dir():
            return []
        prefix = topic + "-"
        found = []
        for entry in self.data_dir.iterdir():
            if not entry.is_dir() or not entry.name.startswith(prefix):
                continue
            rest = entry.name[len(prefix):].split(".", 1)[0]
            if rest.isdigit():
                found.append(entry)
        return sorted(found)

    def partition_log(self, topic: str, partition: int) -> bytes:
        """The replica's batches, in offset order, as bytes (b"" when it has no such log)."""
        directory = self.partition_dir(topic, partition)
        if not directory.is_dir():
            return b""
        segments = sorted((p for p in directory.glob("*.log") if p.stem.isdigit()), key=lambda p: int(p.stem))
        out = []
        for path in segments:
            try:
                data = path.read_bytes()
            except FileNotFoundError:  # a segment deleted (retention, truncation) meanwhile
                continue
            out.extend(batch for _, _, batch in log_batches(data))
        return b"".join(out)

    def log_end_offset(self, topic: str, partition: int) -> int:
        batches = log_batches(self.partition_log(topic, partition))
        return batches[-1][1] + 1 if batches else 0
