"""``odradek console``: a web console for any Kafka-compatible cluster (odradek or Kafka).

    odradek console --bootstrap-server HOST:PORT [--command-config FILE] [--port P] [--host H]

It serves, on http://127.0.0.1:8080/ by default (``--port 0``: a free port), pages a person
can bookmark: / (the cluster overview), /brokers, /topics, /topics/<name> (partitions,
configs, a message browser), /groups and /groups/<id> (members, offsets, lag). The pages
refresh every few seconds; creating and deleting topics and changing configs ask for a
confirmation first. It prints its address once listening, and serves until Ctrl-C.

``--command-config`` takes the admin client's properties, security among them
(``security.protocol``, ``ssl.*``, ``sasl.*``), so the console reads a secured cluster.

The console acts with its own Kafka credentials (those of ``--command-config``) for everyone
who reaches it: whoever loads its pages reads the records, creates and deletes topics and
changes configs as that principal. So:

- It answers only requests naming a host it serves (421 otherwise, against DNS rebinding):
  its ``--host`` and port (for a loopback host also localhost, 127.0.0.1 and [::1]), and each
  ``--allowed-host NAME[:PORT]`` (a name it is reached by: a DNS name, a reverse proxy's).
- ``--user NAME`` asks browsers and scripts for that user's password (HTTP Basic), read from
  ``--password-file FILE`` or $ODRADEK_CONSOLE_PASSWORD, never from the command line;
  ``--token-file FILE`` takes a bearer token (``Authorization: Bearer ...``) for scripts.
  Without them nobody is asked.
- A ``--host`` that is not loopback needs authentication and TLS (``--ssl-certfile`` and
  ``--ssl-keyfile``, PEM); ``--insecure-no-auth`` serves it to everyone, unauthenticated, on
  purpose.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import ssl
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
PASSWORD_ENV = "ODRADEK_CONSOLE_PASSWORD"


def add_parser(sub) -> None:
    p = sub.add_parser("console", help="a web console for the cluster",
                       description=__doc__.replace("``", ""), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bootstrap(p)
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"the port to listen on (default {DEFAULT_PORT}; 0: any free)")
    p.add_argument("--sample-interval", type=float, default=5.0, metavar="SECONDS",
                   help="how often rates and lag are sampled for the charts (default 5)")
    p.add_argument("--allowed-host", action="append", default=[], metavar="NAME[:PORT]",
                   help="a Host name the console also answers to (repeatable); NAME alone: with the console's "
                        "port, or none (a reverse proxy's default port)")
    p.add_argument("--user", metavar="NAME", help="ask for this user name and its password (HTTP Basic)")
    p.add_argument("--password-file", metavar="FILE",
                   help=f"the file holding --user's password (else ${PASSWORD_ENV}); one line")
    p.add_argument("--token-file", metavar="FILE", help="the file holding a bearer token scripts may send instead")
    p.add_argument("--ssl-certfile", metavar="FILE", help="serve HTTPS with this PEM certificate chain")
    p.add_argument("--ssl-keyfile", metavar="FILE", help="the PEM private key of --ssl-certfile")
    p.add_argument("--insecure-no-auth", action="store_true",
                   help="serve a non-loopback --host without authentication: anyone who reaches it acts on "
                        "the cluster with the console's Kafka credentials")


def run(args) -> int:
    return run_command("console", _run, args)


def _run(args) -> int:
    from odradek.client import AsyncAdminClient
    from odradek.console.app import ConsoleConfig
    from odradek.console.console_server import UnsafeListener, check_listener, serve, server_ssl_context
    from odradek.console.host_check import parse_extra

    if not 0 <= args.port <= 65535:
        raise CommandError(f"--port must be 0..65535, not {args.port}")
    if args.sample_interval <= 0:
        raise CommandError("--sample-interval must be positive")
    try:
        allowed = parse_extra(args.allowed_host)
    except ValueError as e:
        raise CommandError(str(e)) from None
    props = read_properties(args.command_config)
    bootstrap = bootstrap_from(args, props)
    client = client_config(AsyncAdminClient, props, "admin client")
    config = ConsoleConfig(bootstrap, client, host=args.host, port=args.port,
                           sample_interval=args.sample_interval,
                           refresh_ms=int(min(max(args.sample_interval, 1.0), 5.0) * 1000),
                           allowed_hosts=allowed, auth=_auth(args), ssl_certfile=args.ssl_certfile,
                           ssl_keyfile=args.ssl_keyfile, insecure_no_auth=args.insecure_no_auth)
    try:
        check_listener(config)
        server_ssl_context(config)  # a certificate that does not load is said now, not after the cluster check
    except UnsafeListener as e:
        raise CommandError(str(e)) from None
    except (OSError, ssl.SSLError) as e:
        raise CommandError(f"cannot use --ssl-certfile/--ssl-keyfile: {e}") from None
    check_reachable(bootstrap)

    def ready(url: str) -> None:
        print(f"odradek console at {url} (cluster {bootstrap}); Ctrl-C to stop", flush=True)

    asyncio.run(_serve_until_signalled(serve, config, ready))
    print("odradek console stopped", file=sys.stderr)
    return 0


def _auth(args):
    """The console's ``ConsoleAuth`` from ``--user``, ``--password-file`` (else
    $ODRADEK_CONSOLE_PASSWORD) and ``--token-file``. A secret file holds one line: its end of
    line is not part of the secret."""
    from odradek.console.console_auth import ConsoleAuth

    password = _secret(args.password_file, "--password-file") if args.password_file else os.environ.get(PASSWORD_ENV)
    token = _secret(args.token_file, "--token-file") if args.token_file else None
    if args.user is None and args.password_file:
        raise CommandError("--password-file needs --user")
    if args.user is not None and password is None:
        raise CommandError(f"--user needs a password: --password-file FILE or ${PASSWORD_ENV}")
    try:
        return ConsoleAuth(args.user, password if args.user is not None else None, token)
    except ValueError as e:
        raise CommandError(str(e)) from None


def _secret(path: str, option: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise CommandError(f"cannot read {option} {path}: {getattr(e, 'strerror', None) or e}") from None
    return text.removesuffix("\n").removesuffix("\r")


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
