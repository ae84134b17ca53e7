"""kafka-consumer-groups.sh's plain output (Kafka 3's ``ConsumerGroupCommand``), which
``odradek groups`` prints with ``--output text``, its default when standard output is not a
terminal: scripts cut and awk these columns.

Each report starts with an empty line, then a header and a row per line. Columns are
left-aligned and padded to a width: 15 for GROUP, TOPIC, CONSUMER-ID, HOST and CLIENT-ID,
or the longest value; 10 for PARTITION; 15 for the offsets and LAG; the last column is not
padded (but ``--members`` ends each line with a blank after #PARTITIONS, as Kafka does). A
missing value is ``-``. ``--describe --offsets``::

    <empty line>
    GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             CONSUMER-ID     HOST            CLIENT-ID
    g               events          0          3               5               2               -               -               -

``--members`` (GROUP-INSTANCE-ID only when a member has one; ASSIGNMENT with ``--verbose``,
``topic(0,1), other(2)``), ``--state`` (GROUP padded to the COORDINATOR (ID) column's width,
Kafka's own quirk), ``--list --state`` (GROUP STATE, no leading line), ``--reset-offsets``
(GROUP and TOPIC 30 wide). What Kafka prints on standard error stays there: ``Consumer group
'g' has no active members.`` and ``Warning: Consumer group 'g' is rebalancing.``, each after
an empty line.
"""

from __future__ import annotations

import sys

MISSING = "-"
_REBALANCING = ("PreparingRebalance", "CompletingRebalance")


def _padded(widths, values) -> str:
    """``values`` left-aligned in ``widths`` (None: the column is not padded), one blank apart."""
    return " ".join(f"{v}" if w is None else f"{v:<{w}}" for w, v in zip(widths, values))


def _cell(value) -> str:
    return MISSING if value is None else str(value)


def note_state(group: str, state: str) -> None:
    """What Kafka says on standard error of an Empty or rebalancing group."""
    if state == "Empty":
        print(f"\nConsumer group '{group}' has no active members.", file=sys.stderr)
    elif state in _REBALANCING:
        print(f"\nWarning: Consumer group '{group}' is rebalancing.", file=sys.stderr)


def offsets_text(rows: list[dict]) -> str:
    """``--describe --offsets`` of one group; ``rows`` as ``groups_cmd.group_offsets`` gives them."""
    keys = ("group", "topic", "partition", "current_offset", "log_end_offset", "lag", "consumer_id", "host",
            "client_id")
    header = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
              "CLIENT-ID")
    cells = [[_cell(row[k]) for k in keys] for row in rows]

    def width(i: int) -> int:
        return max([15] + [len(c[i]) for c in cells])

    widths = (width(0), width(1), 10, 15, 15, 15, width(6), width(7), None)
    return "\n" + "".join(_padded(widths, line) + "\n" for line in [header, *cells])


def members_text(group: str, members, verbose: bool, target_epoch: int | None = None) -> str:
    """``--describe --members`` of one group (``MemberDescription``s). A consumer group's
    (``target_epoch`` given: its target assignment epoch) verbose form ends, as Kafka 4's,
    with CURRENT-EPOCH, CURRENT-ASSIGNMENT, TARGET-EPOCH and TARGET-ASSIGNMENT."""
    with_instance = any(m.group_instance_id for m in members)
    header = ["GROUP", "CONSUMER-ID"] + (["GROUP-INSTANCE-ID"] if with_instance else []) + [
        "HOST", "CLIENT-ID", "#PARTITIONS"]
    cells = []
    for m in members:
        row = [group, m.member_id] + ([m.group_instance_id or ""] if with_instance else []) + [
            m.client_host, m.client_id, str(len(m.assignment))]
        cells.append(row)
    widths = [max([17 if name == "GROUP-INSTANCE-ID" else 15] + [len(c[i]) for c in cells])
              for i, name in enumerate(header[:-1])] + [15]
    if verbose and target_epoch is not None:
        return "\n" + "".join(line + "\n" for line in _epoch_lines(members, header, cells, widths, target_epoch))
    lines = [_padded(widths, header) + " " + ("ASSIGNMENT" if verbose else "")]
    for m, row in zip(members, cells):
        lines.append(_padded(widths, row) + " " + (assignment_text(m.assignment) if verbose else ""))
    return "\n" + "".join(line + "\n" for line in lines)


def _epoch_lines(members, header, cells, widths, target_epoch: int) -> list[str]:
    current = [assignment_text(m.assignment) for m in members]
    target = [assignment_text(m.target_assignment) for m in members]
    extra_widths = [15, max([20] + [len(c) for c in current]), 15, None]
    lines = [_padded(widths + extra_widths, header + ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH",
                                                      "TARGET-ASSIGNMENT"])]
    for m, row, cur, tgt in zip(members, cells, current, target):
        lines.append(_padded(widths + extra_widths, row + [str(m.member_epoch), cur, str(target_epoch), tgt]))
    return lines


def assignment_text(assignment) -> str:
    """``topic(0,1), other(2)``: partitions by topic, both sorted; ``-`` when none."""
    by_topic: dict[str, list[int]] = {}
    for tp in assignment:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    if not by_topic:
        return MISSING
    return ", ".join(sorted(f"{t}({','.join(str(p) for p in sorted(ps))})" for t, ps in by_topic.items()))


def state_text(description, coordinator: str, epochs: bool = False) -> str:
    """``--describe --state`` of one group; ``coordinator`` as ``host:port (id)``; ``epochs``
    (a consumer group with --verbose) adds GROUP-EPOCH and TARGET-ASSIGNMENT-EPOCH, Kafka 4's."""
    first = max(25, len(coordinator))
    widths = [first, 25, 20, 15, None]
    header = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
    row = [description.group_id, coordinator, description.protocol or "", description.state,
           len(description.members)]
    if epochs:
        widths[4:4], header[4:4] = [15, 25], ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"]
        row[4:4] = [description.group_epoch, description.assignment_epoch]
    return "\n" + _padded(widths, header) + "\n" + _padded(widths, row) + "\n"


def type_name(group_type: str) -> str:
    """Kafka's ``GroupType.toString()``: Classic, Consumer; Unknown when the broker said none."""
    return group_type.capitalize() if group_type else "Unknown"


def group_types_text(listed, with_state: bool) -> str:
    """``--list --type [--state]`` (Kafka 4's ``printGroupInfo``): GROUP padded to the longest
    id (at least 15) plus 10, then TYPE and STATE padded to 20 each."""
    width = max([15] + [len(g.group_id) for g in listed]) + 10
    widths = (width, 20, 20)
    lines = [("GROUP", "TYPE") + (("STATE",) if with_state else ())]
    lines += [(g.group_id, type_name(g.type)) + ((g.state or "Unknown",) if with_state else ()) for g in listed]
    return "".join(_padded(widths, line) + "\n" for line in lines)


def group_states_text(listed) -> str:
    """``--list --state``: each group and its state (``GroupListing``s)."""
    width = max([15] + [len(g.group_id) for g in listed])
    lines = [("GROUP", "STATE")] + [(g.group_id, g.state) for g in listed]
    return "".join(_padded((width, None), line) + "\n" for line in lines)


def reset_text(rows) -> str:
    """``--reset-offsets``: ``(group, topic, partition, new offset)`` rows; nothing when none."""
    if not rows:
        return ""
    widths = (30, 30, 10, 15)
    lines = [("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"), *rows]
    return "\n" + "".join(_padded(widths, line) + "\n" for line in lines)
