"""``socket.send.buffer.bytes`` / ``socket.receive.buffer.bytes``: applied to accepted
connections when set, the OS's own sizes when -1 (odradek's default)."""

from __future__ import annotations

import socket

from kafka import KafkaConsumer, KafkaProducer

from odradek.testing.broker import InProcessBroker
from tests.server.clients import unique_topic, wait_until


def _accepted_socket(broker: InProcessBroker, client: socket.socket):
    """The broker's end of ``client``'s connection."""
    port = client.getsockname()[1]

    def find():
        for conn in list(broker.broker.connections):
            sock = conn.transport.get_extra_info("socket")
            if sock is not None and sock.getpeername()[1] == port:
                return sock
        return None

    wait_until(lambda: find() is not None, what="the broker accepted the connection")
    return find()


def _sizes(sock) -> tuple[int, int]:
    return (sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
            sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))


def test_configured_sizes_apply_to_accepted_connections(tmp_path):
    props = {"socket.send.buffer.bytes": "32768", "socket.receive.buffer.bytes": "65536"}
    with InProcessBroker(tmp_path / "data", **props) as b:
        host, port = b.bootstrap.rsplit(":", 1)
        with socket.create_connection((host, int(port))) as client:
            # Linux reports twice the size asked for (the rest is its bookkeeping).
            assert _sizes(_accepted_socket(b, client)) == (2 * 32768, 2 * 65536)


def _os_sizes_of_an_accepted_connection() -> tuple[int, int]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        with socket.create_connection(server.getsockname()):
            accepted, _ = server.accept()
            with accepted:
                return _sizes(accepted)


def test_minus_one_leaves_the_os_sizes(tmp_path):
    os_sizes = _os_sizes_of_an_accepted_connection()
    with InProcessBroker(tmp_path / "data") as b:
        host, port = b.bootstrap.rsplit(":", 1)
        with socket.create_connection((host, int(port))) as client:
            assert _sizes(_accepted_socket(b, client)) == os_sizes


def test_large_records_pass_through_small_buffers(tmp_path):
    props = {"socket.send.buffer.bytes": "4096", "socket.receive.buffer.bytes": "4096"}
    with InProcessBroker(tmp_path / "data", **props) as b:
        topic = unique_topic("smallbuf")
        values = [bytes([i]) * 700_000 for i in range(4)]
        producer = KafkaProducer(bootstrap_servers=b.bootstrap, max_request_size=2_000_000)
        for v in values:
            producer.send(topic, v).get(timeout=30)
        producer.close()
        consumer = KafkaConsumer(topic, bootstrap_servers=b.bootstrap, auto_offset_reset="earliest",
                                 consumer_timeout_ms=30_000)
        got = []
        for message in consumer:
            got.append(message.value)
            if len(got) == len(values):
                break
        consumer.close()
        assert got == values
