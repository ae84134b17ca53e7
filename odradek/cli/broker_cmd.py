"""``odradek broker [server.properties] [--override key=value ...]``: run one broker.

With no arguments: one broker on 127.0.0.1:9092, data in the default directory, the embedded
metadata store (no ZooKeeper). SIGTERM and SIGINT stop it cleanly (controlled shutdown when
``controlled.shutdown.enable``: the controller moves its leaderships away first; then flush,
checkpoints, clean-shutdown marker). When every log directory has failed the broker halts
and the command exits with status 1 (Kafka's broker halts too).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal
import sys

from odradek.server.config import BrokerConfig, ConfigError


def add_parser(sub) -> None:
    p = sub.add_parser("broker", help="run a broker", description=__doc__.split("\n\n", 1)[1].replace("``", ""),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("properties", nargs="?", help="a server.properties file")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="set a config (Kafka's names), repeatable")
    p.add_argument("--log-level", default="INFO", type=log_level, metavar="LEVEL",
                   help=f"{', '.join(LOG_LEVELS)} (default INFO)")


# Kafka's log4j level names, and Python's where they differ, as Python's logging levels.
LOG_LEVELS = {"TRACE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO,
              "WARN": logging.WARNING, "WARNING": logging.WARNING, "ERROR": logging.ERROR,
              "FATAL": logging.CRITICAL, "CRITICAL": logging.CRITICAL}


def log_level(text: str) -> int:
    """``--log-level``'s value as a logging level; argparse reports the ValueError's text."""
    level = LOG_LEVELS.get(text.upper())
    if level is None:
        raise argparse.ArgumentTypeError(f"unknown level {text!r} (one of {', '.join(LOG_LEVELS)})")
    return level


def parse_overrides(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--override needs KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def run(args) -> int:
    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = BrokerConfig.load(args.properties, parse_overrides(args.override))
    except (ConfigError, OSError) as e:
        print(f"odradek broker: invalid configuration: {e}", file=sys.stderr)
        return 1
    for key in config.unknown:
        logging.getLogger("odradek.config").warning("unknown configuration key %r (ignored)", key)
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        run_loop = asyncio.run
    else:
        run_loop = uvloop.run
    from odradek.server.broker import BrokerStartError

    try:
        return run_loop(serve(config))
    except BrokerStartError as e:
        print(f"odradek broker: cannot start: {e}", file=sys.stderr)
        return 1


async def serve(config: BrokerConfig, ready=None) -> int:
    from odradek.server.broker import Broker

    broker = Broker(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await broker.start()
    # What start-up built (modules, configuration, the logs it loaded) lives as long as the
    # process: frozen, it is left out of the collector's full passes, which took ~14 ms on a
    # fresh broker, a pause for every request in flight (issue 8's latency runs).
    gc.freeze()
    endpoints = ", ".join(f"{host}:{port}" for _, host, port in broker.advertised())
    print(f"odradek broker {broker.broker_id} ready; cluster id {broker.cluster_id}", flush=True)
    print(f"  connect with: --bootstrap-server {endpoints}", flush=True)
    print(f"  data in: {', '.join(config.log_dirs)}", flush=True)
    if ready is not None:
        ready(broker)
    stopped = asyncio.ensure_future(stop.wait())
    halted = asyncio.ensure_future(broker.halted.wait())
    await asyncio.wait([stopped, halted], return_when=asyncio.FIRST_COMPLETED)
    for waiter in (stopped, halted):
        waiter.cancel()
    if broker.halted.is_set():  # every log directory failed (the broker said why)
        return 1
    await broker.stop()
    return 0
