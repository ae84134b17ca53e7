"""The plain text reports of Kafka 4.2's ``kafka-share-groups.sh`` (``ShareGroupCommand``),
which ``odradek share-groups`` prints with ``--output text``, its default when standard output
is not a terminal: scripts cut and awk these columns.

Columns are left-aligned, one blank apart; GROUP, TOPIC, CONSUMER-ID, HOST and CLIENT-ID are
padded to 15 or their longest value; the last column is not padded. A missing value is ``-``.
Each report of a group starts with an empty line and ends with a newline, as Kafka's
``printf("\\n...")`` lines followed by one ``println``. ``--describe`` (``--offsets``)::

    <empty line>
    GROUP           TOPIC           PARTITION  START-OFFSET  LAG
    jobs            orders          0          3             2

``--verbose`` puts LEADER-EPOCH (13 wide) before START-OFFSET. ``--members``: GROUP
CONSUMER-ID HOST CLIENT-ID #PARTITIONS (12 wide) [MEMBER-EPOCH (13 wide)] ASSIGNMENT, the
assignment as ``orders:0,1;other:2``. ``--state``: GROUP, ``COORDINATOR (ID)`` (``host:port
(id)`` with two blanks, Kafka's own, at least 25 wide), STATE (15) [GROUP-EPOCH (12)
ASSIGNMENT-EPOCH (17)] #MEMBERS. ``--reset-offsets``: GROUP TOPIC PARTITION (10) NEW-OFFSET.
``--delete-offsets``: TOPIC STATUS. ``--list --state``: GROUP STATE, no leading line.
"""

from __future__ import annotations

MISSING = "-"


def _line(widths, values) -> str:
    """``values`` left-aligned in ``widths`` (None: the column is not padded), one blank apart."""
    return " ".join(f"{_cell(v)}" if w is None else f"{_cell(v):<{w}}" for w, v in zip(widths, values))


def _cell(value) -> str:
    return MISSING if value is None else str(value)


def _report(widths, header, rows) -> str:
    return "".join("\n" + _line(widths, line) for line in [header, *rows]) + "\n"


def _width(values, least: int = 15) -> int:
    return max([least] + [len(str(v)) for v in values])


def states_text(listed) -> str:
    """``--list --state``: each share group and its state (``GroupListing``s)."""
    width = _width(g.group_id for g in listed)
    lines = [("GROUP", "STATE")] + [(g.group_id, g.state or "Unknown") for g in listed]
    return "".join(_line((width, None), line) + "\n" for line in lines)


def offsets_text(group: str, rows: list[dict], verbose: bool) -> str:
    """``--describe --offsets`` of one group; ``rows`` as ``share_groups_cmd.offset_rows``."""
    if not rows:
        return f"\nShare group '{group}' has no offset information.\n"
    keys = ("group", "topic", "partition") + (("leader_epoch",) if verbose else ()) + ("start_offset", "lag")
    header = ("GROUP", "TOPIC", "PARTITION") + (("LEADER-EPOCH",) if verbose else ()) + ("START-OFFSET", "LAG")
    widths = [_width([group]), _width(r["topic"] for r in rows), 10] + ([13] if verbose else []) + [13, None]
    return _report(widths, header, [[r[k] for k in keys] for r in rows])


def assignment_text(assignment) -> str:
    """Kafka's ``getAssignmentString``: ``orders:0,1;other:2``, topics and partitions sorted."""
    by_topic: dict[str, list[int]] = {}
    for tp in assignment:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ";".join(sorted(f"{t}:{','.join(str(p) for p in sorted(ps))}" for t, ps in by_topic.items()))


def members_text(description, verbose: bool) -> str:
    """``--describe --members`` of one group with members (sorted by member id)."""
    members = sorted(description.members, key=lambda m: m.member_id)
    header = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"] + (["MEMBER-EPOCH"] if verbose else [])
    header.append("ASSIGNMENT")
    rows = [[description.group_id, m.member_id, m.client_host, m.client_id, len(m.assignment)]
            + ([m.member_epoch] if verbose else []) + [assignment_text(m.assignment)] for m in members]
    widths = [_width([description.group_id]), _width(m.member_id for m in members),
              _width(m.client_host for m in members), _width(m.client_id for m in members), 12]
    widths += ([13] if verbose else []) + [None]
    return _report(widths, header, rows)


def state_text(description, coordinator: str, verbose: bool) -> str:
    """``--describe --state`` of one group; ``coordinator`` as ``host:port (id)`` (or ``-``),
    written ``host:port  (id)``, with two blanks, as Kafka's ShareGroupCommand writes it."""
    coordinator = coordinator.replace(" (", "  (", 1)
    widths = [_width([description.group_id]), _width([coordinator], 25), 15]
    header = ["GROUP", "COORDINATOR (ID)", "STATE"]
    row = [description.group_id, coordinator, description.state]
    if verbose:
        widths += [12, 17]
        header += ["GROUP-EPOCH", "ASSIGNMENT-EPOCH"]
        row += [description.group_epoch, description.assignment_epoch]
    return _report(widths + [None], header + ["#MEMBERS"], [row + [len(description.members)]])


def reset_text(rows) -> str:
    """``--reset-offsets``: ``(group, topic, partition, new offset)`` rows (Kafka's
    ``GroupOffsetsResetter.printOffsetsToReset``); nothing when none."""
    if not rows:
        return ""
    widths = (_width(r[0] for r in rows), _width(r[1] for r in rows), 10, None)
    return _report(widths, ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"), rows)


def delete_offsets_text(statuses: dict[str, str | None]) -> str:
    """``--delete-offsets``: per topic ``Successful`` or ``Error: <message>``."""
    widths = (_width(statuses), None)
    rows = [(t, "Successful" if e is None else f"Error: {e}") for t, e in sorted(statuses.items())]
    return _report(widths, ("TOPIC", "STATUS"), rows)
