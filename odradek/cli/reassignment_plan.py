"""The files and calculations of ``odradek reassign-partitions``, without I/O, as Kafka's
``ReassignPartitionsCommand`` has them.

Files (Kafka's JSON, version 1):

* topics to move (``--topics-to-move-json-file``)::

    {"version": 1, "topics": [{"topic": "foo"}, {"topic": "bar"}]}

* a reassignment (``--reassignment-json-file``, and what ``--generate`` prints, compact)::

    {"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}

  ``log_dirs`` is optional; odradek does not move replicas between the log directories of a
  broker, so every entry must be ``"any"``.

Throttles (``--throttle``, Kafka's ``calculateProposedMoveMap``): a partition's *sources* are
its current replicas (or, while a reassignment of it runs, the replicas it started from), its
*destinations* the target replicas that are not sources. The leader list of a topic names
``partition:source`` for every source, the follower list ``partition:destination``; both as
sorted strings joined by commas. Worked example: foo-0 on [1, 2] moved to [2, 3] gives the
leader list ``0:1,0:2`` and the follower list ``0:3``; the brokers throttled are 1, 2 and 3.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from odradek.client.topic_partition import TopicPartition

ANY_LOG_DIR = "any"


class PlanError(ValueError):
    """A file or argument the command cannot use; the message is Kafka's."""


@dataclass(frozen=True, slots=True)
class PartitionMove:
    sources: frozenset[int]
    destinations: frozenset[int]


def _load(text: str) -> dict:
    try:
        doc = json.loads(text)
    except ValueError:
        raise PlanError("The input string is not a valid JSON") from None
    if not isinstance(doc, dict):
        raise PlanError("The input string is not a valid JSON object")
    version = doc.get("version", 1)
    if version != 1:
        raise PlanError(f"Not supported version field value {version}")
    return doc


def parse_topics(text: str) -> list[str]:
    """The topics of a topics-to-move file; duplicates refused."""
    try:
        topics = [str(t["topic"]) for t in _load(text).get("topics", [])]
    except (TypeError, KeyError):
        raise PlanError('Each entry of "topics" needs a "topic"') from None
    duplicates = _duplicates(topics)
    if duplicates:
        raise PlanError(f"List of topics to reassign contains duplicate entries: {', '.join(duplicates)}")
    return topics


def parse_broker_list(text: str) -> list[int]:
    try:
        brokers = [int(b) for b in text.split(",")]
    except ValueError:
        raise PlanError(f"Invalid broker list {text!r}: broker ids separated by commas") from None
    duplicates = _duplicates(brokers)
    if duplicates:
        raise PlanError(f"Broker list contains duplicate entries: {', '.join(map(str, duplicates))}")
    return brokers


def parse_reassignment(text: str) -> list[tuple[TopicPartition, list[int]]]:
    """The partitions of a reassignment file, in file order (duplicates kept: `check_execute`
    refuses them)."""
    out = []
    try:
        for p in _load(text).get("partitions", []):
            tp = TopicPartition(str(p["topic"]), int(p["partition"]))
            replicas = [int(r) for r in p["replicas"]]
            log_dirs = p.get("log_dirs", [ANY_LOG_DIR] * len(replicas))
            if len(log_dirs) != len(replicas):
                raise PlanError(f"Size of replicas list {replicas} is different from size of log dirs list "
                                f"{log_dirs} for partition {tp}")
            if any(d != ANY_LOG_DIR for d in log_dirs):
                raise PlanError(f"odradek does not move replicas between log directories: log_dirs of {tp} must "
                                f'all be "{ANY_LOG_DIR}"')
            out.append((tp, replicas))
    except (TypeError, KeyError, ValueError) as e:
        if isinstance(e, PlanError):
            raise
        raise PlanError(f'Each entry of "partitions" needs "topic", "partition" and "replicas": {e}') from None
    return out


def check_execute(parts: list[tuple[TopicPartition, list[int]]]) -> dict[TopicPartition, list[int]]:
    """Kafka's ``parseExecuteAssignmentArgs`` checks; the partitions as a dict."""
    if not parts:
        raise PlanError("Partition reassignment list cannot be empty")
    if any(not replicas for _, replicas in parts):
        raise PlanError("Partition replica list cannot be empty")
    duplicates = _duplicates([tp for tp, _ in parts])
    if duplicates:
        raise PlanError(f"Partition reassignment contains duplicate topic partitions: {','.join(map(str, duplicates))}")
    repeated = [f"{tp} contains multiple entries for {','.join(map(str, d))}"
                for tp, replicas in parts if (d := _duplicates(replicas))]
    if repeated:
        raise PlanError(f"Partition replica lists may not contain duplicate entries: {'. '.join(repeated)}")
    return dict(parts)


def format_reassignment(assignment: Mapping[TopicPartition, Iterable[int]]) -> str:
    """Kafka's ``formatAsReassignmentJson``: compact, partitions sorted."""
    parts = [{"topic": tp.topic, "partition": tp.partition, "replicas": list(r), "log_dirs": [ANY_LOG_DIR] * len(list(r))}
             for tp, r in sorted(assignment.items())]
    return json.dumps({"version": 1, "partitions": parts}, separators=(",", ":"))


def move_map(current: Mapping[TopicPartition, object], proposed: Mapping[TopicPartition, list[int]],
             current_parts: Mapping[TopicPartition, list[int]]) -> dict[str, dict[int, PartitionMove]]:
    """Kafka's ``calculateProposedMoveMap``; ``current`` holds the reassignments in progress
    (``PartitionReassignment``s), ``current_parts`` the replicas of the proposed partitions."""
    moves: dict[str, dict[int, PartitionMove]] = {}
    for tp, r in current.items():
        adding = set(r.adding_replicas)
        moves.setdefault(tp.topic, {})[tp.partition] = PartitionMove(
            frozenset(set(r.replicas) - adding), frozenset(adding))
    for tp, replicas in proposed.items():
        topic_moves = moves.setdefault(tp.topic, {})
        if tp.partition in topic_moves:
            sources = topic_moves[tp.partition].sources
        elif tp in current_parts:
            sources = frozenset(current_parts[tp])
        else:
            raise PlanError(f"Trying to reassign a topic partition {tp} with 0 replicas")
        topic_moves[tp.partition] = PartitionMove(sources, frozenset(replicas) - sources)
    return moves


def leader_throttles(moves: Mapping[str, Mapping[int, PartitionMove]]) -> dict[str, str]:
    return {topic: ",".join(sorted({f"{p}:{s}" for p, m in parts.items() for s in m.sources}))
            for topic, parts in moves.items()}


def follower_throttles(moves: Mapping[str, Mapping[int, PartitionMove]]) -> dict[str, str]:
    return {topic: ",".join(sorted({f"{p}:{d}" for p, m in parts.items() for d in m.destinations
                                    if d not in m.sources}))
            for topic, parts in moves.items()}


def reassigning_brokers(moves: Mapping[str, Mapping[int, PartitionMove]]) -> list[int]:
    return sorted({b for parts in moves.values() for m in parts.values() for b in m.sources | m.destinations})


def _duplicates(items: list) -> list:
    seen, out = set(), []
    for item in items:
        if item in seen and item not in out:
            out.append(item)
        seen.add(item)
    return out
