"""The partition tests' network (tests/server/cluster/network.py): a cut drops packets
silently, one way only, the heal restores the same connection, and nothing is left behind.

Needs root and iproute2 (skipped otherwise, with the reason)."""

from __future__ import annotations

import errno
import queue
import socket
import subprocess
import sys
import threading

import pytest

from tests.server.cluster import network
from tests.server.cluster.network import CLIENT, Network, unavailable

pytestmark = pytest.mark.timeout(60)

# One process per namespace: prints every UDP datagram it receives on port 7000 ("got MSG"),
# sends one for each line "ADDRESS MSG" read from stdin, and echoes TCP on port 7001.
AGENT = """
import socket, sys, threading
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.bind((sys.argv[1], 7000))
tcp = socket.create_server((sys.argv[1], 7001))
def receive():
    while True:
        print("got", udp.recvfrom(100)[0].decode(), flush=True)
def echo():
    while True:
        conn, _ = tcp.accept()
        threading.Thread(target=lambda c=conn: [c.sendall(b"echo:" + d) for d in iter(lambda: c.recv(100), b"")],
                         daemon=True).start()
threading.Thread(target=receive, daemon=True).start()
threading.Thread(target=echo, daemon=True).start()
print("ready", flush=True)
for line in sys.stdin:
    address, message = line.split()
    udp.sendto(message.encode(), (address, 7000))
"""


@pytest.fixture(autouse=True)
def namespaces_possible():
    reason = unavailable()
    if reason:
        pytest.skip(reason)


class Agent:
    def __init__(self, net: Network, host: str) -> None:
        self.proc = subprocess.Popen([*net.command(host), sys.executable, "-c", AGENT, net.address(host)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [self.lines.put(line.strip()) for line in self.proc.stdout],
                         daemon=True).start()
        assert self.lines.get(timeout=20) == "ready"

    def send(self, address: str, message: str) -> None:
        self.proc.stdin.write(f"{address} {message}\n")
        self.proc.stdin.flush()

    def received(self, timeout: float) -> str | None:
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            return None

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def net():
    with Network(["a", "b"]) as made:
        agents = {h: Agent(made, h) for h in made.hosts}
        made.agents = agents
        try:
            yield made
        finally:
            for agent in agents.values():
                agent.stop()


def test_a_cut_stalls_a_connection_silently_and_the_heal_resumes_it(net):
    conn = socket.create_connection((net.address("a"), 7001), timeout=5)
    conn.sendall(b"one")
    assert conn.recv(100) == b"echo:one"
    net.partition([CLIENT], ["a"])
    conn.sendall(b"two")  # no error: the packets leave and are lost
    conn.settimeout(1.5)
    with pytest.raises(TimeoutError):
        conn.recv(100)
    with pytest.raises(TimeoutError):  # a SYN unanswered, not refused or unreachable
        socket.create_connection((net.address("a"), 7001), timeout=1.5)
    net.heal()
    conn.settimeout(20)  # the next retransmission
    assert conn.recv(100) == b"echo:two"
    conn.close()


def test_a_cut_is_one_way(net):
    a, b = net.agents["a"], net.agents["b"]
    net.cut("a", "b")
    a.send(net.address("b"), "a-to-b")
    b.send(net.address("a"), "b-to-a")
    assert a.received(5) == "got b-to-a"
    assert b.received(1) is None
    net.heal()
    a.send(net.address("b"), "after")
    assert b.received(5) == "got after"


def test_close_removes_everything_and_the_leftovers_of_dead_owners_go():
    def names() -> set[str]:
        out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
        return {line.split()[0] for line in out.splitlines()} | {line.split(":")[1].strip().split("@")[0]
                                                                   for line in links.splitlines()}

    dead = subprocess.Popen(["true"])
    dead.wait()
    orphan, kept = Network(["x"]).create(), Network(["x"]).create()
    try:
        orphaned = {orphan.bridge, orphan.namespace("x")}
        assert orphaned <= names()
        subprocess.run(["ip", "link", "set", orphan.bridge, "alias", f"{network.OWNER_ALIAS}{dead.pid}"], check=True)
        dead_route = str(network.subnet(orphan.index))
        with network._lock():
            removed = network.remove_leftovers()
        assert orphaned <= set(removed) and not orphaned & names()
        assert {kept.bridge, kept.namespace("x")} <= names()  # its owner (this process) runs
        ours, address = {kept.bridge, kept.namespace("x")}, kept.address("x")
    finally:
        orphan.index = None  # already removed
        kept.close()
    assert not ours & names()
    # What is left: an unreachable route, so a client still holding the address fails at
    # once instead of sending to the default gateway; a dead owner's goes with the leftovers.
    with pytest.raises(OSError) as refused:
        socket.create_connection((address, 9092), timeout=2)
    assert refused.value.errno == errno.EHOSTUNREACH
    subprocess.run(["ip", "route", "add", "unreachable", dead_route, "metric", str(dead.pid)], check=True)
    with network._lock():
        assert dead_route in network.remove_leftovers()
    routes = subprocess.run(["ip", "route", "show", "type", "unreachable"], capture_output=True, text=True).stdout
    assert f"{dead_route} metric {dead.pid}" not in routes
