"""ZooKeeperStore after a ZooKeeper outage: it keeps trying about once a second and is
connected again soon after ZooKeeper returns (``zookeeper_store._CONNECTION_RETRY``), and
`connected` says so.

kazoo's default backoff doubles with a 40% jitter up to an hour: 11 s into an outage it waits
~3-10 s between attempts, and after a 20 s outage brokers found ZooKeeper back 13-14 s late.
While ZooKeeper is stopped, a listener holds its port and notes each connection attempt (it
closes them at once), so the test sees the backoff itself, not only one draw of its jitter:
after the first 2 s no gap between attempts may exceed 3 s (the 1 s cap allows 1.4 s; the
default's gaps there exceed 3 s in more than 99% of runs: that bound is what tells the cap
from the default). Then ZooKeeper starts again on the same port and data directory, and the
store must be connected again, with its data: within 15 s, a bound for a machine busy with
the rest of the suite (a full run once took over 5 s there; with the cap the store tries
every ~1.4 s at most).

The store's session timeout here is `SESSION_TIMEOUT_S`, not the default 18 s: ZooKeeper
listens a moment before it serves, and a connection made in that moment gets no answer to its
handshake, which kazoo (as ZooKeeper's Java client) waits for up to the session timeout. With
18 s that one unlucky attempt alone exceeded the 15 s bound (seen under load: connected 19 s
after the restart); with 5 s the store is connected again within ~7 s even then.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid

import pytest

from odradek.metadata.zookeeper_store import ZooKeeperStore
from odradek.server.local_cluster.zookeeper_server import ZooKeeperServer, free_port, zookeeper_installed
from tests.metadata.store_contract import wait_for

OUTAGE_S = 11.0
STEADY_AFTER_S = 2.0  # the backoff's first steps, 0.1 s doubling, reach the cap by then
LONGEST_GAP_S = 3.0
RECONNECT_LIMIT_S = 15.0
SESSION_TIMEOUT_S = 5.0  # within the test server's [1, 10] s (tickTime 500 ms)


class AttemptRecorder:
    """A listener on ``port`` in ZooKeeper's place: accepts each connection, notes when
    (``time.monotonic()``), and closes it before any answer, as a server going away does."""

    def __init__(self, port: int) -> None:
        self.times: list[float] = []
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", port))
        self._sock.listen(16)
        self._sock.settimeout(0.1)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            self.times.append(time.monotonic())
            conn.close()

    def close(self) -> None:
        self._done.set()
        self._thread.join()
        self._sock.close()


def longest_gap(times: list[float], start: float, end: float) -> float:
    """The longest stretch of ``[start, end]`` without an attempt."""
    points = [start] + [t for t in times if start < t < end] + [end]
    return max(b - a for a, b in zip(points, points[1:]))


@pytest.fixture
def zookeeper_to_stop(tmp_path):
    """A ZooKeeper of this test's own, on a port it keeps across restarts."""
    if not zookeeper_installed():
        pytest.skip("ZooKeeper is not installed: apt-get install zookeeper")
    server = ZooKeeperServer(tmp_path / "zookeeper", port=free_port())
    server.start()
    yield server
    server.stop()


def test_the_store_is_connected_again_soon_after_zookeeper_returns(zookeeper_to_stop):
    server = zookeeper_to_stop
    with ZooKeeperStore(server.hosts, f"/reconnect-{uuid.uuid4().hex[:8]}",
                        session_timeout=SESSION_TIMEOUT_S) as store:
        store.create("/kept", b"v")
        assert store.connected
        server.stop()
        wait_for(lambda: not store.connected, "the store to see ZooKeeper gone")
        recorder = AttemptRecorder(server.port)
        began = time.monotonic()
        time.sleep(OUTAGE_S)
        recorder.close()
        gap = longest_gap(recorder.times, began + STEADY_AFTER_S, began + OUTAGE_S)
        assert gap <= LONGEST_GAP_S, f"no attempt to reconnect for {gap:.1f} s: {recorder.times}"
        assert not store.connected
        server.start()
        wait_for(lambda: store.connected, "the store to reconnect", limit=RECONNECT_LIMIT_S)
        assert store.get("/kept")[0] == b"v"
