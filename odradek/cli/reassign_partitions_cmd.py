"""``odradek reassign-partitions``: move partitions between brokers (``kafka-reassign-partitions.sh``).

    odradek reassign-partitions --generate --topics-to-move-json-file F --broker-list 1,2,3 [--disable-rack-aware]
    odradek reassign-partitions --execute --reassignment-json-file F [--throttle B/S] [--additional] [--wait]
    odradek reassign-partitions --verify --reassignment-json-file F [--preserve-throttles] [--wait]
    odradek reassign-partitions --cancel --reassignment-json-file F [--preserve-throttles]
    odradek reassign-partitions --list

--generate prints the current assignment of the topics and a proposal spreading them over the
brokers listed (Kafka's assignment algorithm, rack-aware when every broker has a rack), both as
reassignment JSON; it changes nothing. --execute starts the moves (AlterPartitionReassignments):
the controller adds the new replicas, waits until they joined the ISR, moves leadership if the
leader goes, then deletes the old replicas; producers and consumers carry on meanwhile. With
--throttle the copying is limited to that many bytes/s (the brokers' and topics' replication
throttle configs, as Kafka sets them); run --verify until it reports completion: it then
removes the throttles. --cancel stops the moves in the file, back to the old replicas.

--wait (odradek's; Kafka's tool returns at once) makes --execute and --verify wait until no
partition of the file is being reassigned any more, with a bar of the partitions done on
standard error when it is a terminal (--no-progress: none), then print each partition's status
as --verify does (--verify --wait then removes the throttles).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from odradek.cli.common import CommandError, add_bootstrap, admin_client, run_command
from odradek.cli.progress import count_bar
from odradek.cli.reassignment_plan import (
    PlanError,
    check_execute,
    follower_throttles,
    format_reassignment,
    leader_throttles,
    move_map,
    parse_broker_list,
    parse_reassignment,
    parse_topics,
    reassigning_brokers,
)

ACTIONS = ("generate", "execute", "verify", "cancel", "list")
# What each action needs and may take besides the connection options (Kafka's requiredArgs
# and permittedArgs).
REQUIRED = {"generate": ("topics_to_move_json_file", "broker_list"), "execute": ("reassignment_json_file",),
            "verify": ("reassignment_json_file",), "cancel": ("reassignment_json_file",), "list": ()}
PERMITTED = {"generate": ("disable_rack_aware",),
             "execute": ("throttle", "additional", "timeout", "wait", "no_progress"),
             "verify": ("preserve_throttles", "wait", "no_progress"), "cancel": ("preserve_throttles", "timeout"),
             "list": ()}
OPTIONS = ("topics_to_move_json_file", "broker_list", "reassignment_json_file", "disable_rack_aware", "throttle",
           "additional", "timeout", "preserve_throttles", "replica_alter_log_dirs_throttle", "wait", "no_progress")
WAIT_POLL_S = 0.5  # between ListPartitionReassignments while waiting: cheap, at the controller
# After --wait saw the moves done: how long (at most) and how often the brokers' metadata is read
# until it shows the new replicas (a broker learns them from its ZooKeeper watch, milliseconds
# after the controller stops listing the move).
SETTLE_S, SETTLE_POLL_S = 10.0, 0.05
BROKER_THROTTLES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                    "replica.alter.log.dirs.io.max.bytes.per.second")
TOPIC_THROTTLES = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
CANNOT_EXECUTE = ("Cannot execute because there is an existing partition assignment.  Use --additional to "
                  "override this and create a new partition assignment in addition to the existing one. The "
                  "--additional flag can also be used to change the throttle by resubmitting the current reassignment.")
RUN_VERIFY = ("Warning: You must run --verify periodically, until the reassignment completes, to ensure the "
              "throttle is removed.")


def add_parser(sub) -> None:
    p = sub.add_parser("reassign-partitions", help="move partitions between brokers",
                       description=__doc__.replace("``", ""), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bootstrap(p)
    for action in ACTIONS:
        p.add_argument(f"--{action}", dest="actions", action="append_const", const=action, help=f"{action} (see above)")
    p.add_argument("--topics-to-move-json-file", metavar="FILE", help="generate: the topics to move")
    p.add_argument("--broker-list", metavar="IDS", help="generate: the brokers to move them to, as 1,2,3")
    p.add_argument("--disable-rack-aware", action="store_true", default=None, help="generate: ignore racks")
    p.add_argument("--reassignment-json-file", metavar="FILE", help="execute, verify, cancel: the reassignment")
    p.add_argument("--throttle", type=int, metavar="B/S",
                   help="execute: limit the copying between brokers to this many bytes/s (at least 1 KB/s advised)")
    p.add_argument("--replica-alter-log-dirs-throttle", type=int, metavar="B/S",
                   help="not served: odradek does not move replicas between log directories")
    p.add_argument("--additional", action="store_true", default=None,
                   help="execute: in addition to the reassignments in progress (or to change their throttle)")
    p.add_argument("--timeout", type=int, metavar="MS", help="accepted (log directory moves only)")
    p.add_argument("--preserve-throttles", action="store_true", default=None,
                   help="verify, cancel: leave the throttles as they are")
    p.add_argument("--wait", action="store_true", default=None,
                   help="execute, verify: wait until the file's reassignments are done, then print their status")
    p.add_argument("--no-progress", action="store_true", default=None,
                   help="--wait: no progress bar on a terminal")


def run(args) -> int:
    return run_command("reassign-partitions", _run, args)


def _run(args) -> int:
    action = _check_args(args)
    with admin_client(args) as admin:
        try:
            return {"generate": _generate, "execute": _execute, "verify": _verify, "cancel": _cancel,
                    "list": _list}[action](admin, args)
        except PlanError as e:
            raise CommandError(str(e)) from None


def _check_args(args) -> str:
    """The one action; its required options present, no option foreign to it (Kafka's
    ``validateAndParseArgs``)."""
    actions = list(dict.fromkeys(args.actions or []))
    if len(actions) != 1:
        raise CommandError("Command must include exactly one action: " + ", ".join(f"--{a}" for a in ACTIONS))
    action = actions[0]
    for name in REQUIRED[action]:
        if getattr(args, name) is None:
            raise CommandError(f"Missing required argument \"[{name.replace('_', '-')}]\"")
    for name in OPTIONS:
        if getattr(args, name) is not None and name not in REQUIRED[action] + PERMITTED[action]:
            raise CommandError(f"Option \"[{name.replace('_', '-')}]\" can't be used with action \"[{action}]\"")
    return action


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as e:
        raise CommandError(f"cannot read {path}: {e.strerror or e}") from None


# --- generate -------------------------------------------------------------------------------
def _generate(admin, args) -> int:
    from odradek.client import TopicPartition
    from odradek.controller.assignment import RackAwareMode, assign_replicas_to_brokers
    from odradek.metadata.errors import MetadataError

    brokers = parse_broker_list(args.broker_list)
    topics = parse_topics(_read(args.topics_to_move_json_file))
    current = _replicas_of_topics(admin, topics)
    racks = {b.node_id: b.rack for b in admin.describe_cluster().brokers if b.node_id in brokers}
    mode = RackAwareMode.DISABLED if args.disable_rack_aware else RackAwareMode.ENFORCED
    proposed = {}
    for topic in topics:
        parts = {tp: r for tp, r in current.items() if tp.topic == topic}
        replication_factor = len(next(iter(parts.values()), ()))
        try:
            assigned = assign_replicas_to_brokers(racks, len(parts), replication_factor, rack_aware_mode=mode)
        except MetadataError as e:
            if "rack" in str(e):
                raise CommandError("Not all brokers have rack information. Add --disable-rack-aware in command line "
                                   "to make replica assignment without rack information.") from None
            raise CommandError(str(e)) from None
        proposed.update({TopicPartition(topic, p): r for p, r in assigned.items()})
    print(f"Current partition replica assignment\n{format_reassignment(current)}\n")
    print(f"Proposed partition reassignment configuration\n{format_reassignment(proposed)}")
    return 0


def _replicas_of_topics(admin, topics) -> dict:
    from odradek.client import TopicPartition
    from odradek.client.errors import BrokerError

    try:
        described = admin.describe_topics(topics)
    except BrokerError as e:
        missing = next(iter(e.errors), e.subject)
        raise CommandError(f"Topic {missing} not found.") from None
    return {TopicPartition(t, p.partition): list(p.replicas) for t, d in described.items() for p in d.partitions}


# --- execute --------------------------------------------------------------------------------
def _execute(admin, args) -> int:
    if args.replica_alter_log_dirs_throttle is not None:
        raise CommandError("--replica-alter-log-dirs-throttle: odradek does not move replicas between log directories")
    proposed = check_execute(parse_reassignment(_read(args.reassignment_json_file)))
    ongoing = admin.list_partition_reassignments()
    if ongoing and not args.additional:
        raise CommandError(CANNOT_EXECUTE)
    known = {b.node_id for b in admin.describe_cluster().brokers}
    unknown = sorted({b for r in proposed.values() for b in r} - known)
    if unknown:
        raise CommandError(f"Unknown broker id {unknown[0]}")
    current = _replicas_of_partitions(admin, proposed)
    print("Current partition replica assignment\n\n" + format_reassignment(current) +
          "\n\nSave this to use as the --reassignment-json-file option during rollback")
    if args.throttle is not None and args.throttle >= 0:
        print(RUN_VERIFY)
        _set_throttles(admin, move_map(ongoing, proposed, current), args.throttle)
    _alter(admin, proposed, "Error reassigning partition(s)")
    names = ",".join(str(tp) for tp in sorted(proposed))
    print(f"Successfully started partition reassignment{'' if len(proposed) == 1 else 's'} for {names}")
    if args.wait:
        _wait(admin, list(proposed), args)
        _settle(admin, proposed)
        print("\n".join(_status_lines(admin, list(proposed.items()), admin.list_partition_reassignments())))
    return 0


def _replicas_of_partitions(admin, partitions) -> dict:
    found = _replicas_of_topics(admin, sorted({tp.topic for tp in partitions}))
    missing = [str(tp) for tp in partitions if tp not in found]
    if missing:
        raise CommandError(f"Unable to find partition: {', '.join(missing)}")
    return {tp: found[tp] for tp in partitions}


def _set_throttles(admin, moves, throttle: int) -> None:
    """Kafka's ``modifyReassignmentThrottle``: the topics' replica lists, then the rates of
    every broker taking part."""
    from odradek.client import AlterConfigOp, ConfigResource, ResourceType

    leaders, followers = leader_throttles(moves), follower_throttles(moves)
    admin.incremental_alter_configs({
        ConfigResource(ResourceType.TOPIC, topic): [AlterConfigOp(TOPIC_THROTTLES[0], leaders[topic]),
                                                    AlterConfigOp(TOPIC_THROTTLES[1], followers[topic])]
        for topic in sorted(moves)})
    admin.incremental_alter_configs({
        ConfigResource(ResourceType.BROKER, str(b)): [AlterConfigOp(BROKER_THROTTLES[0], str(throttle)),
                                                      AlterConfigOp(BROKER_THROTTLES[1], str(throttle))]
        for b in reassigning_brokers(moves)})
    print(f"The inter-broker throttle limit was set to {throttle} B/s")


def _alter(admin, reassignments: dict, what: str) -> None:
    from odradek.client.errors import BrokerError

    try:
        admin.alter_partition_reassignments(reassignments)
    except BrokerError as e:
        failed = e.errors or {e.subject: e}
        lines = [f"{tp}: {err.message or err.code.name}" for tp, err in sorted(failed.items(), key=lambda i: str(i[0]))]
        raise CommandError(f"{what}:\n" + "\n".join(lines)) from None


# --- verify, cancel, list -------------------------------------------------------------------
def _wait(admin, partitions: list, args) -> None:
    """Until none of ``partitions`` is being reassigned (the controller registers a move
    before it answers AlterPartitionReassignments, so a move just started is listed)."""
    total = len(partitions)
    with count_bar("reassigning", "partitions done", enabled=not args.no_progress) as bar:
        task = bar.add_task("wait", total=total, note="")
        while True:
            moving = admin.list_partition_reassignments(partitions)
            bar.update(task, completed=total - len(moving))
            if not moving:
                return
            time.sleep(WAIT_POLL_S)


def _settle(admin, targets: dict) -> None:
    """Until the metadata shows each partition of ``targets`` at its target replicas, for at
    most `SETTLE_S`. The controller writes a finished move's replicas to ZooKeeper before it
    stops listing the move, but the broker answering Metadata has them from its watch a moment
    later, and the status printed next would call the move not done. A partition of a deleted
    topic is not waited for, one that another move took elsewhere not past `SETTLE_S`: its
    status then says where it is."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        current = _replicas_of_topics_lenient(admin, {tp.topic for tp in targets})
        if all(current.get(tp, target) == target for tp, target in targets.items()) or time.monotonic() >= deadline:
            return
        time.sleep(SETTLE_POLL_S)


def _verify(admin, args) -> int:
    targets = parse_reassignment(_read(args.reassignment_json_file))
    if args.wait:
        _wait(admin, [tp for tp, _ in targets], args)
        _settle(admin, dict(targets))
    ongoing = admin.list_partition_reassignments()
    print("\n".join(_status_lines(admin, targets, ongoing)))
    print()  # Kafka's (empty) status of replica moves between log directories
    if not ongoing and not args.preserve_throttles:
        _clear_throttles(admin, targets)
    return 0


def _status_lines(admin, targets, ongoing) -> list[str]:
    """Kafka's status of each ``(partition, target replicas)``: in progress, completed, or
    neither (no move, but other replicas)."""
    current = _replicas_of_topics_lenient(admin, {tp.topic for tp, _ in targets})
    lines = ["Status of partition reassignment:"]
    for tp, target in sorted(targets):
        if tp in ongoing:
            lines.append(f"Reassignment of partition {tp} is still in progress.")
        elif current.get(tp, []) == target:
            lines.append(f"Reassignment of partition {tp} is completed.")
        else:
            lines.append(f"There is no active reassignment of partition {tp}, but replica set is "
                         f"{','.join(map(str, current.get(tp, [])))} rather than {','.join(map(str, target))}.")
    return lines


def _replicas_of_topics_lenient(admin, topics) -> dict:
    """Replicas of the partitions of ``topics`` that exist (a deleted topic has none)."""
    from odradek.client import TopicPartition
    from odradek.client.errors import BrokerError

    out = {}
    for topic in sorted(topics):
        try:
            described = admin.describe_topics([topic])[topic]
        except BrokerError:  # unknown topic: its partitions have no replicas
            continue
        out.update({TopicPartition(topic, p.partition): list(p.replicas) for p in described.partitions})
    return out


def _clear_throttles(admin, targets) -> None:
    """Kafka's ``clearAllThrottles``: every broker's rates, the file's topics' replica lists."""
    from odradek.client import AlterConfigOp, AlterConfigOpType, ConfigResource, ResourceType

    brokers = sorted({b.node_id for b in admin.describe_cluster().brokers} | {b for _, r in targets for b in r})
    print(f"Clearing broker-level throttles on broker{'' if len(brokers) == 1 else 's'} {','.join(map(str, brokers))}")
    delete = AlterConfigOpType.DELETE
    admin.incremental_alter_configs({ConfigResource(ResourceType.BROKER, str(b)): [
        AlterConfigOp(name, None, delete) for name in BROKER_THROTTLES] for b in brokers})
    topics = sorted({tp.topic for tp, _ in targets})
    print(f"Clearing topic-level throttles on topic{'' if len(topics) == 1 else 's'} {','.join(topics)}")
    admin.incremental_alter_configs({ConfigResource(ResourceType.TOPIC, t): [
        AlterConfigOp(name, None, delete) for name in TOPIC_THROTTLES] for t in topics})


def _cancel(admin, args) -> int:
    """Cancels every reassignment of the file still in progress (Kafka's tool leaves out
    those that only add replicas; odradek cancels them too)."""
    targets = parse_reassignment(_read(args.reassignment_json_file))
    active = sorted(admin.list_partition_reassignments([tp for tp, _ in targets]))
    if active:
        _alter(admin, {tp: None for tp in active}, f"Error cancelling partition reassignment{'' if len(active) == 1 else 's'} for")
        names = ",".join(map(str, active))
        print(f"Successfully cancelled partition reassignment{'' if len(active) == 1 else 's'} for: {names}")
    else:
        print("None of the specified partition reassignments are active.")
    print("None of the specified partition moves are active.")
    if not args.preserve_throttles:
        _clear_throttles(admin, targets)
    return 0


def _list(admin, args) -> int:
    ongoing = admin.list_partition_reassignments()
    if not ongoing:
        print("No partition reassignments found.")
        return 0
    lines = []
    for tp, r in sorted(ongoing.items()):
        line = f"{tp}: replicas: {','.join(map(str, r.replicas))}."
        if r.adding_replicas:
            line += f" adding: {','.join(map(str, r.adding_replicas))}."
        if r.removing_replicas:
            line += f" removing: {','.join(map(str, r.removing_replicas))}."
        lines.append(line)
    print("Current partition reassignments:\n" + "\n".join(lines))
    return 0
