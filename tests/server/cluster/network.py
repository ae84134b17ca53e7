"""A private network for partition tests: one Linux bridge, one network namespace per host,
and one-way cuts that drop packets silently, as Jepsen's iptables DROP rules do, made with
iproute2 alone (no iptables, nft or tc actions on this machine).

Layout of the `Network` with index ``i`` (0..511) and hosts ``["zk", "b1", ...]``::

    root namespace (the test process, "client")     namespace odn<i>zk    namespace odn<i>b1
      bridge odn<i>br, 198.18.i.1/24 ─┬─ veth odn<i>zk ─── eth0 .10
                                      └─ veth odn<i>b1 ──────────────────── eth0 .11    ...

Subnet ``i`` is the i-th /24 of 198.18.0.0/15 (RFC 2544's benchmarking range: 198.18.i.0 for
i < 256, then 198.19.(i-256).0). Host ``k`` (0-based, in the order given) is ``.10+k``; the
test process reaches every host through the bridge's ``.1``. An interface name has at most
15 characters: the bridge is ``odn<i>br``, the root end of host ``h``'s veth pair ``odn<i><h>``
(its other end is ``eth0`` in namespace ``odn<i><h>``), so a host name is a letter and at most
8 more letters or digits.

Which index: creating the bridge is the reservation (``ip link add`` of an existing name
fails), tried from an index drawn from the pid onwards, skipping any subnet the machine
already has an address or a route in; the bridge's alias names the owning pid. Reserving and
removing leftovers (`remove_leftovers`: the namespaces and bridges, found by the ``odn``
prefix, of owners that no longer run) hold one lock file, so parallel pytest workers never
take the same index nor remove each other's networks.

Contract of `create`: it returns once every namespace has its address up, every host routes
the client's and every other host's address over its ``eth0``, the client routes theirs over
the bridge, and the client reached each host (a TCP SYN to a closed port answered by a
reset: the path works both ways); otherwise it removes what it made and raises
`NetworkError`. `close` removes the namespaces and the bridge (the veths go with them) and
may be called again. Traffic goes only to the hosts' addresses, and never leaves the machine:
a client that outlives its network (a socket not closed, a librdkafka handle not yet freed)
would send to the default gateway once the bridge is gone, so `create` adds an
``unreachable`` route for the subnet beneath the bridge's (metric: the owner's pid), which
fails such a send at once; it stays until the process exits, or until `remove_leftovers`
finds its owner dead.

Cuts: `cut(src, dst)` drops every IPv4 packet ``src`` sends to ``dst`` (host names or
``CLIENT``): a permanent neighbour entry in ``src``'s namespace maps ``dst``'s address to a
MAC that no interface has; ``src`` still sends, the bridge floods the frame, nobody takes it.
The sender sees no error: a TCP connection stalls and retransmits, a new connection's SYN
goes unanswered. (A ``blackhole`` or ``unreachable`` route instead fails the local sender at
once, with EINVAL or EHOSTUNREACH, and with reverse-path filtering drops the replies too: not
what a partition of a real network does.) `partition` cuts both ways between two groups,
`isolate` one host from all. `heal` deletes the entries: the next packet resolves the address
again (ARP) and stalled connections resume at their next retransmission.
"""

from __future__ import annotations

import atexit
import fcntl
import functools
import ipaddress
import json
import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from pathlib import Path

__all__ = ["CLIENT", "Network", "NetworkError", "remove_leftovers", "unavailable"]

CLIENT = "client"  # the root namespace: the test process and its clients
PREFIX = "odn"
SUBNETS = 512  # the /24s of 198.18.0.0/15
FIRST_HOST = 10  # host k is .10+k; the bridge (the client) is .1
HOST_NAME = re.compile(r"[a-z][a-z0-9]{0,8}")
OWN_NAME = re.compile(PREFIX + r"(\d+)([a-z][a-z0-9]*)")  # odn<i>br, odn<i><host>
PROBE_PREFIX = PREFIX + "p"  # `unavailable`'s probe: odnp<pid>, odnp<pid>v
NOWHERE_MAC = "02:00:00:00:00:00"  # locally administered unicast: no interface of ours has it
OWNER_ALIAS = "odradek-network owner="
LOCK_PATH = Path("/tmp/odradek-network.lock")  # the same for every process, whatever its TMPDIR
REACH_TIMEOUT_S = 10.0
RANGE = ipaddress.IPv4Network("198.18.0.0/15")

_created = 0  # networks made by this process: the next one starts its search further on
_sentinels: list[str] = []  # the subnets whose unreachable route this process left


class NetworkError(RuntimeError):
    """An ``ip`` command failed, or the network did not come up as it should."""


def ip(*args: str, namespace: str | None = None, check: bool = True) -> str:
    """``ip [-n NAMESPACE] ARGS...``'s output; NetworkError with its stderr when it fails."""
    command = ["ip", *(["-n", namespace] if namespace else []), *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise NetworkError(f"{' '.join(command)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


def ip_json(*args: str, namespace: str | None = None) -> list[dict]:
    out = ip("-j", *args, namespace=namespace)
    return json.loads(out) if out.strip() else []


def subnet(index: int) -> ipaddress.IPv4Network:
    """The index-th /24 of 198.18.0.0/15."""
    return ipaddress.IPv4Network((int(RANGE.network_address) + (index << 8), 24))


@functools.cache
def unavailable() -> str:
    """Why namespaces cannot be made here (empty when they can): not root, no ``ip``, or the
    kernel refuses a namespace, a bridge or a veth pair (tried once, and removed)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "iproute2's ip is not installed"
    name = f"{PROBE_PREFIX}{os.getpid()}"
    try:
        ip("netns", "add", name)
        try:
            ip("link", "add", name, "type", "bridge")
            ip("link", "add", name + "v", "type", "veth", "peer", "name", "eth0", "netns", name)
            ip("link", "set", name + "v", "master", name)
        finally:
            ip("link", "del", name + "v", check=False)
            ip("link", "del", name, check=False)
    except (NetworkError, OSError, subprocess.SubprocessError) as e:
        return f"cannot make a network namespace, bridge and veth pair here: {e}"
    finally:
        ip("netns", "del", name, check=False)
    return ""


@contextmanager
def _lock():
    with open(LOCK_PATH, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _owner(bridge: str) -> int | None:
    """The pid in the bridge's alias (None: no alias, so its owner never finished reserving)."""
    try:
        alias = Path(f"/sys/class/net/{bridge}/ifalias").read_text().strip()
    except OSError:
        return None
    return int(alias[len(OWNER_ALIAS):]) if alias.startswith(OWNER_ALIAS) else None


def _our_names(names: Iterable[str]) -> dict[str, int]:
    """name -> index, for the names this module makes."""
    return {n: int(m.group(1)) for n in names if (m := OWN_NAME.fullmatch(n))}


def remove_leftovers() -> list[str]:
    """Remove the namespaces and bridges of networks whose owner no longer runs (a crashed or
    killed test run); the names removed. Call with the lock held (`Network.create` does)."""
    bridges = _our_names(link["ifname"] for link in ip_json("link", "show", "type", "bridge"))
    live = {i for name, i in bridges.items() if name == f"{PREFIX}{i}br" and (_owner(name) or 0) > 0
            and _running(_owner(name))}
    removed = []
    namespaces = [ns["name"] for ns in ip_json("netns", "list")]
    links = [link["ifname"] for link in ip_json("link", "show")]
    for name in namespaces + links:  # a probe's names, left by a process killed meanwhile
        probe = re.fullmatch(PROBE_PREFIX + r"(\d+)v?", name)
        if probe and not _running(int(probe.group(1))):
            ip("netns" if name in namespaces else "link", "del", name, check=False)
            removed.append(name)
    for name, i in _our_names(namespaces).items():
        if i not in live:  # a namespace outlives its bridge only when its owner died
            ip("netns", "del", name, check=False)
            removed.append(name)
    for name, i in _our_names(links).items():
        if i not in live:
            ip("link", "del", name, check=False)
            removed.append(name)
    for route in ip_json("route", "show", "type", "unreachable"):
        dst, owner = route.get("dst", "default"), route.get("metric", 0)
        if dst != "default" and ipaddress.IPv4Network(dst).subnet_of(RANGE) and owner and not _running(owner):
            ip("route", "del", "unreachable", dst, "metric", str(owner), check=False)
            removed.append(dst)
    return removed


def _remove_sentinels() -> None:
    for dst in _sentinels:
        ip("route", "del", "unreachable", dst, "metric", str(os.getpid()), check=False)


def _in_use(net: ipaddress.IPv4Network) -> bool:
    """Whether this machine already has an address or a route (other than the default) in ``net``."""
    for route in ip_json("-4", "route", "show", "table", "all"):
        try:
            if ipaddress.IPv4Network(route.get("dst", "default"), strict=False).overlaps(net):
                return True
        except ValueError:  # "default"
            continue
    return any(ipaddress.IPv4Address(a["local"]) in net
               for link in ip_json("-4", "addr", "show") for a in link.get("addr_info", []))


class Network:
    """See the module docstring. ``hosts``: the names of the namespaces, in address order."""

    def __init__(self, hosts: Sequence[str]) -> None:
        bad = [h for h in hosts if not HOST_NAME.fullmatch(h) or h == CLIENT]
        if bad or len(set(hosts)) != len(hosts) or not hosts:
            raise ValueError(f"host names must be distinct, [a-z][a-z0-9]{{0,8}} and not {CLIENT!r}: {bad}")
        self.hosts = list(hosts)
        self.index: int | None = None
        self.cuts: set[tuple[str, str]] = set()

    # --- names and addresses ---------------------------------------------------------------

    @property
    def bridge(self) -> str:
        return f"{PREFIX}{self.index}br"

    def namespace(self, host: str) -> str:
        return f"{PREFIX}{self.index}{host}"

    def address(self, host: str) -> str:
        """A host's address, or the client's (the bridge's)."""
        net = subnet(self.index)
        return str(net[1] if host == CLIENT else net[FIRST_HOST + self.hosts.index(host)])

    def command(self, host: str) -> list[str]:
        """The prefix that runs a command inside the host's namespace (execs it in place)."""
        return ["ip", "netns", "exec", self.namespace(host)]

    def __repr__(self) -> str:
        where = "not created" if self.index is None else str(subnet(self.index))
        return f"<Network {where} {self.hosts} cuts {sorted(self.cuts)}>"

    # --- life cycle ------------------------------------------------------------------------

    def create(self) -> Network:
        """Reserve an index, make the bridge, namespaces and veths, and check them."""
        global _created
        with _lock():
            remove_leftovers()
            start = (os.getpid() * 31 + _created) % SUBNETS
            _created += 1
            for k in range(SUBNETS):
                index = (start + k) % SUBNETS
                if _in_use(subnet(index)):
                    continue
                try:
                    ip("link", "add", f"{PREFIX}{index}br", "type", "bridge")
                except NetworkError as e:
                    if "exists" in str(e):
                        continue  # another network's
                    raise
                self.index = index
                ip("link", "set", self.bridge, "alias", f"{OWNER_ALIAS}{os.getpid()}")
                self._leave_sentinel()
                break
            else:
                raise NetworkError("no free /24 in 198.18.0.0/15")
        try:
            self._build()
            self._check()
        except BaseException:
            self.close()
            raise
        return self

    def _build(self) -> None:
        prefix_len = str(subnet(self.index).prefixlen)
        ip("addr", "add", f"{self.address(CLIENT)}/{prefix_len}", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")
        for host in self.hosts:
            ns = veth = self.namespace(host)  # the namespace and the root end of its veth pair
            ip("netns", "add", ns)
            ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            ip("link", "set", veth, "master", self.bridge, "up")
            ip("addr", "add", f"{self.address(host)}/{prefix_len}", "dev", "eth0", namespace=ns)
            ip("link", "set", "lo", "up", namespace=ns)
            ip("link", "set", "eth0", "up", namespace=ns)

    def _check(self) -> None:
        """The contract's checks (module docstring), before anything else uses the network."""
        for host in [CLIENT, *self.hosts]:
            ns = None if host == CLIENT else self.namespace(host)
            dev = self.bridge if host == CLIENT else "eth0"
            for peer in [CLIENT, *self.hosts]:
                if peer == host:
                    continue
                route = ip_json("route", "get", self.address(peer), namespace=ns)[0]
                if route.get("dev") != dev or "gateway" in route:
                    raise NetworkError(f"{host} routes {peer}'s address {self.address(peer)} "
                                       f"other than over {dev}: {route}")
        for host in self.hosts:
            self._wait_reachable(host)

    def _wait_reachable(self, host: str) -> None:
        """A TCP SYN from the client to a closed port of ``host`` is answered by a reset."""
        deadline = time.monotonic() + REACH_TIMEOUT_S
        while True:
            try:
                socket.create_connection((self.address(host), 9), timeout=1).close()
                return  # something listens there: reachable all the same
            except ConnectionRefusedError:
                return
            except OSError as e:
                if time.monotonic() > deadline:
                    raise NetworkError(f"the client cannot reach {host} at {self.address(host)}: {e!r}") from None
                time.sleep(0.1)

    def _leave_sentinel(self) -> None:
        """The subnet's ``unreachable`` route (module docstring), from the start: while the
        bridge is up its own route for the subnet (metric 0) takes precedence."""
        dst = str(subnet(self.index))
        if not _sentinels:
            atexit.register(_remove_sentinels)
        ip("route", "replace", "unreachable", dst, "metric", str(os.getpid()))
        _sentinels.append(dst)

    def close(self) -> None:
        """Remove the namespaces, then the bridge (leftovers go with `remove_leftovers`)."""
        if self.index is None:
            return
        self.cuts.clear()
        for host in self.hosts:
            ip("netns", "del", self.namespace(host), check=False)
            ip("link", "del", self.namespace(host), check=False)
        ip("link", "del", self.bridge, check=False)
        self.index = None

    def __enter__(self) -> Network:
        return self.create()

    def __exit__(self, *exc) -> None:
        self.close()

    # --- cuts ------------------------------------------------------------------------------

    def _side(self, host: str) -> tuple[str | None, str]:
        """(namespace, device) that ``host``'s packets leave by."""
        if host == CLIENT:
            return None, self.bridge
        if host not in self.hosts:
            raise ValueError(f"no host {host!r} in {self.hosts}")
        return self.namespace(host), "eth0"

    def cut(self, src: str, dst: str) -> None:
        """Drop, silently, every packet ``src`` sends to ``dst`` (one way)."""
        if src == dst:
            raise ValueError(f"a host cannot be cut from itself: {src}")
        ns, dev = self._side(src)
        self._side(dst)
        ip("neigh", "replace", self.address(dst), "dev", dev, "lladdr", NOWHERE_MAC, "nud", "permanent",
           namespace=ns)
        self.cuts.add((src, dst))

    def partition(self, side: Iterable[str], other_side: Iterable[str]) -> None:
        """Cut both ways between every host of ``side`` and every host of ``other_side``."""
        others = list(other_side)
        for a in side:
            for b in others:
                self.cut(a, b)
                self.cut(b, a)

    def isolate(self, host: str) -> None:
        """Cut ``host`` from every other host and from the client, both ways."""
        self.partition([host], [h for h in [CLIENT, *self.hosts] if h != host])

    def heal(self) -> None:
        """Remove every cut."""
        for src, dst in sorted(self.cuts):
            ns, dev = self._side(src)
            ip("neigh", "del", self.address(dst), "dev", dev, namespace=ns)
            self.cuts.discard((src, dst))
