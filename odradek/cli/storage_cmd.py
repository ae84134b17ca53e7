"""``odradek storage format``: the SCRAM credentials a secured cluster needs before any broker
can authenticate anyone (``kafka-storage.sh format --add-scram``).

    odradek storage format --config server.properties \\
        --add-scram 'SCRAM-SHA-512=[name=admin,password=admin-secret]'

A broker whose every listener speaks SCRAM cannot be reached to create the first user's
credential, and the brokers need theirs to log in to each other. So, as Kafka formats a
KRaft node's storage with its first credentials, this writes them into the metadata store the
broker's own ``server.properties`` names, before the broker starts: the embedded store under
the first of ``log.dirs`` (one broker), or ZooKeeper at ``zookeeper.connect`` (a cluster;
what ``kafka-configs.sh --zookeeper`` did). ``--add-scram`` may be repeated; its value is
``MECHANISM=[name=<user>,password=<password>[,iterations=<n>]]`` (iterations 4096 when not
given). A running broker holds the embedded store: stop it first, or, once it is up, use
``odradek configs --entity-type users --alter`` as a super user. Nothing else of Kafka's
format (cluster id, ``meta.properties``) is needed: odradek makes those when it first starts.
"""

from __future__ import annotations

import argparse

from odradek.cli.common import CommandError, run_command, split_top_level
from odradek.cli.user_scram_configs import parse_credential


def add_parser(sub) -> None:
    p = sub.add_parser("storage", help="prepare a broker's metadata store (SCRAM credentials)",
                       description=__doc__.replace("``", ""), formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = p.add_subparsers(dest="storage_action", metavar="ACTION", required=True)
    fmt = actions.add_parser("format", help="write SCRAM credentials before the broker starts")
    fmt.add_argument("--config", "-c", required=True, metavar="FILE", help="the broker's server.properties")
    fmt.add_argument("--add-scram", "-S", action="append", required=True, metavar="MECHANISM=[name=U,password=P]",
                     help="a user's SCRAM credential (repeatable)")


def run(args) -> int:
    return run_command("storage", _format, args)


def parse_scram(text: str) -> tuple[str, str, int, str]:
    """``SCRAM-SHA-512=[name=admin,password=s]`` -> (mechanism, user, iterations, password)."""
    from odradek.protocol.scram import MECHANISMS

    mechanism, sep, body = text.partition("=")
    mechanism = mechanism.strip()
    if not sep or mechanism not in MECHANISMS or not (body.startswith("[") and body.endswith("]")):
        raise CommandError(f"--add-scram {text!r}: expected SCRAM-SHA-256 or SCRAM-SHA-512 "
                           f"=[name=<user>,password=<password>]")
    fields = {}
    for item in split_top_level(body[1:-1]):
        key, eq, value = item.partition("=")
        if not eq or key.strip() not in ("name", "password", "iterations"):
            raise CommandError(f"--add-scram {text!r}: unknown field {item!r} (name, password, iterations)")
        fields[key.strip()] = value
    if "name" not in fields or "password" not in fields:
        raise CommandError(f"--add-scram {text!r}: needs name=<user> and password=<password>")
    prefix = f"iterations={fields['iterations']}," if "iterations" in fields else ""
    iterations, password = parse_credential(mechanism, prefix + "password=" + fields["password"])
    return mechanism, fields["name"].strip().strip('"'), iterations, password.strip('"')


def _format(args) -> int:
    from odradek.metadata.errors import StoreError
    from odradek.protocol.scram import make_credential
    from odradek.server import scram_credentials
    from odradek.server.config import BrokerConfig, ConfigError
    from odradek.server.metadata_setup import open_metadata

    credentials = [parse_scram(text) for text in args.add_scram]
    try:
        config = BrokerConfig.load(args.config, {})
    except ConfigError as e:
        raise CommandError(f"{args.config}: {e}") from None
    try:
        metadata = open_metadata(config)
    except (StoreError, OSError) as e:
        raise CommandError(f"cannot open the metadata store of {args.config} (is the broker running?): {e}") from None
    try:
        for mechanism, user, iterations, password in credentials:
            credential = make_credential(mechanism, password, iterations=iterations)
            scram_credentials.alter(metadata.store, user, {mechanism: credential}, [])
            print(f"Added {mechanism} credential for user {user}.")
    finally:
        metadata.close()
        metadata.store.close()
    return 0
