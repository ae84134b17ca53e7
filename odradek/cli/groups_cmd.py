"""``odradek groups``: list, describe, reset and delete consumer groups
(``kafka-consumer-groups.sh``).

    odradek groups --list [--state] [--type [classic,consumer]]
    odradek groups --describe --group G [--offsets | --members | --state] [--verbose]
    odradek groups --describe --group G --watch [--interval S] [--iterations N]
    odradek groups --reset-offsets --group G --topic T[:P,P...] | --all-topics
                   --to-earliest | --to-latest | --to-offset N | --shift-by N | --to-datetime ISO |
                   --by-duration PnDTnHnMnS   [--dry-run | --execute]
    odradek groups --delete --group G

A KIP-848 consumer group is described with ConsumerGroupDescribe (its type, group epoch and
target assignment epoch with ``--state --verbose``, each member's epoch, current and target
assignment with ``--members --verbose``, as Kafka 4's tool prints them); a classic group with
DescribeGroups.

``--describe`` shows, per partition the group has committed offsets for or is assigned:
the committed offset (CURRENT-OFFSET), the partition's end (LOG-END-OFFSET, its high
watermark), the LAG between them, and the member that owns it. ``--members`` lists the
members and their partitions instead, ``--state`` the group's state and protocol.

``--watch`` (odradek's; Kafka's tool has none) describes the offsets and lag again every
``--interval`` seconds (default 2) until Ctrl-C, or ``--iterations`` times: on a terminal the
table is redrawn in place, under a line with the time and the total lag; otherwise each
refresh is printed after the last (JSON: the rows of each refresh).

Output: a table on a terminal; kafka-consumer-groups.sh's plain columns
(``cli/groups_text.py``) when standard output is a pipe or file, or with ``--output text``;
JSON with ``--output json``.

``--reset-offsets`` prints the new offsets; it changes them only with ``--execute`` (a dry
run otherwise), and only while the group has no active members. Every target is kept
within the partition's log. ``--to-datetime`` takes ISO 8601 (``2024-05-01T12:00:00``,
local time unless it names a zone, e.g. ``Z`` or ``+02:00``): the first offset whose record
is at or after it.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from datetime import datetime

from odradek.cli import groups_text
from odradek.cli.group_coordinator_address import coordinator_address
from odradek.cli.common import (
    CommandError,
    add_bootstrap,
    add_output,
    admin_client,
    console,
    make_table,
    print_json,
    print_table,
    run_command,
)

_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", re.IGNORECASE)
_INACTIVE = ("Empty", "Dead")


def add_parser(sub) -> None:
    p = sub.add_parser("groups", help="list, describe, reset offsets of and delete consumer groups",
                       description=__doc__.replace("``", ""), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bootstrap(p)
    actions = p.add_mutually_exclusive_group(required=True)
    actions.add_argument("--list", action="store_true", help="list the groups")
    actions.add_argument("--describe", action="store_true", help="offsets, lag and members of groups")
    actions.add_argument("--reset-offsets", action="store_true", help="move a group's committed offsets")
    actions.add_argument("--delete", action="store_true", help="delete empty groups and their offsets")
    p.add_argument("--group", action="append", default=[], metavar="GROUP", help="a group id, repeatable")
    p.add_argument("--all-groups", action="store_true", help="every group")
    p.add_argument("--offsets", action="store_true", help="--describe: offsets and lag per partition (the default)")
    p.add_argument("--members", action="store_true", help="--describe: the members")
    p.add_argument("--state", action="store_true", help="--describe/--list: the group state")
    p.add_argument("--type", nargs="?", const="", metavar="TYPES",
                   help="--list: the group type; with classic,consumer only groups of those types")
    p.add_argument("--verbose", action="store_true", help="--describe --members: each member's partitions")
    p.add_argument("--topic", action="append", default=[], metavar="TOPIC[:P,P...]",
                   help="--reset-offsets: a topic, or some of its partitions; repeatable")
    p.add_argument("--all-topics", action="store_true", help="--reset-offsets: every topic the group has offsets in")
    targets = p.add_mutually_exclusive_group()
    targets.add_argument("--to-earliest", action="store_true", help="reset to the log start")
    targets.add_argument("--to-latest", action="store_true", help="reset to the log end")
    targets.add_argument("--to-offset", type=int, metavar="N", help="reset to offset N")
    targets.add_argument("--shift-by", type=int, metavar="N", help="move the committed offsets by N (may be negative)")
    targets.add_argument("--to-datetime", metavar="ISO", help="reset to the first record at or after this time")
    targets.add_argument("--by-duration", metavar="PnDTnHnMnS", help="reset to this long before now")
    p.add_argument("--watch", action="store_true", help="--describe: show the offsets and lag again and again, "
                   "until Ctrl-C")
    p.add_argument("--interval", type=float, default=2.0, metavar="S",
                   help="--watch: seconds between refreshes (default 2)")
    p.add_argument("--iterations", type=int, metavar="N", help="--watch: stop after N refreshes (default: none)")
    run_mode = p.add_mutually_exclusive_group()
    run_mode.add_argument("--dry-run", action="store_true", help="only show the new offsets (the default)")
    run_mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    add_output(p, ("table", "json", "text"))


def run(args) -> int:
    return run_command("groups", _run, args)


def _run(args) -> int:
    if sum((args.offsets, args.members, args.state and args.describe)) > 1:
        raise CommandError("--describe takes one of --offsets, --members and --state")
    if args.watch and not args.describe:
        raise CommandError("--watch goes with --describe")
    if (args.describe or args.reset_offsets or args.delete) and not (args.group or args.all_groups):
        raise CommandError("give --group (or --all-groups)")
    with admin_client(args) as admin:
        if args.list:
            return _list(admin, args)
        groups = [g.group_id for g in admin.list_groups()] if args.all_groups else list(dict.fromkeys(args.group))
        if args.describe:
            return _describe(admin, groups, args)
        if args.reset_offsets:
            return _reset(admin, groups, args)
        return _delete(admin, groups)


def _list(admin, args) -> int:
    listed = admin.list_groups()
    if args.type is not None:
        return _list_types(listed, args)
    if args.output == "json":
        for g in listed:
            print_json({"group": g.group_id, "state": g.state or None, "protocol_type": g.protocol_type})
    elif args.state and args.output == "text":
        sys.stdout.write(groups_text.group_states_text(listed))
    elif args.state:
        print_table(("GROUP", "STATE", "PROTOCOL-TYPE"), [(g.group_id, g.state, g.protocol_type) for g in listed])
    else:
        for g in listed:
            print(g.group_id)
    return 0


def _list_types(listed, args) -> int:
    """``--list --type [classic,consumer]`` (Kafka 4's kafka-consumer-groups.sh): GROUP and
    TYPE (and STATE with --state), filtered by type when types are given."""
    wanted = {t.strip().lower() for t in args.type.split(",") if t.strip()}
    unknown = wanted - {"classic", "consumer"}
    if unknown:
        raise CommandError(f"unknown group type(s) {', '.join(sorted(unknown))}: the types are classic and consumer")
    if wanted:
        listed = [g for g in listed if (g.type or "").lower() in wanted]
    if args.output == "json":
        for g in listed:
            print_json({"group": g.group_id, "type": g.type or None, "state": g.state or None})
    elif args.output == "text":
        sys.stdout.write(groups_text.group_types_text(listed, args.state))
    else:
        columns = ("GROUP", "TYPE") + (("STATE",) if args.state else ())
        print_table(columns, [(g.group_id, groups_text.type_name(g.type)) + ((g.state,) if args.state else ())
                              for g in listed])
    return 0


# --- describe ----------------------------------------------------------------------------
def _describe(admin, groups: list[str], args) -> int:
    if args.watch:
        return _watch(admin, groups, args)
    descriptions = _existing(admin, groups)
    for group in groups:
        description = descriptions[group]
        if args.output == "text":
            groups_text.note_state(group, description.state)
        if args.state:
            _show_state(admin, description, args.output, args.verbose)
        elif args.members:
            _show_members(description, args)
        else:
            _show_offsets(admin, description, args.output)
    return 0


def _existing(admin, groups: list[str]) -> dict:
    """Consumer groups described by ConsumerGroupDescribe (epochs, targets), the others by
    DescribeGroups (client/admin_consumer_groups.py)."""
    descriptions = {g: d for g, d in admin.describe_consumer_groups(groups).items() if d is not None}
    classic = [g for g in groups if g not in descriptions]
    if classic:
        descriptions.update(admin.describe_groups(classic))
    for group in groups:
        if descriptions[group].state == "Dead":
            raise CommandError(f"Consumer group '{group}' does not exist.")
    return descriptions


def _show_state(admin, d, output: str, verbose: bool = False) -> None:
    modern = getattr(d, "type", "classic") == "consumer"
    if output == "json":
        extra = {"group_epoch": d.group_epoch, "assignment_epoch": d.assignment_epoch} if modern else {}
        print_json({"group": d.group_id, "type": "consumer" if modern else "classic", "state": d.state,
                    "protocol_type": d.protocol_type, "assignment_strategy": d.protocol, "members": len(d.members),
                    **extra})
        return
    if output == "text":
        sys.stdout.write(groups_text.state_text(d, coordinator_address(admin, d.group_id), verbose and modern))
        return
    columns = ["GROUP", "TYPE", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
    row = [d.group_id, "Consumer" if modern else "Classic", d.protocol, d.state, len(d.members)]
    if modern:
        columns[4:4], row[4:4] = ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"], [d.group_epoch, d.assignment_epoch]
    print_table(columns, [row])


def _show_members(d, args) -> None:
    """Members; of a consumer group also each member's epoch and target assignment (the text
    and table forms with --verbose, as Kafka 4's CURRENT-EPOCH ... TARGET-ASSIGNMENT)."""
    target_epoch = d.assignment_epoch if getattr(d, "type", "classic") == "consumer" else None
    if args.output == "json":
        for m in d.members:
            extra = {} if target_epoch is None else {
                "member_epoch": m.member_epoch, "target_epoch": target_epoch,
                "target_partitions": [{"topic": t, "partition": p} for t, p in m.target_assignment]}
            print_json({"group": d.group_id, "member_id": m.member_id, "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id, "host": m.client_host,
                        "partitions": [{"topic": t, "partition": p} for t, p in m.assignment], **extra})
        return
    if args.output == "text":
        if d.members:  # none: note_state said so on standard error
            sys.stdout.write(groups_text.members_text(d.group_id, d.members, args.verbose, target_epoch))
        return
    if not d.members:
        print(f"Consumer group '{d.group_id}' has no active members.")
        return
    columns = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    if args.verbose:
        columns += ["ASSIGNMENT"] if target_epoch is None else [
            "CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
    rows = []
    for m in d.members:
        row = [d.group_id, m.member_id, m.client_host, m.client_id, len(m.assignment)]
        if args.verbose and target_epoch is None:
            row.append(" ".join(f"{tp.topic}({tp.partition})" for tp in sorted(m.assignment)) or "-")
        elif args.verbose:
            row += [m.member_epoch, groups_text.assignment_text(m.assignment), target_epoch,
                    groups_text.assignment_text(m.target_assignment)]
        rows.append(row)
    print_table(columns, rows)


def group_offsets(admin, description) -> list[dict]:
    """Per partition of the group: committed offset, log end, lag and owning member."""
    committed = admin.list_group_offsets(description.group_id)
    owners = {tp: m for m in description.members for tp in m.assignment}
    partitions = sorted(set(committed) | set(owners))
    ends = admin.list_offsets({tp: -1 for tp in partitions}) if partitions else {}
    rows = []
    for tp in partitions:
        current = committed[tp].offset if tp in committed else None
        end = ends[tp].offset if ends.get(tp) is not None else None
        owner = owners.get(tp)
        rows.append({
            "group": description.group_id, "topic": tp.topic, "partition": tp.partition,
            "current_offset": current, "log_end_offset": end,
            "lag": None if current is None or end is None else max(end - current, 0),
            "consumer_id": owner.member_id if owner else None, "host": owner.client_host if owner else None,
            "client_id": owner.client_id if owner else None,
        })
    return rows


def _show_offsets(admin, description, output: str) -> None:
    rows = group_offsets(admin, description)
    if output == "json":
        for row in rows:
            print_json(row)
        return
    if output == "text":
        if rows:
            sys.stdout.write(groups_text.offsets_text(rows))
        return
    if not description.members:
        print(f"Consumer group '{description.group_id}' has no active members.")
    print_table(OFFSET_COLUMNS, [[row[k] for k in OFFSET_KEYS] for row in rows])


OFFSET_COLUMNS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                  "CLIENT-ID")
OFFSET_KEYS = ("group", "topic", "partition", "current_offset", "log_end_offset", "lag", "consumer_id", "host",
               "client_id")


# --- watch -------------------------------------------------------------------------------
def _watch(admin, groups: list[str], args) -> int:
    """``--describe --watch``: the offsets and lag of ``groups`` every ``--interval`` seconds,
    ``--iterations`` times or until Ctrl-C (which ends the watch with status 0)."""
    if args.members or args.state:
        raise CommandError("--watch shows offsets and lag: leave out --members and --state")
    if args.interval <= 0 or (args.iterations is not None and args.iterations < 1):
        raise CommandError("--interval must be positive and --iterations at least 1")
    out = console()
    live = out.is_terminal and args.output == "table"
    try:
        with _live_view(out, live) as view:
            done = 0
            while True:
                rows = [row for d in _existing(admin, groups).values() for row in group_offsets(admin, d)]
                _show_refresh(view, out, rows, args)
                done += 1
                if args.iterations is not None and done >= args.iterations:
                    return 0
                time.sleep(args.interval)
    except KeyboardInterrupt:
        return 0


def _live_view(out, live: bool):
    """A rich Live redrawing in place on ``out`` (a terminal), else a context of None."""
    from contextlib import nullcontext

    from rich.live import Live

    return Live(console=out, auto_refresh=False) if live else nullcontext()


def _show_refresh(view, out, rows: list[dict], args) -> None:
    if args.output == "json":
        for row in rows:
            print_json(row)
        sys.stdout.flush()
        return
    lag = sum(row["lag"] or 0 for row in rows)
    heading = (f"Every {args.interval:g} s, at {datetime.now().strftime('%H:%M:%S')}: total lag {lag} "
               f"over {len(rows)} partitions")
    if args.output == "text":
        sys.stdout.write(heading + "\n" + (groups_text.offsets_text(rows) if rows else ""))
        sys.stdout.flush()
        return
    table = make_table(OFFSET_COLUMNS, [[row[k] for k in OFFSET_KEYS] for row in rows])
    if view is None:
        out.print(heading)
        out.print(table)
        out.file.flush()
        return
    from rich.console import Group
    from rich.text import Text

    view.update(Group(Text(heading + " (Ctrl-C to stop)"), table), refresh=True)


# --- reset -------------------------------------------------------------------------------
def parse_duration(text: str) -> int:
    """An ISO 8601 duration (``PnDTnHnMnS``, Kafka's ``--by-duration``) in milliseconds."""
    m = _DURATION.fullmatch(text.strip())
    if not m or text.strip().upper() in ("P", "PT"):
        raise CommandError(f"--by-duration {text!r} is not a duration like P1DT2H30M or PT15M")
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in m.groups())
    return int(((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000)


def parse_datetime(text: str) -> int:
    """ISO 8601 date and time as milliseconds since the epoch (local time without a zone)."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise CommandError(f"--to-datetime {text!r} is not an ISO 8601 time like 2024-05-01T12:00:00") from None
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return int(moment.timestamp() * 1000)


def _target(args) -> dict:
    if args.to_earliest:
        return {"to_earliest": True}
    if args.to_latest:
        return {"to_latest": True}
    if args.to_offset is not None:
        return {"to_offset": args.to_offset}
    if args.shift_by is not None:
        return {"shift_by": args.shift_by}
    if args.to_datetime is not None:
        return {"to_timestamp": parse_datetime(args.to_datetime)}
    if args.by_duration is not None:
        return {"to_timestamp": int(time.time() * 1000) - parse_duration(args.by_duration)}
    raise CommandError("--reset-offsets needs a target: --to-earliest, --to-latest, --to-offset, --shift-by, "
                       "--to-datetime or --by-duration")


def _partitions(admin, group: str, args) -> list:
    from odradek.client import TopicPartition

    if args.all_topics:
        return sorted(admin.list_group_offsets(group))
    out = []
    for spec in args.topic:
        topic, _, numbers = spec.partition(":")
        if numbers:
            try:
                out += [TopicPartition(topic, int(p)) for p in numbers.split(",")]
            except ValueError:
                raise CommandError(f"--topic {spec!r}: partitions must be numbers joined by ','") from None
        else:
            count = len(admin.describe_topics([topic])[topic].partitions)
            out += [TopicPartition(topic, p) for p in range(count)]
    return sorted(set(out))


def _reset(admin, groups: list[str], args) -> int:
    target = _target(args)
    if not args.topic and not args.all_topics:
        raise CommandError("--reset-offsets needs --topic or --all-topics")
    rows = []
    descriptions = admin.describe_groups(groups)
    for group in groups:
        state = descriptions[group].state
        if args.execute and state not in _INACTIVE:
            raise CommandError(f"Assignments can only be reset if the group '{group}' is inactive, "
                               f"but the current state is {state}.")
        partitions = _partitions(admin, group, args)
        if not partitions:
            continue
        new = admin.reset_group_offsets(group, partitions, dry_run=not args.execute, on_clamp=_warn_clamped,
                                        **target)
        rows += [(group, tp.topic, tp.partition, offset) for tp, offset in sorted(new.items())]
    if not args.execute and not args.dry_run:
        print("WARN: no action is performed without --execute; showing the new offsets only.", file=sys.stderr)
    if args.output == "json":
        for group, topic, partition, offset in rows:
            print_json({"group": group, "topic": topic, "partition": partition, "new_offset": offset})
    elif args.output == "text":
        sys.stdout.write(groups_text.reset_text(rows))
    else:
        print_table(("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"), rows)
    return 0


def _warn_clamped(tp, wanted: int, new: int) -> None:
    where = "before the start" if wanted < new else "past the end"
    print(f"WARN: new offset {wanted} is {where} of {tp.topic}-{tp.partition}; it is set to {new} instead.",
          file=sys.stderr)


def _delete(admin, groups: list[str]) -> int:
    admin.delete_groups(groups)
    names = ", ".join(f"'{g}'" for g in groups)
    print(f"Deletion of requested consumer groups ({names}) was successful.")
    return 0
