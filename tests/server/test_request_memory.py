"""Memory for requests: what a size prefix declares is not allocated before its bytes arrive,
the bytes of requests being received or handled are bounded across the broker
(``queued.max.request.bytes``: clients wait, they do not fail), a frame over
``socket.request.max.bytes`` closes its connection with a line saying so, and a half-sent
frame's reservation goes with its connection at ``connections.max.idle.ms``."""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time

from odradek.protocol.framing import SCRATCH_SIZE
from odradek.testing.broker import InProcessBroker
from tests.server.test_bad_input import create_topic, fetch_values
from tests.server.test_connection_reads import big_batch, check_answers, produce_frames
from tests.server.wire import WireClient, fetch_body, produce_body, simple_batch

DECLARED = 100_000_000


def wait_for(condition, timeout: float = 10.0, what: str = "") -> None:
    """Poll ``condition`` (state the broker's thread changes) until it holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what or condition}"
        time.sleep(0.01)


def half_sent(bootstrap: str, declared: int = DECLARED, body: int = 1000) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    sock.sendall(struct.pack(">i", declared) + b"\0" * body)
    return sock


def connections_in_frame(b: InProcessBroker, declared: int) -> list:
    return [c for c in list(b.broker.connections) if c.parser.declared == 4 + declared]


def test_half_sent_frames_declaring_100_mb_allocate_what_arrived(broker):
    """Ten connections each declare 100 MB and send 1000 bytes: the broker holds a few
    receive buffers' worth, not a gigabyte (it zero-filled 100 MB per prefix before)."""
    socks = [half_sent(broker.bootstrap) for _ in range(10)]
    wait_for(lambda: len(connections_in_frame(broker, DECLARED)) == 10, what="ten prefixes read")
    conns = connections_in_frame(broker, DECLARED)
    total = sum(c.parser.allocated for c in conns)
    assert total <= 10 * 3 * SCRATCH_SIZE
    # Sending more makes the buffer follow the bytes received, not the declared size.
    socks[0].sendall(b"\0" * 1_000_000)
    port = socks[0].getsockname()[1]
    conn = next(c for c in conns if c.peer == f"127.0.0.1:{port}")
    wait_for(lambda: conn.parser.buffered == 1_001_000, what="a megabyte received")
    assert conn.parser.allocated <= SCRATCH_SIZE + 2 * 1_001_000 + SCRATCH_SIZE
    # Other clients are served meanwhile.
    client = WireClient(broker.bootstrap)
    create_topic(client, "served")
    client.close()
    for s in socks:
        s.close()


def test_a_half_sent_frame_is_released_at_the_idle_timeout(tmp_path):
    with InProcessBroker(tmp_path / "data", connections_max_idle_ms=300) as b:
        sock = half_sent(b.bootstrap)
        wait_for(lambda: b.broker.memory_pool.used == 4 + DECLARED, what="the frame reserved")
        sock.settimeout(10)
        assert sock.recv(1) == b""  # closed by the broker as idle
        wait_for(lambda: b.broker.memory_pool.used == 0, what="the reservation released")
        sock.close()


def test_a_frame_over_socket_request_max_bytes_closes_with_a_clear_line(tmp_path, caplog):
    with InProcessBroker(tmp_path / "data", socket_request_max_bytes=1_000_000) as b:
        with caplog.at_level(logging.WARNING, logger="odradek.server"):
            sock = half_sent(b.bootstrap, declared=1_000_001, body=10)
            sock.settimeout(10)
            assert sock.recv(1) == b""
            wait_for(lambda: any("1000001" in r.getMessage() for r in caplog.records), what="the log line")
        line = next(r.getMessage() for r in caplog.records if "1000001" in r.getMessage())
        assert "socket.request.max.bytes" in line and "1000000" in line
        assert b.broker.memory_pool.used == 0
        sock.close()


def test_queued_max_request_bytes_pauses_clients_and_answers_every_request(tmp_path):
    """With the pool full (a ~500 KB request admitted and half received), a second client's
    requests wait unread (its connection stops reading) instead of failing; once the first
    request completes, every request of both is answered and stored."""
    limit = 200_000
    with InProcessBroker(tmp_path / "data", queued_max_request_bytes=limit) as b:
        pool = b.broker.memory_pool
        first, second = WireClient(b.bootstrap), WireClient(b.bootstrap)
        create_topic(first, "big")
        big, big_values = big_batch(0, count=4000)  # ~500 KB: over the whole limit
        (big_frame,) = produce_frames(first, "big", [big])
        assert len(big_frame) > 2 * limit
        half = len(big_frame) // 2
        first.send_raw(big_frame[:half])
        wait_for(lambda: pool.used == len(big_frame), what="the big request admitted")
        assert pool.exhausted

        made = [big_batch(i, count=500) for i in range(1, 6)]  # ~100-250 KB each
        frames = produce_frames(second, "big", [m for m, _ in made])
        # (From a thread: the broker stops reading, so the socket buffers may fill.)
        sender = threading.Thread(target=second.send_raw, args=(b"".join(frames),))
        sender.start()
        port = second.sock.getsockname()[1]
        conn = next(c for c in list(b.broker.connections) if c.peer == f"127.0.0.1:{port}")
        wait_for(lambda: conn._reading_paused, what="the second client paused")
        assert not conn.closed and pool.waits >= 1
        assert pool.used <= len(big_frame) + max(len(f) for f in frames)

        first.send_raw(big_frame[half:])
        check_answers(first, 1)
        check_answers(second, len(frames))
        sender.join()
        wait_for(lambda: pool.used == 0, what="every reservation released")
        expected = big_values + [v for _, values in made for v in values]
        got = []
        while len(got) < len(expected):
            got += fetch_values(first, "big", len(got))
        assert got == expected
        first.close()
        second.close()


def test_a_produce_request_of_tiny_entries_closes_its_connection_only(broker, caplog):
    """Three megabytes of empty topics would decode into ~64 MB of objects: the broker
    refuses the request (closing its connection with a line naming the bound) and serves
    everyone else."""
    from tests.protocol.test_produce_codec import tiny_entries_frame

    frame = tiny_entries_frame(9, 1_000_000)
    hostile = WireClient(broker.bootstrap)
    with caplog.at_level(logging.WARNING, logger="odradek.server"):
        hostile.send_raw(struct.pack(">i", len(frame)) + frame)
        assert hostile.is_closed()
    assert any("entries than its size allows" in r.getMessage() for r in caplog.records)
    client = WireClient(broker.bootstrap)
    create_topic(client, "after")
    wait_for(lambda: broker.broker.memory_pool.used == 0, what="the request released")
    client.close()
    hostile.close()


def test_a_client_that_stops_reading_is_closed_at_the_idle_timeout(tmp_path):
    """A client that pipelines big fetches, never reads the answers, and leaves a request
    half sent: the broker stops reading from it (backpressure), and once it has been silent
    for connections.max.idle.ms closes it, releasing what its half-sent request reserved
    (requests pending used to keep such a connection open for ever)."""
    with InProcessBroker(tmp_path / "data", queued_max_requests=20, connections_max_idle_ms=500,
                         queued_max_request_bytes=10_000_000) as b:
        c = WireClient(b.bootstrap)
        create_topic(c, "big")
        for _ in range(4):
            c.request("Produce", 9, produce_body("big", 0, simple_batch([b"x" * 200_000])))
        slow = WireClient(b.bootstrap)
        slow.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        frame = slow.frame("Fetch", 11, fetch_body("big", 0, 0))
        slow.sock.settimeout(2)
        try:
            for _ in range(2000):
                slow.send_raw(frame)
            slow.send_raw(struct.pack(">i", 5_000_000) + b"\0" * 100)  # never completed
        except (TimeoutError, OSError):
            pass  # the broker stopped reading from us
        port = slow.sock.getsockname()[1]
        wait_for(lambda: all(x.peer != f"127.0.0.1:{port}" for x in list(b.broker.connections)),
                 timeout=20, what="the silent connection closed")
        wait_for(lambda: b.broker.memory_pool.used == 0, what="its reservations released")
        c.close()


def rss_bytes(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_ten_half_sent_100_mb_frames_leave_the_broker_process_rss_flat(tmp_path):
    """The measurement that found it, on a broker process of its own: ten connections each
    declaring 100 MB and sending 1000 bytes grew its RSS by 1 GB; now by a few buffers."""
    from odradek.testing.broker import BrokerProcess

    with BrokerProcess(tmp_path / "data") as b:
        probe = WireClient(b.bootstrap)
        create_topic(probe, "warm")  # the broker's steady state before measuring
        before = rss_bytes(b.pid)
        socks = [half_sent(b.bootstrap) for _ in range(10)]
        late = WireClient(b.bootstrap)  # answered after the loop read the ten others' bytes
        create_topic(late, "after")
        assert rss_bytes(b.pid) - before < 32 << 20
        for s in socks:
            s.close()
        late.close()
        probe.close()


def test_a_quiet_connection_gives_back_its_grown_receive_buffer(tmp_path):
    """A producer's 1 MB request grows its connection's receive buffer (kept while requests
    keep coming); once the connection is quiet, the buffer goes back to its first size
    (it used to be kept until the connection closed: 2 MiB per connection that ever sent one)."""
    with InProcessBroker(tmp_path / "data", connections_max_idle_ms=2000) as b:
        client = WireClient(b.bootstrap)
        create_topic(client, "big")
        batch, _ = big_batch(0, count=4000)
        (frame,) = produce_frames(client, "big", [batch])
        client.send_raw(frame)
        check_answers(client, 1)
        port = client.sock.getsockname()[1]
        conn = next(c for c in list(b.broker.connections) if c.peer == f"127.0.0.1:{port}")
        assert conn.parser.allocated >= len(frame)
        wait_for(lambda: conn.parser.allocated == SCRATCH_SIZE, what="the buffer given back")
        assert not conn.closed
        client.send_raw(frame)  # and it grows again for the next one
        check_answers(client, 1)
        client.close()


def test_an_idle_close_is_routine_not_a_warning(tmp_path, caplog):
    """Clients leave idle connections open as a matter of course: their close is a DEBUG line,
    as in Kafka's Selector, not a WARNING."""
    with InProcessBroker(tmp_path / "data", connections_max_idle_ms=300) as b:
        with caplog.at_level(logging.DEBUG, logger="odradek.server"):
            sock = socket.create_connection(("127.0.0.1", b.port))
            sock.settimeout(10)
            assert sock.recv(1) == b""  # closed by the broker as idle
            wait_for(lambda: any("idle for more than" in r.getMessage() for r in caplog.records),
                     what="the idle close's line")
        idle = [r for r in caplog.records if "idle for more than" in r.getMessage()]
        assert {r.levelno for r in idle} == {logging.DEBUG}
        sock.close()
