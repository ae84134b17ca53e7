"""``reachability.wait_reachable`` and the one-line errors (``errors``), without Spark:
a listening server is found at once, one that starts listening within the timeout is waited
for, and a port where nothing listens gives ``BrokersUnreachable`` naming every server, the
timeout and the option; only inside a Spark Python worker does such an error ask pyspark to
leave the traceback out."""

from __future__ import annotations

import os
import socket
import threading

import pytest

from odradek.spark.errors import BrokersUnreachable, OneLineError
from odradek.spark.reachability import wait_reachable


def _bound() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock


def _address(sock: socket.socket) -> str:
    return f"127.0.0.1:{sock.getsockname()[1]}"


def test_a_listening_server_is_reached():
    with _bound() as down, _bound() as up:
        up.listen()
        wait_reachable(f"{_address(down)},{_address(up)}", 5000, "kafka.max.block.ms")


def test_a_server_that_starts_within_the_timeout_is_waited_for():
    with _bound() as later:
        timer = threading.Timer(0.3, later.listen)
        timer.start()
        try:
            wait_reachable(_address(later), 30_000, "kafka.default.api.timeout.ms")
        finally:
            timer.cancel()


def test_nothing_listening_fails_in_one_line_naming_the_servers(monkeypatch):
    monkeypatch.delenv("SPARK_PYTHON_RUNTIME", raising=False)
    with _bound() as first, _bound() as second:
        one, two = _address(first), _address(second)
        with pytest.raises(BrokersUnreachable) as failed:
            wait_reachable(f"{one},{two}", 300, "kafka.max.block.ms")
    servers = f"{one},{two}"
    assert str(failed.value) == (
        f"cannot reach the Kafka bootstrap servers {servers} within 300 ms (option 'kafka.max.block.ms'): "
        f"{one}: Connection refused; {two}: Connection refused")
    assert failed.value.bootstrap == servers


def test_one_line_errors_hide_the_traceback_only_in_spark_workers(monkeypatch):
    # monkeypatch restores the variables afterwards: the JVMs started later inherit none
    monkeypatch.delenv("SPARK_HIDE_TRACEBACK", raising=False)
    monkeypatch.delenv("SPARK_PYTHON_RUNTIME", raising=False)
    OneLineError("in the driver's own process")
    assert "SPARK_HIDE_TRACEBACK" not in os.environ
    monkeypatch.setenv("SPARK_PYTHON_RUNTIME", "PYTHON_WORKER")  # what Spark sets for its workers
    OneLineError("in a worker")
    assert os.environ["SPARK_HIDE_TRACEBACK"] == "1"
    with pytest.raises(ValueError, match="one line"):
        OneLineError("two\nlines")
