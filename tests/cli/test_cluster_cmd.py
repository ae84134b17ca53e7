"""``odradek cluster``: a real ZooKeeper and three broker processes started by the command (run
as a child process), used by confluent-kafka, stopped by SIGINT, and started again on the same
data directory."""

from __future__ import annotations

import ctypes
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.server.local_cluster.broker_node import free_port
from odradek.server.local_cluster.zookeeper_server import zookeeper_installed
from tests.cli.conftest import run_cli

pytestmark = [pytest.mark.timeout(180),
              pytest.mark.skipif(not zookeeper_installed() and not os.environ.get("CI"),
                                 reason="ZooKeeper is not installed (scripts/setup.sh)")]

TOPIC = "replicated"
PARTITIONS = 2
RECORDS = 60
_LIBC = ctypes.CDLL(None, use_errno=True)


class ClusterCommand:
    """``odradek cluster --brokers 3 --data-dir DIR --port PORT`` as a child process (killed by
    the kernel if this test process dies first), its output read line by line."""

    def __init__(self, data_dir, port: int) -> None:
        args = [sys.executable, "-m", "odradek.cli.main", "cluster", "--brokers", "3",
                "--data-dir", str(data_dir), "--port", str(port), "--log-level", "WARNING"]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"},
                                     preexec_fn=lambda: _LIBC.prctl(1, signal.SIGKILL, 0, 0, 0))
        self.lines: list[str] = []

    def wait_ready(self, timeout: float = 90) -> str:
        """The output up to the ready line ("Ctrl-C stops the cluster")."""
        timer = threading.Timer(timeout, self.proc.kill)
        timer.start()
        try:
            for line in self.proc.stdout:
                self.lines.append(line)
                if "Ctrl-C stops the cluster" in line:
                    return "".join(self.lines)
        finally:
            timer.cancel()
        raise AssertionError("odradek cluster did not start:\n" + "".join(self.lines))

    def interrupt(self, timeout: float = 90) -> tuple[int, str]:
        """SIGINT (a Ctrl-C); the exit status and the output after the ready line."""
        self.proc.send_signal(signal.SIGINT)
        rest, _ = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, rest

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def _table(output: str) -> dict[str, tuple[str, int]]:
    """``{"ZooKeeper": (address, pid), "broker 1": ..., ...}`` from the command's table."""
    rows = re.findall(r"^(ZooKeeper|broker \d+)(?: \(controller\))?\s+(127\.0\.0\.1:\d+)\s+(\d+)\s", output, re.M)
    return {name: (address, int(pid)) for name, address, pid in rows}


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _consecutive_free_ports(count: int) -> int:
    for _ in range(50):
        first = free_port()
        socks = []
        try:
            for port in range(first, first + count):
                sock = socket.socket()
                socks.append(sock)
                sock.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
    raise RuntimeError(f"no {count} consecutive free ports")


def _produce(bootstrap: str) -> list[bytes]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)], operation_timeout=30).values():
        future.result(35)
    metadata = admin.list_topics(TOPIC, timeout=10).topics[TOPIC]
    assert all(sorted(p.replicas) == [1, 2, 3] for p in metadata.partitions.values()), metadata.partitions
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    values = [f"record-{i}".encode() for i in range(RECORDS)]
    failed = []
    for i, value in enumerate(values):
        producer.produce(TOPIC, value, partition=i % PARTITIONS,
                         on_delivery=lambda err, msg: err and failed.append(err))
    assert producer.flush(30) == 0 and failed == []
    return values


def _consume(bootstrap: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        got: list[bytes] = []
        for _ in range(300):
            if len(got) >= RECORDS:
                break
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                got.append(message.value())
        return got
    finally:
        consumer.close()


def _bootstrap(output: str) -> str:
    return re.search(r"--bootstrap-server (\S+)", output).group(1)


def _cluster_id(output: str) -> str:
    return re.search(r"odradek cluster (\S+): 3 broker\(s\)", output).group(1)


def _stop_and_check(command: ClusterCommand, table: dict[str, tuple[str, int]]) -> None:
    code, rest = command.interrupt()
    assert code == 0, rest
    assert "odradek cluster: stopped" in rest
    assert not any(_running(pid) for _, pid in table.values()), table


def test_cluster_starts_serves_replicated_topics_stops_on_ctrl_c_and_comes_back(tmp_path):
    data_dir = tmp_path / "cluster"
    command = ClusterCommand(data_dir, 0)
    try:
        output = command.wait_ready()
        table = _table(output)
        assert sorted(table) == ["ZooKeeper", "broker 1", "broker 2", "broker 3"], output
        bootstrap = _bootstrap(output)
        assert bootstrap.split(",") == [table[f"broker {i}"][0] for i in (1, 2, 3)]
        assert output.count("(controller)") == 1
        values = _produce(bootstrap)
        assert sorted(_consume(bootstrap)) == sorted(values)
        cluster_id = _cluster_id(output)
        _stop_and_check(command, table)
    finally:
        command.kill()
    assert {p.name for p in data_dir.iterdir()} == {"zookeeper", "broker-1", "broker-2", "broker-3"}

    port = _consecutive_free_ports(3)
    command = ClusterCommand(data_dir, port)  # the same cluster, now on fixed ports
    try:
        output = command.wait_ready()
        table = _table(output)
        assert [table[f"broker {i}"][0] for i in (1, 2, 3)] == [f"127.0.0.1:{port + i}" for i in range(3)]
        assert _cluster_id(output) == cluster_id
        assert sorted(_consume(_bootstrap(output))) == sorted(values)
        _stop_and_check(command, table)
    finally:
        command.kill()


def test_bad_arguments_are_refused_before_anything_starts(tmp_path):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    try:
        port = taken.getsockname()[1]
        result = run_cli("cluster", "--brokers", "1", "--data-dir", str(tmp_path), "--port", str(port))
        assert result.code == 1 and f"port {port} is not free" in result.err
    finally:
        taken.close()
    result = run_cli("cluster", "--brokers", "0", "--data-dir", str(tmp_path))
    assert result.code == 1 and "--brokers must be at least 1" in result.err
    result = run_cli("cluster", "--override", "log.dirs=/elsewhere", "--data-dir", str(tmp_path))
    assert result.code == 1 and "log.dirs" in result.err
    result = run_cli("cluster", "--override", "log.segment.bytes=lots", "--data-dir", str(tmp_path))
    assert result.code == 1 and "log.segment.bytes" in result.err
    assert list(tmp_path.iterdir()) == []
