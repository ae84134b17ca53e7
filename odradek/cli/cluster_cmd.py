"""``odradek cluster [--brokers N] [--data-dir DIR] [--port P] [--override key=value ...]``:
a ZooKeeper and N brokers on this machine, until Ctrl-C.

Brokers get ids 1..N and listen on 127.0.0.1:P, P+1, ... (``--port 0``: free ports); ZooKeeper
(Debian's package) listens on a free port. Everything lives under the data directory
(zookeeper/, broker-1/, ...), each process's output in its own file there, so running the
command again with the same --data-dir brings the same cluster back (its topics and records).
Ctrl-C (or SIGTERM) stops the brokers one at a time with a controlled shutdown, the controller
last, then ZooKeeper; a second Ctrl-C kills whatever still runs.
"""

from __future__ import annotations

import argparse
import logging
import signal
import socket
import sys
import time
from pathlib import Path

from odradek.cli.broker_cmd import parse_overrides
from odradek.cli.common import CommandError, console, print_table
from odradek.server.config import BrokerConfig, ConfigError

DEFAULT_DATA_DIR = "data/cluster"
# A JVM stopped by SIGTERM exits with 128 + 15 after running its shutdown hooks.
_JVM_TERMINATED = 143


def add_parser(sub) -> None:
    p = sub.add_parser("cluster", help="run a local cluster: ZooKeeper and N brokers",
                       description=__doc__.split("\n\n", 1)[1].replace("``", ""),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--brokers", type=int, default=3, metavar="N", help="how many brokers (default 3)")
    p.add_argument("--data-dir", default=DEFAULT_DATA_DIR, metavar="DIR",
                   help=f"where ZooKeeper's and the brokers' data live (default {DEFAULT_DATA_DIR})")
    p.add_argument("--port", type=int, default=9092, metavar="P",
                   help="the first broker's port; the others follow (default 9092; 0: free ports)")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="a broker config for every broker (Kafka's names), repeatable")
    p.add_argument("--log-level", default="INFO", metavar="LEVEL",
                   help="the brokers' log level, in their broker.log files (default INFO)")


class _Interrupted(Exception):
    """SIGINT or SIGTERM arrived."""


def _on_signal(signum, frame) -> None:
    raise _Interrupted


def _check(args) -> dict[str, str]:
    from odradek.cli.broker_cmd import log_level
    from odradek.server.local_cluster.zookeeper_server import environment_note

    if args.brokers < 1:
        raise CommandError("--brokers must be at least 1")
    if args.port and not 1 <= args.port <= 65536 - args.brokers:
        raise CommandError(f"--port must be 0 or leave room for {args.brokers} ports below 65536")
    try:
        log_level(args.log_level)
        props = parse_overrides(args.override)
    except (argparse.ArgumentTypeError, ConfigError) as e:
        raise CommandError(str(e)) from None
    reserved = {"broker.id", "node.id", "listeners", "log.dirs", "log.dir", "zookeeper.connect"} & set(props)
    if reserved:
        raise CommandError(f"odradek cluster sets these for each broker: {', '.join(sorted(reserved))}")
    try:  # a bad value stops here with the key's name, not later in N brokers' output
        BrokerConfig.from_props({**props, "broker.id": "1", "zookeeper.connect": "127.0.0.1:2181"})
    except ConfigError as e:
        raise CommandError(f"invalid configuration: {e}") from None
    note = environment_note()
    if note:
        raise CommandError(note)
    for port in range(args.port, args.port + args.brokers) if args.port else ():
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError as e:
                raise CommandError(f"port {port} is not free ({e.strerror}): choose another --port, "
                                   f"or --port 0 for free ports") from None
    return props


def run(args) -> int:
    from odradek.server.local_cluster.local_cluster import ClusterStartError, LocalCluster
    from odradek.server.local_cluster.zookeeper_server import ZooKeeperStartError

    props = _check(args)
    # kazoo warns on stderr when a connection attempt drops; the table says what matters.
    logging.getLogger("kazoo").setLevel(logging.ERROR)
    directory = Path(args.data_dir).resolve()
    cluster = LocalCluster(directory, args.brokers, port=args.port, props=props,
                           log_level=args.log_level.upper(), new_session=True,
                           notice=lambda text: print(f"odradek cluster: {text}", flush=True))
    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    failure = None
    try:
        try:
            print(f"odradek cluster: starting ZooKeeper and {args.brokers} broker(s) in {directory}", flush=True)
            cluster.start()
            _print_cluster(cluster, directory)
            _watch(cluster)
        except (ClusterStartError, ZooKeeperStartError) as e:
            failure = str(e)
        except _Interrupted:
            pass
        print("odradek cluster: stopping (brokers with a controlled shutdown, then ZooKeeper)", flush=True)
        try:
            statuses = cluster.stop()
        except _Interrupted:
            cluster.close()
            print("odradek cluster: killed", flush=True)
            return 130
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if failure is not None:
        raise CommandError(failure)
    return _report(statuses)


def _print_cluster(cluster, directory: Path) -> None:
    zookeeper = cluster.zookeeper
    controller = cluster.controller_id()
    rows = [("ZooKeeper", zookeeper.hosts, zookeeper.process.pid, "zookeeper/")]
    for broker_id, node in cluster.nodes.items():
        role = f"broker {broker_id}" + (" (controller)" if broker_id == controller else "")
        rows.append((role, node.bootstrap, node.pid, f"{node.directory.name}/"))
    cluster_id = (cluster.read_json("/cluster/id") or {}).get("id")
    print_table(["process", "listens on", "pid", "data"], rows,
                title=f"odradek cluster {cluster_id}: {len(cluster.nodes)} broker(s), data in {directory}")
    out = console()
    out.print(f"  connect with: --bootstrap-server {cluster.bootstrap}")
    out.print(f"  zookeeper.connect={cluster.zookeeper_connect}")
    out.print("  Ctrl-C stops the cluster")
    sys.stdout.flush()


def _watch(cluster) -> None:
    """Until a signal: report a broker that exits by itself (it stays down; its output says why)."""
    reported: set[int] = set()
    while True:
        time.sleep(1)
        for broker_id, node in cluster.nodes.items():
            if broker_id not in reported and not node.alive:
                reported.add(broker_id)
                print(f"odradek cluster: broker {broker_id} exited with status {node.proc.returncode}; "
                      f"see {node.log_path}", file=sys.stderr, flush=True)
        if not cluster.zookeeper.alive:
            print(f"odradek cluster: ZooKeeper exited; see {cluster.zookeeper.log_path}", file=sys.stderr, flush=True)
            return


def _report(statuses: dict[str, int | None]) -> int:
    """0 when every process stopped cleanly (brokers with 0, ZooKeeper's JVM with 0 or 143)."""
    unclean = {name: status for name, status in statuses.items()
               if status not in (0, None) and not (name == "zookeeper" and status == _JVM_TERMINATED)}
    if unclean:
        listed = ", ".join(f"{name} ({status})" for name, status in unclean.items())
        print(f"odradek cluster: stopped; not cleanly: {listed}", file=sys.stderr, flush=True)
        return 1
    print("odradek cluster: stopped", flush=True)
    return 0
