"""``odradek configs --entity-type users``: SCRAM credentials, as ``kafka-configs.sh`` manages
them over ``--bootstrap-server`` (AlterUserScramCredentials, DescribeUserScramCredentials), or
with ``--zookeeper`` (alter only) straight in ZooKeeper before any broker runs.

    odradek configs --entity-type users --entity-name alice --alter \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]'
    odradek configs --entity-type users --entity-name alice --alter --delete-config SCRAM-SHA-512
    odradek configs --entity-type users --entity-name alice --describe
    # SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192

A credential's value is ``[iterations=<n>,]password=<password>`` (iterations 4096 when not
given, at least 4096); the password is salted and hashed by the client, never sent. Only
SCRAM-SHA-256 and SCRAM-SHA-512 keys are accepted for users here (quotas are another command's
business). Without ``--entity-name``, ``--describe`` lists every user with credentials.
"""

from __future__ import annotations

import re

from odradek.cli.common import CommandError, parse_pairs, print_json, split_top_level
from odradek.protocol.scram import DEFAULT_ITERATIONS, MECHANISMS

_CREDENTIAL = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)", re.S)


def parse_credential(mechanism: str, text: str) -> tuple[int, str]:
    """``[iterations=<n>,]password=<p>`` -> (iterations, password), as Kafka's ConfigCommand."""
    match = _CREDENTIAL.fullmatch(text)
    if match is None:
        raise CommandError(f"Invalid credential property {mechanism}={text}")
    raw, password = match.groups()
    iterations = int(raw) if raw and raw != "-1" else DEFAULT_ITERATIONS
    if iterations < MECHANISMS[mechanism][1]:
        raise CommandError(f"Iterations {iterations} is less than the minimum {MECHANISMS[mechanism][1]} "
                           f"required for {mechanism}")
    return iterations, password


def _check_names(names, what: str) -> None:
    unexpected = [n for n in names if n not in MECHANISMS]
    if unexpected:
        raise CommandError(f"Only SCRAM credential configs can be {what} for 'users' (SCRAM-SHA-256, "
                           f"SCRAM-SHA-512). Unexpected config names: {', '.join(unexpected)}")


def _alterations(args) -> tuple[dict[str, tuple[int, str]], list[str]]:
    """``({mechanism: (iterations, password)}, [mechanism to delete])`` of ``--alter``."""
    to_set = parse_pairs(args.add_config, "--add-config", split_commas=True)
    to_delete = [k for item in args.delete_config for k in split_top_level(item)]
    if not to_set and not to_delete:
        raise CommandError("--alter needs --add-config or --delete-config")
    _check_names(to_set, "added")
    _check_names(to_delete, "deleted")
    return {m: parse_credential(m, text) for m, text in to_set.items()}, to_delete


def alter(admin, user: str, args) -> int:
    from odradek.client.admin_scram import UserScramCredentialDeletion, UserScramCredentialUpsertion

    to_set, to_delete = _alterations(args)
    alterations = [UserScramCredentialDeletion(user, m) for m in to_delete]
    for mechanism, (iterations, password) in to_set.items():
        alterations.append(UserScramCredentialUpsertion(user, mechanism, password, iterations))
    errors = {u: e for u, e in admin.alter_user_scram_credentials(alterations).items() if e is not None}
    if errors:
        raise CommandError("; ".join(str(e) for e in errors.values()))
    print(f"Completed updating config for user {user}.")
    return 0


def alter_in_zookeeper(connect: str, user: str, args) -> int:
    """``--zookeeper HOST:PORT[/chroot] --alter``: the credentials written straight into
    ZooKeeper, as Kafka's ConfigCommand still allows for SCRAM so that the brokers' own
    credential exists before any broker runs (``odradek storage format`` does the same for
    either store). The password is salted and hashed here."""
    from odradek.metadata.errors import StoreError
    from odradek.metadata.zookeeper_store import ZooKeeperStore
    from odradek.protocol.scram import make_credential
    from odradek.server import scram_credentials

    to_set, to_delete = _alterations(args)
    print("Warning: --zookeeper is deprecated and will be removed in a future version of Kafka.")
    print("Use --bootstrap-server instead to specify a broker to connect to.")
    hosts, _, chroot = connect.partition("/")
    try:
        store = ZooKeeperStore(hosts, chroot="/" + chroot if chroot else None, connect_timeout=10)
    except StoreError as e:
        raise CommandError(f"--zookeeper {connect}: {e}") from None
    try:
        missing = [m for m in to_delete if m not in scram_credentials.user_config(store, user)]
        if missing:
            raise CommandError(f"Invalid config(s): {','.join(missing)}")
        upserts = {m: make_credential(m, password, iterations=iterations)
                   for m, (iterations, password) in to_set.items()}
        scram_credentials.alter(store, user, upserts, to_delete)
    finally:
        store.close()
    print(f"Completed updating config for entity: user-principal '{user}'.")
    return 0


def describe(admin, user: str | None, args) -> int:
    found = admin.describe_user_scram_credentials(None if user is None else [user])
    if args.output == "json":
        print_json({"entity_type": "users", "users": [
            {"user": u, "error": str(d)} if isinstance(d, Exception) else
            {"user": u, "credentials": [{"mechanism": m, "iterations": i} for m, i in d.items()]}
            for u, d in found.items()]})
        return 0
    for name, described in found.items():
        if isinstance(described, Exception):
            print(f"Error retrieving SCRAM credential configs for user-principal '{name}': {described}")
            continue
        text = ", ".join(f"{m}=iterations={i}" for m, i in described.items())
        print(f"SCRAM credential configs for user-principal '{name}' are {text}")
    return 0
