"""``odradek share-groups``: list, describe, reset and delete KIP-932 share groups
(Kafka 4.2's ``kafka-share-groups.sh``, ``ShareGroupCommand``).

    odradek share-groups --list [--state [Empty,Stable,Dead]]
    odradek share-groups --describe --group G | --all-groups [--offsets | --members | --state] [--verbose]
    odradek share-groups --reset-offsets --group G --topic T[:P,P...] | --all-topics
                         --to-earliest | --to-latest | --to-datetime ISO | --to-offset N |
                         --by-duration PnDTnHnMnS   --dry-run | --execute
    odradek share-groups --delete --group G | --all-groups
    odradek share-groups --delete-offsets --group G --topic T [--topic T2 ...]

A share group has no committed offsets: per share partition it keeps a start offset (the
share-partition start offset, the first record not yet acknowledged for good) and the LAG of
the records after it (DescribeShareGroupOffsets). ``--describe`` shows them (``--verbose``:
also the leader epoch); ``--members`` the members and their assignments (``--verbose``: their
epochs); ``--state`` the state, coordinator and member count (``--verbose``: the group and
assignment epochs).

``--reset-offsets`` sets new start offsets (AlterShareGroupOffsets) of one group, which must
have no members: it is refused, dry run included, while members remain ("Share group 'G' is
not empty.", Kafka's words). The new offsets are shown; they are set only with ``--execute``.
``--to-offset`` is kept within the partition's log; ``--to-datetime`` (ISO 8601, local time
unless it names a zone) and ``--by-duration`` take the first record at or after that time,
the log end when there is none.

``--delete`` deletes empty share groups; ``--delete-offsets`` forgets the share state of
topics (DeleteShareGroupOffsets), shown per topic as Kafka does.

Output: a table on a terminal; kafka-share-groups.sh's plain columns (``cli/share_groups_text.py``)
when standard output is a pipe or file, or with ``--output text``; JSON with ``--output json``.
Bad arguments are refused in one line on standard error, exit status 1.
"""

from __future__ import annotations

import argparse
import sys
import time

from odradek.cli import share_groups_text as text
from odradek.cli.group_coordinator_address import coordinator_address
from odradek.cli.common import (
    CommandError,
    add_bootstrap,
    add_output,
    admin_client,
    print_json,
    print_table,
    run_command,
)

_ACTIONS = ("list", "describe", "delete", "reset_offsets", "delete_offsets")
_SCENARIOS = ("to_earliest", "to_latest", "to_datetime", "to_offset", "by_duration")
_STATES = ("Empty", "Stable", "Dead")
# DeleteShareGroupOffsets errors about the group, not a topic (Kafka's ShareGroupCommand.deleteOffsets)
_GROUP_ERRORS = frozenset({"INVALID_GROUP_ID", "GROUP_ID_NOT_FOUND", "GROUP_AUTHORIZATION_FAILED", "NON_EMPTY_GROUP"})


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def add_parser(sub) -> None:
    p = sub.add_parser("share-groups", help="list, describe, reset offsets of and delete share groups (KIP-932)",
                       description=__doc__.replace("``", ""), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bootstrap(p)
    p.add_argument("--list", action="store_true", help="list all share groups")
    p.add_argument("--describe", action="store_true", help="describe share groups: offsets, members or state")
    p.add_argument("--delete", action="store_true", help="delete empty share groups")
    p.add_argument("--reset-offsets", action="store_true",
                   help="reset the start offsets of one share group, which must have no members")
    p.add_argument("--delete-offsets", action="store_true", help="delete the offsets of topics in one share group")
    p.add_argument("--group", action="append", default=[], metavar="GROUP", help="a share group id, repeatable")
    p.add_argument("--all-groups", action="store_true", help="every share group (--describe, --delete)")
    p.add_argument("--topic", action="append", default=[], metavar="TOPIC[:P,P...]",
                   help="--reset-offsets: a topic or some of its partitions; --delete-offsets: a topic; repeatable")
    p.add_argument("--all-topics", action="store_true", help="--reset-offsets: every topic the group has offsets in")
    p.add_argument("--offsets", action="store_true", help="--describe: start offset and lag per partition (default)")
    p.add_argument("--members", action="store_true", help="--describe: the members and their assignments")
    p.add_argument("--state", nargs="?", const="", metavar="STATES",
                   help="--describe: the group's state; --list: each group's state, or only groups in "
                        "these states (Empty, Stable, Dead; comma-separated)")
    p.add_argument("--verbose", action="store_true", help="--describe: epochs as well")
    p.add_argument("--to-earliest", action="store_true", help="reset to the log start")
    p.add_argument("--to-latest", action="store_true", help="reset to the log end")
    p.add_argument("--to-datetime", metavar="ISO", help="reset to the first record at or after this time")
    p.add_argument("--to-offset", type=int, metavar="N", help="reset to offset N (kept within the log)")
    p.add_argument("--by-duration", metavar="PnDTnHnMnS", help="reset to the first record this long before now")
    p.add_argument("--dry-run", action="store_true", help="--reset-offsets: only show the new offsets")
    p.add_argument("--execute", action="store_true", help="--reset-offsets: set the new offsets")
    add_output(p, ("table", "json", "text"))


def run(args) -> int:
    return run_command("share-groups", _run, args)


def _run(args) -> int:
    check_args(args)
    with admin_client(args) as admin:
        if args.list:
            return _list(admin, args)
        if args.describe:
            return _describe(admin, args)
        if args.reset_offsets:
            return _reset(admin, args)
        if args.delete_offsets:
            return _delete_offsets(admin, args)
        return _delete(admin, args)


# --- argument checks (Kafka's ShareGroupCommandOptions.checkArgs) ----------------------------
def check_args(args) -> None:
    """Refuse what ShareGroupCommandOptions refuses, each with one line (``CommandError``)."""
    actions = [a for a in _ACTIONS if getattr(args, a)]
    if len(actions) != 1:
        raise CommandError("Command must include exactly one action: --list, --describe, --delete, "
                           "--reset-offsets, --delete-offsets.")
    action = _flag(actions[0])
    for only_describe in ("offsets", "members", "verbose"):
        if getattr(args, only_describe) and not args.describe:
            raise CommandError(f"Option {_flag(only_describe)} may be used with --describe only")
    if args.state is not None and not (args.describe or args.list):
        raise CommandError("Option --state may be used with --describe or --list only")
    if args.group and (args.list or args.all_groups):
        raise CommandError(f"Option --group can't be used with option {'--list' if args.list else '--all-groups'}")
    if args.all_groups and not (args.describe or args.delete):
        raise CommandError(f"Option --all-groups can't be used with option {action}")
    if (args.topic or args.all_topics) and not (args.reset_offsets or args.delete_offsets):
        raise CommandError(f"Option {'--topic' if args.topic else '--all-topics'} can't be used with option {action}")
    if args.describe:
        _check_describe(args)
    elif args.delete and not (args.group or args.all_groups):
        raise CommandError("Option --delete takes the options --group or --all-groups")
    elif args.delete_offsets and (len(args.group) != 1 or not args.topic or args.all_topics):
        raise CommandError("Option --delete-offsets takes the following options: --group (one), --topic")
    elif args.reset_offsets:
        _check_reset(args)
    if any(getattr(args, s) not in (None, False) for s in _SCENARIOS) and not args.reset_offsets:
        raise CommandError(f"Option {action} does not take a reset scenario (--to-earliest, ...)")
    if (args.dry_run or args.execute) and not args.reset_offsets:
        raise CommandError(f"Option {action} does not take --dry-run or --execute")


def _check_describe(args) -> None:
    if not args.group and not args.all_groups:
        raise CommandError("Option --describe takes one of these options: --group, --all-groups")
    if sum((args.members, args.offsets, args.state is not None)) > 1:
        raise CommandError("Option --describe takes at most one of these options: --members, --offsets, --state")
    if args.state:
        raise CommandError("Option --describe does not take a value for --state")


def _check_reset(args) -> None:
    if args.dry_run and args.execute:
        raise CommandError("Option --reset-offsets only accepts one of --execute and --dry-run")
    if not args.dry_run and not args.execute:
        raise CommandError("Option --reset-offsets takes the option: --execute or --dry-run")
    if len(args.group) != 1:
        raise CommandError("Option --reset-offsets takes the option: --group (one share group)")
    if bool(args.topic) == bool(args.all_topics):
        raise CommandError("Option --reset-offsets takes one of these options: --all-topics, --topic")
    chosen = [s for s in _SCENARIOS if getattr(args, s) not in (None, False)]
    if len(chosen) != 1:
        raise CommandError("Option --reset-offsets requires one of the following scenarios: " +
                           ", ".join(_flag(s) for s in _SCENARIOS))


# --- list ------------------------------------------------------------------------------------
def _list(admin, args) -> int:
    listed = [g for g in admin.list_groups() if (g.type or "").lower() == "share"]
    if args.state:
        wanted = {s.strip().lower() for s in args.state.split(",") if s.strip()}
        if not wanted <= {s.lower() for s in _STATES}:
            raise CommandError(f"Invalid state list '{args.state}'. Valid states are: {', '.join(_STATES)}")
        listed = [g for g in listed if (g.state or "").lower() in wanted]
    if args.output == "json":
        for g in listed:
            print_json({"group": g.group_id, "state": g.state or None})
    elif args.state is None:
        for g in listed:
            print(g.group_id)
    elif args.output == "text":
        sys.stdout.write(text.states_text(listed))
    else:
        print_table(("GROUP", "STATE"), [(g.group_id, g.state) for g in listed])
    return 0


# --- describe --------------------------------------------------------------------------------
def _describe(admin, args) -> int:
    groups = admin.list_share_groups() if args.all_groups else sorted(set(args.group))
    descriptions = describe(admin, groups)
    for group in groups:
        d = descriptions[group]
        if args.state is not None:
            _show_state(admin, d, args)
        elif args.members:
            _show_members(d, args)
        else:
            _show_offsets(admin, d, args)
    return 0


def describe(admin, groups: list[str]) -> dict:
    """``{group: ShareGroupDescription}``; a group that is not a share group is refused."""
    from odradek.client import BrokerError

    try:
        descriptions = admin.describe_share_groups(groups)
    except BrokerError as e:
        if getattr(e.code, "name", "") == "GROUP_ID_NOT_FOUND":
            raise CommandError(f"Share group '{e.subject}' does not exist.") from None
        raise
    for group in groups:
        if descriptions[group].state == "Dead":
            raise CommandError(f"Share group '{group}' does not exist.")
    return descriptions


def _note_empty(d, output: str) -> None:
    """Kafka's ``maybePrintEmptyGroupState`` on standard error (not with JSON)."""
    if d.state == "Empty" and output != "json":
        print(f"\nShare group '{d.group_id}' has no active members.", file=sys.stderr)


def offset_rows(admin, group: str) -> list[dict]:
    """Per share partition of ``group``: start offset, leader epoch and lag (None when unknown:
    -1 on the wire), sorted by topic and partition."""
    def known(value: int):
        return None if value < 0 else value

    return [{"group": group, "topic": tp.topic, "partition": tp.partition, "start_offset": known(o.start_offset),
             "leader_epoch": known(o.leader_epoch), "lag": known(o.lag)}
            for tp, o in sorted(admin.list_share_group_offsets(group).items())]


def _show_offsets(admin, d, args) -> None:
    rows = offset_rows(admin, d.group_id)
    if args.output == "json":
        for row in rows:
            print_json(row)
    elif args.output == "text":
        sys.stdout.write(text.offsets_text(d.group_id, rows, args.verbose))
    elif not rows:
        print(f"Share group '{d.group_id}' has no offset information.")
    else:
        keys = ("group", "topic", "partition") + (("leader_epoch",) if args.verbose else ()) + ("start_offset", "lag")
        columns = ("GROUP", "TOPIC", "PARTITION") + (("LEADER-EPOCH",) if args.verbose else ()) + (
            "START-OFFSET", "LAG")
        print_table(columns, [[row[k] for k in keys] for row in rows])


def _show_members(d, args) -> None:
    if args.output == "json":
        for m in sorted(d.members, key=lambda m: m.member_id):
            print_json({"group": d.group_id, "member_id": m.member_id, "client_id": m.client_id,
                        "host": m.client_host, "member_epoch": m.member_epoch,
                        "partitions": [{"topic": tp.topic, "partition": tp.partition} for tp in m.assignment]})
        return
    _note_empty(d, args.output)
    if not d.members:
        return
    if args.output == "text":
        sys.stdout.write(text.members_text(d, args.verbose))
        return
    columns = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"] + (
        ["MEMBER-EPOCH"] if args.verbose else []) + ["ASSIGNMENT"]
    print_table(columns, [[d.group_id, m.member_id, m.client_host, m.client_id, len(m.assignment)]
                          + ([m.member_epoch] if args.verbose else []) + [text.assignment_text(m.assignment) or None]
                          for m in sorted(d.members, key=lambda m: m.member_id)])


def _show_state(admin, d, args) -> None:
    if args.output == "json":
        print_json({"group": d.group_id, "state": d.state, "group_epoch": d.group_epoch,
                    "assignment_epoch": d.assignment_epoch, "assignor": d.assignor, "members": len(d.members)})
        return
    _note_empty(d, args.output)
    coordinator = coordinator_address(admin, d.group_id)
    if args.output == "text":
        sys.stdout.write(text.state_text(d, coordinator, args.verbose))
        return
    columns = ["GROUP", "COORDINATOR (ID)", "STATE"] + (["GROUP-EPOCH", "ASSIGNMENT-EPOCH"] if args.verbose else [])
    row = [d.group_id, coordinator, d.state] + ([d.group_epoch, d.assignment_epoch] if args.verbose else [])
    print_table(columns + ["#MEMBERS"], [row + [len(d.members)]])


# --- reset offsets ---------------------------------------------------------------------------
def _reset(admin, args) -> int:
    from odradek.client import BrokerError

    group = args.group[0]
    try:
        state = admin.describe_share_groups([group])[group].state
    except BrokerError as e:  # no such group yet: the plan is shown; the broker refuses --execute
        if getattr(e.code, "name", "") != "GROUP_ID_NOT_FOUND":
            raise
        state = "Dead"
    if state not in ("Empty", "Dead"):
        raise CommandError(f"Share group '{group}' is not empty.")
    partitions = _partitions(admin, group, args)
    new = new_offsets(admin, partitions, args) if partitions else {}
    if args.execute and new:
        admin.alter_share_group_offsets(group, new)
    rows = [(group, tp.topic, tp.partition, offset) for tp, offset in sorted(new.items())]
    if args.output == "json":
        for _, topic, partition, offset in rows:
            print_json({"group": group, "topic": topic, "partition": partition, "new_offset": offset})
    elif args.output == "text":
        sys.stdout.write(text.reset_text(rows))
    else:
        print_table(("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"), rows)
    return 0


def _partitions(admin, group: str, args) -> list:
    """The partitions ``--topic T[:P,P...]`` names (every partition of T without a list), or
    with ``--all-topics`` those the group has share state for."""
    from odradek.client import TopicPartition

    if args.all_topics:
        return sorted(admin.list_share_group_offsets(group))
    out = []
    for spec in args.topic:
        topic, sep, numbers = spec.partition(":")
        if not sep:
            out += [TopicPartition(topic, p.partition) for p in admin.describe_topics([topic])[topic].partitions]
            continue
        try:
            out += [TopicPartition(topic, int(p)) for p in numbers.split(",")]
        except ValueError:
            raise CommandError(f"Invalid topic arg '{spec}', expected topic name and partitions") from None
    return sorted(set(out))


def new_offsets(admin, partitions: list, args) -> dict:
    """``{TopicPartition: new start offset}`` for the scenario of ``args`` (Kafka's
    ``GroupOffsetsResetter``): earliest and latest are the log's ends; a timestamp takes the
    first record at or after it, else the log end; ``--to-offset`` is kept within the log."""
    from odradek.cli.groups_cmd import parse_datetime, parse_duration

    if args.to_earliest or args.to_latest:
        ends = admin.list_offsets({tp: -2 if args.to_earliest else -1 for tp in partitions})
        return {tp: _offset(ends, tp) for tp in partitions}
    if args.to_offset is not None:
        return _clamped(admin, partitions, args.to_offset)
    moment = (parse_datetime(args.to_datetime) if args.to_datetime is not None
              else int(time.time() * 1000) - parse_duration(args.by_duration))
    found = admin.list_offsets({tp: moment for tp in partitions})
    empty = [tp for tp in partitions if found.get(tp) is None or found[tp].offset < 0]
    ends = admin.list_offsets({tp: -1 for tp in empty}) if empty else {}
    for tp in empty:
        print(f"Warn: Partition {tp.partition} from topic {tp.topic} is empty. Falling back to latest known offset.",
              file=sys.stderr)
    return {tp: _offset(ends, tp) if tp in ends else found[tp].offset for tp in partitions}


def _offset(answers: dict, tp) -> int:
    answer = answers.get(tp)
    if answer is None or answer.offset < 0:
        raise CommandError(f"Error getting offset of topic partition: {tp.topic}-{tp.partition}")
    return answer.offset


def _clamped(admin, partitions: list, wanted: int) -> dict:
    starts = admin.list_offsets({tp: -2 for tp in partitions})
    ends = admin.list_offsets({tp: -1 for tp in partitions})
    out = {}
    for tp in partitions:
        start, end = _offset(starts, tp), _offset(ends, tp)
        out[tp] = min(max(wanted, start), end)
        if out[tp] != wanted:
            which = "higher than latest" if wanted > end else "lower than earliest"
            print(f"WARN: New offset ({wanted}) is {which} offset for topic partition {tp.topic}-{tp.partition}. "
                  f"Value will be set to {out[tp]}.", file=sys.stderr)
    return out


# --- delete ----------------------------------------------------------------------------------
def _delete_offsets(admin, args) -> int:
    """One DeleteShareGroupOffsets per topic, so that each topic's outcome is shown; an error
    about the group itself (not empty, not found, not allowed) fails the command at once."""
    from odradek.client import BrokerError

    group, statuses = args.group[0], {}
    for topic in dict.fromkeys(args.topic):
        try:
            admin.delete_share_group_offsets(group, [topic])
            statuses[topic] = None
        except BrokerError as e:
            name = getattr(e.code, "name", str(e.code))
            if name in _GROUP_ERRORS:
                raise CommandError(f"{name} for share group '{group}'" + (f": {e.message}" if e.message else ""))
            statuses[topic] = e.message or name
    if args.output == "json":
        for topic, error in sorted(statuses.items()):
            print_json({"group": group, "topic": topic, "error": error})
    elif args.output == "text":
        sys.stdout.write(text.delete_offsets_text(statuses))
    else:
        print_table(("TOPIC", "STATUS"), [(t, "Successful" if e is None else f"Error: {e}")
                                          for t, e in sorted(statuses.items())])
    return 0 if all(e is None for e in statuses.values()) else 1


def _delete(admin, args) -> int:
    """Kafka's ``deleteShareGroups``: groups that are not share groups or not empty are not
    sent; the others are deleted. Exit status 1 when any failed (Kafka's tool says so in its
    output only)."""
    listed = {g.group_id: g for g in admin.list_groups() if (g.type or "").lower() == "share"}
    groups = sorted(listed) if args.all_groups else list(dict.fromkeys(args.group))
    failed: dict[str, str] = {}
    for group in groups:
        if group not in listed:
            failed[group] = f"Group '{group}' is not a share group."
        elif (listed[group].state or "Empty") != "Empty":
            failed[group] = f"Share group '{group}' is not EMPTY."
    from odradek.client import KafkaError

    deleted = [g for g in groups if g not in failed]
    for group in deleted:
        try:
            admin.delete_groups([group])
        except KafkaError as e:  # each group's failure is reported, as Kafka's tool does
            failed[group] = str(e)
    succeeded = [g for g in deleted if g not in failed]
    names = ", ".join(f"'{g}'" for g in succeeded)
    if not failed:
        print(f"Deletion of requested share groups ({names}) was successful.")
        return 0
    print("\nError: Deletion of some share groups failed:")
    for group, error in failed.items():
        print(f"* Group '{group}' could not be deleted due to: {error}")
    if succeeded:
        print(f"\nThese share groups were deleted successfully: {names}")
    return 1
