"""``odradek configs``: describe and change topic, broker and broker-logger configs
(``kafka-configs.sh``).

    odradek configs --entity-type topics --entity-name T --describe [--all]
    odradek configs --entity-type topics --entity-name T --alter --add-config retention.ms=1000,cleanup.policy=[compact,delete]
    odradek configs --entity-type brokers --entity-name 1000 --alter --delete-config log.cleaner.threads
    odradek configs --entity-type brokers --entity-default --describe
    odradek configs --entity-type broker-loggers --entity-name 1000 --alter --add-config odradek.broker=DEBUG
    odradek configs --entity-type users --entity-name alice --alter --add-config 'SCRAM-SHA-512=[password=alice-secret]'
    odradek configs --entity-type clients --entity-name greedy --alter --add-config producer_byte_rate=204800
    odradek configs --entity-type groups --entity-name G --alter --add-config share.auto.offset.reset=earliest
    odradek configs --user alice --client c1 --describe

``--describe`` shows the configs set on the entity (a topic's overrides, a broker's dynamic
settings, every logger of a broker with its level); ``--all`` shows every config with its
value and where that value comes from. Without ``--entity-name`` it describes every topic or
broker. On a terminal it prints a table; piped (or ``--output text``), kafka-configs.sh's
lines: ``Dynamic configs for topic T are:`` then ``  name=value sensitive=false
synonyms={DYNAMIC_TOPIC_CONFIG:name=value, ...}`` per config.

``--alter`` sets (``--add-config``, commas between pairs, square brackets around list
values) and removes (``--delete-config``, names joined by commas) keys in one
IncrementalAlterConfigs request; a removed key falls back to the broker's (or Kafka's)
default, a removed logger level to its parent's. As Kafka's tool, ``--alter`` refuses to
delete a key that is not set ("Invalid config(s): k") and to name a logger the broker does not
have ("Invalid broker logger(s): l"). Users' SCRAM credentials (also ``--zookeeper``, before the
brokers run): ``cli/user_scram_configs.py``;
users' and clients' quotas: ``cli/client_quota_configs.py``.
"""

from __future__ import annotations

import argparse

from odradek.cli import client_quota_configs, user_scram_configs
from odradek.cli.common import (
    CommandError,
    add_bootstrap,
    add_output,
    admin_client,
    parse_pairs,
    print_json,
    print_table,
    run_command,
    split_top_level,
    warn_message_format_version,
)

_TYPES = {"topics": "topic", "brokers": "broker", "broker-loggers": "broker-logger", "users": "user",
          "clients": "client", "groups": "group"}  # groups: Kafka 4's group configs (server/group_configs.py)



def add_parser(sub) -> None:
    p = sub.add_parser("configs", help="describe and change topic and broker configs",
                       description=__doc__.replace("``", ""), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bootstrap(p)
    p.add_argument("--zookeeper", metavar="HOST:PORT[/CHROOT]",
                   help="deprecated, as in Kafka: users' SCRAM credentials (--alter) written straight into "
                        "ZooKeeper, before the brokers run")
    p.add_argument("--entity-type", choices=sorted(_TYPES), help="topics, brokers, broker-loggers, users, clients or groups")
    p.add_argument("--entity-name", metavar="NAME", help="a topic name, broker id, user name or client id")
    p.add_argument("--entity-default", action="store_true",
                   help="brokers: the cluster-wide defaults; users, clients: the default quota entity")
    p.add_argument("--user", metavar="USER", help="quotas of a user (with --client: of that user's client id)")
    p.add_argument("--client", metavar="CLIENT_ID", help="quotas of a client id")
    p.add_argument("--topic", metavar="T", help="same as --entity-type topics --entity-name T")
    p.add_argument("--broker", metavar="ID", help="same as --entity-type brokers --entity-name ID")
    p.add_argument("--broker-logger", metavar="ID", help="same as --entity-type broker-loggers --entity-name ID")
    actions = p.add_mutually_exclusive_group(required=True)
    actions.add_argument("--describe", action="store_true", help="show configs")
    actions.add_argument("--alter", action="store_true", help="change configs")
    p.add_argument("--all", action="store_true", help="--describe: every config, defaults included")
    p.add_argument("--add-config", action="append", default=[], metavar="K=V[,K=V]",
                   help="--alter: keys to set")
    p.add_argument("--delete-config", action="append", default=[], metavar="K[,K]",
                   help="--alter: keys to remove")
    add_output(p, ("table", "json", "text"))


def run(args) -> int:
    return run_command("configs", _run, args)


def _entity(args) -> tuple[str, str | None]:
    """``(entity type, name or None for all; "" for the broker defaults)``."""
    given = [t for t in (args.entity_type, "topics" if args.topic else None, "brokers" if args.broker else None,
                         "broker-loggers" if args.broker_logger else None) if t]
    if not given:
        raise CommandError("give --entity-type (topics, brokers or broker-loggers), "
                           "or --topic / --broker / --broker-logger")
    if len(set(given)) > 1:
        raise CommandError("--topic, --broker and --broker-logger name different entity types")
    kind = given[0]
    names = [n for n in (args.entity_name, args.topic, args.broker, args.broker_logger) if n is not None]
    if len(set(names)) > 1:
        raise CommandError("the entity is named twice, differently")
    if args.entity_default:
        if kind not in ("brokers", "users", "clients"):
            raise CommandError("--entity-default goes with --entity-type brokers, users or clients")
        if names:
            raise CommandError("--entity-default and --entity-name cannot be used together")
        return kind, ""
    if kind == "groups" and not names:
        raise CommandError("--entity-type groups needs --entity-name")
    if kind not in ("topics", "users", "clients", "groups") and names and not names[0].isdigit():
        raise CommandError(f"a broker's --entity-name is its id, not {names[0]!r}")
    return kind, names[0] if names else None


def _run(args) -> int:
    if args.user is not None or args.client is not None:
        return _quota_entity(args)
    kind, name = _entity(args)
    if args.alter and name is None:
        raise CommandError("--alter needs --entity-name (or --entity-default)")
    if not args.alter and (args.add_config or args.delete_config):
        raise CommandError("--add-config and --delete-config go with --alter")
    if args.zookeeper:
        return _in_zookeeper(args, kind, name)
    with admin_client(args) as admin:
        if kind == "clients" or (kind == "users" and (not args.alter or client_quota_configs.involves_quotas(args))):
            entity = {_QUOTA_TYPES[kind]: name or None}  # "" (--entity-default): the default entity
            if args.alter:
                return client_quota_configs.alter(admin, entity, args)
            client_quota_configs.describe(admin, entity, name is not None, args)
            if kind == "clients" or name == "":  # no SCRAM credentials for the default user
                return 0
        if kind == "users":  # SCRAM credentials (cli/user_scram_configs.py)
            return (user_scram_configs.alter if args.alter else user_scram_configs.describe)(admin, name, args)
        if kind not in ("topics", "groups") and name:
            _check_broker(admin, name)
        if args.alter:
            return _alter(admin, kind, name, args)
        return _describe(admin, kind, name, args)


_QUOTA_TYPES = {"users": "user", "clients": "client-id"}


def _in_zookeeper(args, kind: str, name: str | None) -> int:
    """``--zookeeper``: only what Kafka's tool still does there and odradek needs, a user's
    SCRAM credentials altered before the brokers run."""
    if args.bootstrap_server:
        raise CommandError("Only one of --bootstrap-server and --zookeeper can be specified")
    if kind != "users" or not args.alter or not name or client_quota_configs.involves_quotas(args):
        raise CommandError("--zookeeper: odradek alters only users' SCRAM credentials there "
                           "(--entity-type users --entity-name U --alter); use --bootstrap-server")
    return user_scram_configs.alter_in_zookeeper(args.zookeeper, name, args)


def _quota_entity(args) -> int:
    """``--user U`` and/or ``--client C``: one quota entity (a user's client id with both)."""
    if args.entity_type or args.entity_name or args.entity_default or args.topic or args.broker or args.broker_logger:
        raise CommandError("--user and --client name the entity themselves")
    entity = {t: n for t, n in (("user", args.user), ("client-id", args.client)) if n is not None}
    with admin_client(args) as admin:
        if args.alter:
            return client_quota_configs.alter(admin, entity, args)
        return client_quota_configs.describe(admin, entity, True, args)


def _check_broker(admin, broker_id: str) -> None:
    """A broker's configs are asked of that broker: one the cluster does not have is named at
    once, rather than after the client gave up waiting for it to appear."""
    ids = sorted(b.node_id for b in admin.describe_cluster().brokers)
    if int(broker_id) not in ids:
        raise CommandError(f"broker {broker_id} is not in the cluster (its brokers: {', '.join(map(str, ids))})")


def _resource(kind: str, name: str):
    from odradek.client import ConfigResource, ResourceType

    types = {"topics": ResourceType.TOPIC, "brokers": ResourceType.BROKER, "broker-loggers": ResourceType.BROKER_LOGGER,
             "groups": ResourceType.GROUP}
    return ConfigResource(types[kind], name)


def _what(kind: str, name: str) -> str:
    return "default config for brokers in the cluster" if name == "" else f"config for {_TYPES[kind]} {name}"


def _alter(admin, kind: str, name: str, args) -> int:
    from odradek.client import AlterConfigOp, AlterConfigOpType, UnsupportedVersionError

    to_set = parse_pairs(args.add_config, "--add-config", split_commas=True)
    to_delete = [k for item in args.delete_config for k in split_top_level(item)]
    if not to_set and not to_delete:
        raise CommandError("--alter needs --add-config or --delete-config")
    both = sorted(set(to_set) & set(to_delete))
    if both:
        raise CommandError(f"{both[0]} is both added and deleted")
    warn_message_format_version(to_set)
    resource = _resource(kind, name)
    current = _dynamic(admin.describe_configs([resource], include_synonyms=True)[resource], kind, name)
    if kind == "broker-loggers":
        unknown = [k for k in [*to_delete, *to_set] if k not in current]
        if unknown:
            raise CommandError(f"Invalid broker logger(s): {','.join(unknown)}")
    else:
        unset = [k for k in to_delete if k not in current]
        if unset:
            raise CommandError(f"Invalid config(s): {','.join(unset)}")
    ops = [AlterConfigOp(k, v, AlterConfigOpType.SET) for k, v in to_set.items()]
    ops += [AlterConfigOp(k, None, AlterConfigOpType.DELETE) for k in to_delete]
    try:
        admin.incremental_alter_configs({resource: ops})
    except UnsupportedVersionError:
        if kind == "broker-loggers":
            raise
        # A broker older than IncrementalAlterConfigs: replace the whole set of overrides.
        merged = {k: e.value for k, e in current.items() if k not in to_delete}
        merged.update(to_set)
        admin.alter_configs({resource: merged})
    print(f"Completed updating {_what(kind, name)}.")
    return 0


def _dynamic(entries: dict, kind: str, name: str | None = None) -> dict:
    """The entries set on the entity itself (what ``--describe`` shows without ``--all``): a
    topic's overrides, a broker's own dynamic configs (or the cluster default's, for name
    ""), every logger of a broker."""
    from odradek.client import ConfigSource

    if kind == "broker-loggers":
        return dict(entries)
    if kind == "topics":
        wanted = {ConfigSource.DYNAMIC_TOPIC_CONFIG}
    elif kind == "groups":
        wanted = {ConfigSource.GROUP_CONFIG}
    elif name is None:
        wanted = {ConfigSource.DYNAMIC_BROKER_CONFIG, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG}
    else:
        wanted = {ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG if name == "" else ConfigSource.DYNAMIC_BROKER_CONFIG}
    return {k: e for k, e in entries.items()
            if e.source in wanted or any(s[2] in wanted and s[0] == k for s in e.synonyms)}


def _describe(admin, kind: str, name: str | None, args) -> int:
    if name is not None:
        names = [name]
    elif kind == "topics":
        names = admin.list_topics()
    else:
        names = [str(b.node_id) for b in admin.describe_cluster().brokers]
    if not names:
        return 0
    resources = [_resource(kind, n) for n in names]
    found = admin.describe_configs(resources, include_synonyms=True)
    for n, resource in zip(names, resources):
        entries = found[resource]
        _show(kind, n, entries if args.all else _dynamic(entries, kind), args)
    return 0


def _source_name(source: int) -> str:
    from odradek.client import ConfigSource

    try:
        return ConfigSource(source).name
    except ValueError:
        return str(source)


def _show(kind: str, name: str, entries: dict, args) -> None:
    def source(e) -> str:
        return _source_name(e.source)

    rows = sorted(entries.values(), key=lambda e: e.name)
    if args.output == "json":
        print_json({"entity_type": kind, "entity_name": name,
                    "configs": [{"name": e.name, "value": None if e.is_sensitive else e.value, "source": source(e),
                                 "sensitive": e.is_sensitive, "read_only": e.read_only} for e in rows]})
        return
    scope = "All" if args.all else "Dynamic"
    if args.output == "text":  # kafka-configs.sh --describe, line for line
        print("Default configs for brokers in the cluster are:" if name == "" and kind == "brokers"
              else f"{scope} configs for {_TYPES[kind]} {name} are:")
        for e in rows:
            synonyms = ", ".join(f"{_source_name(source)}:{n}={v}" for n, v, source in e.synonyms)
            value = "null" if e.value is None or e.is_sensitive else e.value
            print(f"  {e.name}={value} sensitive={str(e.is_sensitive).lower()} synonyms={{{synonyms}}}")
        return
    title = ("Default configs for brokers in the cluster" if name == "" and not args.all
             else f"{scope} configs for {_TYPES[kind]} {name}")
    print_table(("NAME", "VALUE", "SOURCE", "SENSITIVE", "READ-ONLY"),
                [(e.name, "<hidden>" if e.is_sensitive else e.value, source(e), str(e.is_sensitive).lower(),
                  str(e.read_only).lower()) for e in rows], title=f"{title}:")
