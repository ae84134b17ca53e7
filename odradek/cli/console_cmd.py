"""``odradek console``: a web console for any Kafka-compatible cluster (odradek or Kafka).

    odradek console --bootstrap-server HOST:PORT [--command-config FILE] [--port P] [--host H]

It serves, on http://127.0.0.1:8080/ by default (``--port 0``: a free port), pages a person
can bookmark: / (the cluster overview), /brokers, /topics, /topics/<name> (partitions,
configs, a message browser), /groups and /groups/<id> (members, offsets, lag). The pages
refresh every few seconds; creating and deleting topics and changing configs ask for a
confirmation first. It prints its address once listening, and serves until Ctrl-C.

``--command-config`` takes the admin client's properties, security among them
(``security.protocol``, ``ssl.*``, ``sasl.*``), so the console reads a secured cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import threading

from odradek.cli.common import (
    CommandError,
    add_bootstrap,
    bootstrap_from,
    check_reachable,
    client_config,
    read_properties,
    run_command,
)

DEFAULT_PORT = 8080


def add_parser(sub) -> None:
    p = sub.add_parser("console", help="a web console for the cluster",
                       description=__doc__.replace("``", ""), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bootstrap(p)
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"the port to listen on (default {DEFAULT_PORT}; 0: any free)")
    p.add_argument("--sample-interval", type=float, default=5.0, metavar="SECONDS",
                   help="how often rates and lag are sampled for the charts (default 5)")


def run(args) -> int:
    return run_command("console", _run, args)


def _run(args) -> int:
    from odradek.client import AsyncAdminClient
    from odradek.console.app import ConsoleConfig
    from odradek.console.console_server import serve

    if not 0 <= args.port <= 65535:
        raise CommandError(f"--port must be 0..65535, not {args.port}")
    if args.sample_interval <= 0:
        raise CommandError("--sample-interval must be positive")
    props = read_properties(args.command_config)
    bootstrap = bootstrap_from(args, props)
    client = client_config(AsyncAdminClient, props, "admin client")
    check_reachable(bootstrap)
    config = ConsoleConfig(bootstrap, client, host=args.host, port=args.port,
                           sample_interval=args.sample_interval,
                           refresh_ms=int(min(max(args.sample_interval, 1.0), 5.0) * 1000))

    def ready(url: str) -> None:
        print(f"odradek console at {url} (cluster {bootstrap}); Ctrl-C to stop", flush=True)

    asyncio.run(_serve_until_signalled(serve, config, ready))
    print("odradek console stopped", file=sys.stderr)
    return 0


async def _serve_until_signalled(serve, config, ready) -> None:
    """Serve until SIGINT or SIGTERM, whatever the process inherited: Python leaves SIGINT
    ignored when it started ignored (a job put in the background by a non-interactive shell,
    some CI runners), and the console promises "Ctrl-C to stop". The loop's own handlers only
    set an event: a KeyboardInterrupt raised wherever the main thread happens to be can land
    in a weakref callback, where Python prints and drops it, and the console runs on. Only
    the main thread may install handlers (tests run the command in process)."""
    stop = asyncio.Event()
    if threading.current_thread() is threading.main_thread():
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
    await serve(config, ready, stop)
