"""``odradek topics``: create, list, describe, alter and delete topics (``kafka-topics.sh``).

    odradek topics --bootstrap-server H:P --create --topic T --partitions N --replication-factor R
    odradek topics --bootstrap-server H:P --create --topic T --replica-assignment 1000:1001,1001:1002
    odradek topics --list | --describe [--topic T] | --alter --topic T --partitions N | --delete --topic T
    odradek topics ... --create | --alter --partitions N ... --disable-rack-aware

``--replica-assignment`` is Kafka's syntax: commas separate partitions, colons
separate the replicas of one partition, preferred leader first. ``1000,1000,1000,1000,1000``
is five partitions, each with one replica on broker 1000; ``1000:1001,1001:1002`` is two
partitions with two replicas each. It replaces ``--partitions`` and
``--replication-factor``. With ``--alter`` it lists every partition, and the entries
beyond the current count place the new partitions.

Replicas are placed by the brokers with Kafka's algorithm, rack-aware when the brokers have a
``broker.rack`` (the replicas of a partition spread over the racks); when only some brokers
have one the creation is refused (INVALID_REPLICA_ASSIGNMENT). ``--disable-rack-aware``
makes the tool compute a rack-unaware assignment itself, over the live brokers that
DescribeCluster lists (as kafka-topics.sh did with ``--zookeeper``), and send it as an
explicit one.

``--topic`` names one topic; a value with characters a topic name cannot hold (``*``, ``|``,
``[`` ...) is a regular expression matched against every name, as Kafka's tool allows.

``--describe`` prints, per topic, kafka-topics.sh's summary line and a line per partition
when standard output is a pipe or file (``--output text``), a table on a terminal
(``--output table``), or JSON (``--output json``)::

    Topic: T\tTopicId: <id>\tPartitionCount: 2\tReplicationFactor: 1\tConfigs: retention.ms=1000
    \tTopic: T\tPartition: 0\tLeader: 1000\tReplicas: 1000\tIsr: 1000
    \tTopic: T\tPartition: 1\tLeader: 1000\tReplicas: 1000\tIsr: 1000

``Configs`` are the topic's configs whose value is not Kafka's default (a topic override, or
a broker setting); a partition being reassigned adds ``\tAdding Replicas: ..\tRemoving
Replicas: ..``. ``--topics-with-overrides`` prints only the summaries, of the topics that have
such configs.

``--describe`` with any of the replication reports lists only the partitions that at least
one of them selects (kafka-topics.sh's rules), without the topic summaries:

    --under-replicated-partitions   ISR smaller than the replicas
    --unavailable-partitions        no leader, or a leader that is not a live broker
    --under-min-isr-partitions      no leader, or ISR smaller than the topic's min.insync.replicas
    --at-min-isr-partitions         ISR exactly min.insync.replicas
"""

from __future__ import annotations

import argparse
import base64
import re

from odradek.cli.common import (
    CommandError,
    add_bootstrap,
    add_output,
    admin_client,
    parse_pairs,
    print_json,
    print_table,
    run_command,
    warn_message_format_version,
)

_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")
_ACTIONS = ("create", "list", "describe", "alter", "delete")
_REPORTS = ("under_replicated_partitions", "unavailable_partitions", "under_min_isr_partitions",
            "at_min_isr_partitions")


def add_parser(sub) -> None:
    p = sub.add_parser("topics", help="create, list, describe, alter and delete topics",
                       description=__doc__.replace("``", ""), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bootstrap(p)
    actions = p.add_mutually_exclusive_group(required=True)
    actions.add_argument("--create", action="store_true", help="create a topic")
    actions.add_argument("--list", action="store_true", help="list topic names")
    actions.add_argument("--describe", action="store_true", help="partitions, leaders, replicas, ISR, configs")
    actions.add_argument("--alter", action="store_true", help="add partitions to a topic")
    actions.add_argument("--delete", action="store_true", help="delete a topic")
    p.add_argument("--topic", metavar="TOPIC", help="a topic name (or a regular expression, see above)")
    p.add_argument("--partitions", type=int, metavar="N", help="partitions (create), new total (alter)")
    p.add_argument("--replication-factor", type=int, metavar="R", help="replicas of each partition")
    p.add_argument("--replica-assignment", metavar="B:B,B:B,...",
                   help="explicit replicas: commas between partitions, colons between replicas")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="a topic config for --create, repeatable")
    p.add_argument("--disable-rack-aware", action="store_true",
                   help="--create / --alter --partitions: place replicas ignoring the brokers' racks")
    p.add_argument("--if-not-exists", action="store_true", help="--create: no error if it exists")
    p.add_argument("--if-exists", action="store_true", help="--alter/--delete/--describe: no error if absent")
    p.add_argument("--exclude-internal", action="store_true", help="leave out internal topics")
    p.add_argument("--under-replicated-partitions", action="store_true",
                   help="--describe: only partitions whose ISR is smaller than their replicas")
    p.add_argument("--unavailable-partitions", action="store_true",
                   help="--describe: only partitions without a live leader")
    p.add_argument("--under-min-isr-partitions", action="store_true",
                   help="--describe: only partitions whose ISR is smaller than min.insync.replicas")
    p.add_argument("--at-min-isr-partitions", action="store_true",
                   help="--describe: only partitions whose ISR is exactly min.insync.replicas")
    p.add_argument("--topics-with-overrides", action="store_true",
                   help="--describe: only the summaries of topics whose configs differ from the defaults")
    add_output(p, ("table", "json", "text"))


def run(args) -> int:
    return run_command("topics", _run, args)


def _run(args) -> int:
    action = next(a for a in _ACTIONS if getattr(args, a))
    if action in ("create", "alter", "delete") and not args.topic:
        raise CommandError(f"--{action} needs --topic")
    if args.config and action != "create":
        raise CommandError("--config goes with --create (change configs with 'odradek configs')")
    if args.disable_rack_aware and action not in ("create", "alter"):
        raise CommandError("--disable-rack-aware goes with --create or --alter")
    for option in (*_REPORTS, "topics_with_overrides"):
        if getattr(args, option) and action != "describe":
            raise CommandError(f"--{option.replace('_', '-')} goes with --describe")
    if args.topics_with_overrides and any(getattr(args, r) for r in _REPORTS):
        raise CommandError("--topics-with-overrides lists topics, the replication reports list partitions: "
                           "give one or the other")
    with admin_client(args) as admin:
        return _HANDLERS[action](admin, args)


# --- replica assignment ------------------------------------------------------------------
def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    """Kafka's ``--replica-assignment`` as ``{partition: [broker, ...]}`` (see module doc).

    Every partition must list the same number of replicas, each broker once."""
    assignment: dict[int, list[int]] = {}
    for partition, part in enumerate(text.split(",")):
        try:
            brokers = [int(b) for b in part.split(":")]
        except ValueError:
            raise CommandError(f"--replica-assignment: {part.strip()!r} (partition {partition}) "
                               "is not broker ids joined by ':'") from None
        if len(set(brokers)) != len(brokers):
            raise CommandError(f"--replica-assignment: partition {partition} lists a broker twice: {part}")
        if any(b < 0 for b in brokers):
            raise CommandError(f"--replica-assignment: negative broker id in partition {partition}")
        assignment[partition] = brokers
    counts = {len(b) for b in assignment.values()}
    if len(counts) > 1:
        raise CommandError("--replica-assignment: partitions have different replica counts "
                           f"({', '.join(str(c) for c in sorted(counts))})")
    return assignment


# --- actions -----------------------------------------------------------------------------
def _create(admin, args) -> int:
    from odradek.client import BrokerError, NewTopic
    from odradek.protocol.generated.error_codes import ErrorCode

    configs = parse_pairs(args.config, "--config")
    warn_message_format_version(configs)
    if args.replica_assignment is not None:
        if args.partitions is not None or args.replication_factor is not None:
            raise CommandError("--replica-assignment replaces --partitions and --replication-factor")
        topic = NewTopic(args.topic, replica_assignment=parse_replica_assignment(args.replica_assignment),
                         configs=configs)
    else:
        for flag, value in (("--partitions", args.partitions), ("--replication-factor", args.replication_factor)):
            if value is not None and value <= 0:
                raise CommandError(f"{flag} must be positive, not {value}")
        topic = NewTopic(args.topic, -1 if args.partitions is None else args.partitions,
                         -1 if args.replication_factor is None else args.replication_factor, configs=configs)
        if args.disable_rack_aware:
            topic = NewTopic(args.topic, replica_assignment=_rack_unaware_assignment(admin, topic), configs=configs)
    try:
        admin.create_topics([topic])
    except BrokerError as e:
        if args.if_not_exists and e.code == ErrorCode.TOPIC_ALREADY_EXISTS:
            return 0
        _explain_rack_refusal(e)
        raise
    print(f"Created topic {args.topic}.")
    return 0


def _list(admin, args) -> int:
    names = admin.list_topics(include_internal=not args.exclude_internal)
    if args.topic:
        names = _matching(names, args.topic)
    for name in names:
        if args.output == "json":
            print_json({"topic": name})
        else:
            print(name)
    return 0


def _matching(names, pattern: str) -> list[str]:
    """The names ``pattern`` selects: itself when it is a legal name, else a regex match."""
    if _LEGAL_NAME.fullmatch(pattern):
        return [n for n in names if n == pattern]
    try:
        regex = re.compile(pattern)
    except re.error as e:
        raise CommandError(f"--topic {pattern!r} is neither a topic name nor a valid regex: {e}") from None
    return [n for n in names if regex.fullmatch(n)]


def _selected(admin, args) -> list[str]:
    """The existing topics ``--topic`` selects (every topic without it)."""
    names = admin.list_topics(include_internal=not args.exclude_internal)
    if not args.topic:
        return names
    found = _matching(names, args.topic)
    if not found and not args.if_exists:
        raise CommandError(f"Topic '{args.topic}' does not exist as expected")
    return found


def _alter(admin, args) -> int:
    from odradek.client import BrokerError, NewPartitions

    if args.partitions is None:
        raise CommandError("--alter needs --partitions (the new total)")
    if args.replication_factor is not None:
        raise CommandError("--alter cannot change the replication factor")
    names = _selected(admin, args)
    descriptions = admin.describe_topics(names) if names else {}
    for name in names:
        current = len(descriptions[name].partitions)
        if args.partitions <= current:
            raise CommandError(f"topic {name} has {current} partitions; --partitions must be more than that")
        assignments = None
        if args.replica_assignment is not None:
            given = parse_replica_assignment(args.replica_assignment)
            if len(given) != args.partitions:
                raise CommandError(f"--replica-assignment lists {len(given)} partitions, "
                                   f"--partitions says {args.partitions}")
            assignments = [given[p] for p in range(current, args.partitions)]
        elif args.disable_rack_aware:
            assignments = _rack_unaware_new_partitions(admin, descriptions[name], args.partitions)
        try:
            admin.create_partitions({name: NewPartitions(args.partitions, assignments)})
        except BrokerError as e:
            _explain_rack_refusal(e)
            raise
        print(f"Topic {name} now has {args.partitions} partitions.")
    return 0


def _broker_racks(admin) -> dict[int, str | None]:
    return {b.node_id: b.rack for b in admin.describe_cluster().brokers}


def _rack_unaware_assignment(admin, topic) -> dict[int, list[int]]:
    """Kafka's rack-unaware assignment of ``topic`` over the live brokers; a count left out
    (-1) is the broker's ``num.partitions`` / ``default.replication.factor``."""
    from odradek.controller.assignment import RackAwareMode, assign_replicas_to_brokers
    from odradek.metadata.errors import MetadataError

    racks = _broker_racks(admin)
    partitions, replication = topic.num_partitions, topic.replication_factor
    if partitions == -1 or replication == -1:
        defaults = _broker_defaults(admin, min(racks))
        partitions = int(defaults["num.partitions"]) if partitions == -1 else partitions
        replication = int(defaults["default.replication.factor"]) if replication == -1 else replication
    try:
        return assign_replicas_to_brokers(racks, partitions, replication, rack_aware_mode=RackAwareMode.DISABLED)
    except MetadataError as e:
        raise CommandError(str(e)) from None


def _rack_unaware_new_partitions(admin, description, total: int) -> list[list[int]]:
    """The replicas of partitions ``len(description.partitions) .. total - 1``, rack-unaware,
    continuing the topic's pattern (Kafka's ``assign_new_partitions``)."""
    from odradek.controller.assignment import RackAwareMode, assign_new_partitions
    from odradek.metadata.errors import MetadataError

    existing = {p.partition: list(p.replicas) for p in description.partitions}
    try:
        added = assign_new_partitions(_broker_racks(admin), existing, total, rack_aware_mode=RackAwareMode.DISABLED)
    except MetadataError as e:
        raise CommandError(str(e)) from None
    return [added[p] for p in sorted(added)]


def _broker_defaults(admin, broker_id: int) -> dict[str, str]:
    from odradek.client import ConfigResource, ResourceType

    resource = ConfigResource(ResourceType.BROKER, str(broker_id))
    entries = admin.describe_configs([resource]).get(resource, {})
    return {k: e.value for k, e in entries.items()}


def _explain_rack_refusal(error) -> None:
    """A refusal because only some brokers have a rack, said as kafka-topics.sh says it."""
    from odradek.protocol.generated.error_codes import ErrorCode

    if error.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT and "rack" in (error.message or ""):
        raise CommandError("Not all brokers have rack information. Add --disable-rack-aware in command line "
                           "to make replica assignment without rack information.") from None


def _delete(admin, args) -> int:
    names = _selected(admin, args)
    internal = [n for n in names if n.startswith("__")]
    if internal:
        raise CommandError(f"internal topic {internal[0]} cannot be deleted")
    if names:
        admin.delete_topics(names)
    for name in names:
        print(f"Deleted topic {name}.")
    return 0


def _describe(admin, args) -> int:
    from odradek.client import ConfigResource, ConfigSource, ResourceType

    names = _selected(admin, args)
    if not names:
        return 0
    descriptions = admin.describe_topics(names)
    resources = [ConfigResource(ResourceType.TOPIC, n) for n in names]
    configs = admin.describe_configs(resources)
    live = {b.node_id for b in admin.describe_cluster().brokers}
    reports = {r for r in _REPORTS if getattr(args, r)}
    moving = _reassignments(admin, descriptions)
    selected = []  # (topic, partitions a report selects)
    for name in names:
        topic = descriptions[name]
        entries = configs.get(ConfigResource(ResourceType.TOPIC, name), {})
        if reports:
            min_isr = _min_isr(entries)
            partitions = [p for p in topic.partitions
                          if reports & partition_reports(p, live, min_isr, moving.get((name, p.partition)))]
            if partitions:
                selected.append((topic, partitions))
            continue
        # Kafka's ConfigEntry.isDefault: only a value from DEFAULT_CONFIG is a default.
        not_default = {k: e.value for k, e in sorted(entries.items()) if e.source != ConfigSource.DEFAULT_CONFIG}
        if args.topics_with_overrides and not not_default:
            continue
        partitions = () if args.topics_with_overrides else topic.partitions
        _show_topic(topic, not_default, partitions, args.output, moving)
    if reports:
        _show_partitions(selected, args.output, moving)
    return 0


def partition_reports(partition, live: set[int], min_isr: int, reassignment=None) -> set[str]:
    """The replication reports that select ``partition`` (Kafka's ``PartitionDescription``:
    ``isUnderReplicated``, ``hasUnavailablePartitions``, ``isUnderMinIsr``,
    ``isAtMinIsrPartitions``), given the live brokers, the topic's min.insync.replicas and the
    partition's reassignment in progress, if any: while one moves the partition, its
    replication factor is the replicas less those being added (Kafka's
    ``getReplicationFactor``), so replicas still catching up do not count as missing."""
    has_leader = partition.leader >= 0
    found = set()
    if _replication_factor(partition, reassignment) - len(partition.isr) > 0:
        found.add("under_replicated_partitions")
    if not has_leader or partition.leader not in live:
        found.add("unavailable_partitions")
    if not has_leader or len(partition.isr) < min_isr:
        found.add("under_min_isr_partitions")
    if len(partition.isr) == min_isr:
        found.add("at_min_isr_partitions")
    return found


def _reassignments(admin, descriptions) -> dict:
    """The reassignments in progress of the described partitions; none when the cluster does
    not answer ListPartitionReassignments or does not let us ask (as kafka-topics.sh)."""
    from odradek.client import BrokerError, UnsupportedVersionError
    from odradek.protocol.generated.error_codes import ErrorCode

    partitions = [(t.name, p.partition) for t in descriptions.values() for p in t.partitions]
    try:
        return admin.list_partition_reassignments(partitions) if partitions else {}
    except UnsupportedVersionError:
        return {}
    except BrokerError as e:
        if e.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
            return {}
        raise


def _min_isr(entries: dict) -> int:
    """The topic's min.insync.replicas (DescribeConfigs gives the default when not set)."""
    entry = entries.get("min.insync.replicas")
    try:
        return int(entry.value) if entry is not None and entry.value is not None else 1
    except ValueError:
        return 1


def kafka_topic_id(topic_id) -> str:
    """A topic id as Kafka prints it: URL-safe base64 of its 16 bytes, no padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")


def _show_topic(topic, configs: dict, partitions, output: str, moving: dict) -> None:
    """One topic: its summary and ``partitions`` (none with --topics-with-overrides)."""
    first = topic.partitions[0] if topic.partitions else None
    replication = _replication_factor(first, moving.get((topic.name, first.partition))) if first else 0
    config_text = ",".join(f"{k}={v}" for k, v in configs.items())
    if output == "json":
        doc = {"topic": topic.name, "topic_id": kafka_topic_id(topic.topic_id), "internal": topic.is_internal,
               "partition_count": len(topic.partitions), "replication_factor": replication, "configs": configs}
        if partitions:
            doc["partitions"] = [_partition_json(p) for p in partitions]
        print_json(doc)
        return
    summary = (f"Topic: {topic.name}\tTopicId: {kafka_topic_id(topic.topic_id)}\t"
               f"PartitionCount: {len(topic.partitions)}\tReplicationFactor: {replication}\tConfigs: {config_text}")
    if output == "text":  # kafka-topics.sh --describe, line for line
        print(summary)
        for p in partitions:
            print(partition_line(topic.name, p, moving.get((topic.name, p.partition))))
        return
    title = summary.replace("\t", "   ")
    if not partitions:
        print(title)
        return
    rows = [(p.partition, _leader(p.leader), _ids(p.replicas), _ids(p.isr), _ids(p.offline_replicas) or "")
            for p in partitions]
    print_table(("PARTITION", "LEADER", "REPLICAS", "ISR", "OFFLINE"), rows, title=title)


def _partition_json(p, topic: str | None = None) -> dict:
    doc = {"topic": topic} if topic is not None else {}
    doc.update({"partition": p.partition, "leader": p.leader, "replicas": list(p.replicas), "isr": list(p.isr),
                "offline_replicas": list(p.offline_replicas)})
    return doc


def _replication_factor(partition, reassignment) -> int:
    """Kafka's ``getReplicationFactor``: while a reassignment moves the partition, its
    replicas less those being added."""
    if reassignment is not None and set(partition.replicas) & (
            set(reassignment.adding_replicas) | set(reassignment.removing_replicas)):
        return len(reassignment.replicas) - len(reassignment.adding_replicas)
    return len(partition.replicas)


def _show_partitions(selected, output: str, moving: dict) -> None:
    """The partitions the replication reports chose, of every topic, without summaries."""
    if output == "json":
        for topic, partitions in selected:
            for p in partitions:
                print_json(_partition_json(p, topic.name))
        return
    if output == "text":  # kafka-topics.sh prints only the partition lines here
        for topic, partitions in selected:
            for p in partitions:
                print(partition_line(topic.name, p, moving.get((topic.name, p.partition))))
        return
    rows = [(topic.name, p.partition, _leader(p.leader), _ids(p.replicas), _ids(p.isr),
             _ids(p.offline_replicas) or "") for topic, partitions in selected for p in partitions]
    if rows:  # nothing to report prints nothing, as kafka-topics.sh does
        print_table(("TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", "OFFLINE"), rows)


def partition_line(name: str, p, reassignment=None) -> str:
    """Kafka 3's ``PartitionDescription.printDescription``: tab-led fields; ``Adding
    Replicas`` and ``Removing Replicas`` while a reassignment is in progress."""
    line = (f"\tTopic: {name}\tPartition: {p.partition}\tLeader: {_leader(p.leader)}\t"
            f"Replicas: {_ids(p.replicas)}\tIsr: {_ids(p.isr)}")
    if reassignment is not None:
        line += (f"\tAdding Replicas: {_ids(reassignment.adding_replicas)}"
                 f"\tRemoving Replicas: {_ids(reassignment.removing_replicas)}")
    return line


def _leader(leader: int) -> str:
    return "none" if leader < 0 else str(leader)


def _ids(ids) -> str:
    return ",".join(str(i) for i in ids)


_HANDLERS = {"create": _create, "list": _list, "describe": _describe, "alter": _alter, "delete": _delete}
