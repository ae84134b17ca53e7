"""Checking a history of writes against what a cluster holds afterwards, as Jepsen's Kafka
checkers do: pure functions over values, no I/O.

The history: every record a producer tried to write, as a `Write`: the producer's name, its
sequence number ``seq`` (counting up from 0 per producer, in the order it called send), the
partition, and the outcome of its delivery report: ``"ok"`` (acknowledged, at ``offset``),
``"failed"`` (an error report: it may still have been written) or ``"unknown"`` (no report).
A record's value is ``b"<producer>-<seq>"`` (`Write.value`; a producer name has no ``-``).

What was read: ``{partition: [(offset, value), ...]}``, each partition from its start up to
its high watermark, in offset order.

`check` reports, for an idempotent ``acks=all`` producer (Kafka's guarantee):

- ``lost``: acknowledged records absent from their partition;
- ``moved``: acknowledged records present, but not at the offset they were acknowledged with
  (the acknowledged offset was truncated away and the record written again);
- ``duplicated``: values read more than once (anywhere);
- ``reordered``: within one partition, a producer's value after one of its values with a
  higher ``seq`` (an idempotent producer keeps its order per partition, even across retries);
- ``unexpected``: values no producer wrote, or read from a partition they were not sent to.

Records that failed or have no report may be present or absent: neither is an error.

`replica_divergence` compares the replicas of one partition as raw batches (each a
``(base_offset, last_offset, bytes)``, as tests/server/cluster/broker_node.py's
`log_batches` frames a replica's segment files): followers copy the leader's batches
verbatim, so once every replica has caught up they are the same bytes.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["Verdict", "Write", "check", "replica_divergence"]

EXAMPLES = 5  # examples per kind of problem in a message

Read = Mapping[int, Sequence[tuple[int, bytes]]]
Batch = tuple[int, int, bytes]


@dataclass(frozen=True, slots=True)
class Write:
    """One record a producer tried to write (module docstring)."""

    producer: str
    seq: int
    partition: int
    outcome: str  # "ok" | "failed" | "unknown"
    offset: int | None = None  # where it was acknowledged ("ok" only)

    @property
    def value(self) -> bytes:
        return f"{self.producer}-{self.seq}".encode()

    @property
    def acknowledged(self) -> bool:
        return self.outcome == "ok"


@dataclass
class Verdict:
    """What `check` found; ``ok`` when no list holds anything."""

    writes: int = 0
    acknowledged: int = 0
    read: int = 0
    lost: list[Write] = field(default_factory=list)
    moved: list[tuple[Write, list[int]]] = field(default_factory=list)  # (write, offsets it is at)
    duplicated: list[tuple[bytes, list[tuple[int, int]]]] = field(default_factory=list)  # value, (p, offset)s
    # (partition, producer, the higher seq read before, seq, offset)
    reordered: list[tuple[int, str, int, int, int]] = field(default_factory=list)
    unexpected: list[tuple[int, int, bytes]] = field(default_factory=list)  # p, offset, value

    @property
    def ok(self) -> bool:
        return not (self.lost or self.moved or self.duplicated or self.reordered or self.unexpected)

    def summary(self) -> str:
        return (f"{self.writes} writes, {self.acknowledged} acknowledged, {self.read} records read: "
                f"{len(self.lost)} acknowledged lost, {len(self.moved)} moved, {len(self.duplicated)} duplicated, "
                f"{len(self.reordered)} reordered, {len(self.unexpected)} unexpected")

    def describe(self) -> str:
        """The summary, then the first examples of each problem."""
        lines = [self.summary()]
        if self.lost:
            by_producer = dict(sorted(Counter(w.producer for w in self.lost).items()))
            lines.append(f"lost (acknowledged, not read; by producer {by_producer}): " + ", ".join(
                f"{w.value.decode()} (p{w.partition} @{w.offset})" for w in self.lost[:EXAMPLES]))
        if self.moved:
            lines.append("moved (not at the acknowledged offset): " + ", ".join(
                f"{w.value.decode()} (p{w.partition} acked @{w.offset}, read @{at})"
                for w, at in self.moved[:EXAMPLES]))
        if self.duplicated:
            lines.append("duplicated: " + ", ".join(
                f"{v.decode(errors='replace')} at {['p%d@%d' % pos for pos in where]}"
                for v, where in self.duplicated[:EXAMPLES]))
        if self.reordered:
            lines.append("reordered: " + ", ".join(
                f"p{p} {producer}-{seq} @{offset} after {producer}-{before}"
                for p, producer, before, seq, offset in self.reordered[:EXAMPLES]))
        if self.unexpected:
            lines.append("unexpected: " + ", ".join(
                f"p{p}@{offset} {value!r}" for p, offset, value in self.unexpected[:EXAMPLES]))
        return "\n".join(lines)


def check(writes: Iterable[Write], read: Read) -> Verdict:
    """The module docstring's checks of ``read`` against the history ``writes``."""
    history = {w.value: w for w in writes}
    verdict = Verdict(writes=len(history), acknowledged=sum(w.acknowledged for w in history.values()))
    where: dict[bytes, list[tuple[int, int]]] = defaultdict(list)  # value -> (partition, offset)s
    for partition in sorted(read):
        last_seq: dict[str, int] = {}
        for offset, value in read[partition]:
            verdict.read += 1
            where[value].append((partition, offset))
            write = history.get(value)
            if write is None or write.partition != partition:
                verdict.unexpected.append((partition, offset, value))
                continue
            before = last_seq.get(write.producer)
            if before is not None and write.seq < before:  # (equal: a duplicate, reported as one)
                verdict.reordered.append((partition, write.producer, before, write.seq, offset))
            last_seq[write.producer] = max(write.seq, before if before is not None else -1)
    verdict.duplicated = [(v, at) for v, at in where.items() if len(at) > 1]
    for write in history.values():
        if not write.acknowledged:
            continue
        offsets = [o for p, o in where.get(write.value, ()) if p == write.partition]
        if not offsets:
            verdict.lost.append(write)
        elif write.offset is not None and write.offset not in offsets:
            verdict.moved.append((write, offsets))
    verdict.lost.sort(key=lambda w: (w.partition, w.offset if w.offset is not None else -1))
    return verdict


def replica_divergence(partition: int, replicas: Mapping[int, Sequence[Batch]]) -> str | None:
    """None when every replica holds the same batches; otherwise what differs: each replica's
    log end offset and the first batch where they part (by position in the log)."""
    logs = {broker: list(batches) for broker, batches in replicas.items()}
    if len({tuple(b[2] for b in batches) for batches in logs.values()}) <= 1:
        return None
    ends = {broker: (batches[-1][1] + 1 if batches else 0) for broker, batches in logs.items()}
    first = min(_first_difference(logs[a], logs[b]) for a in logs for b in logs if a < b)
    at = {broker: (f"{batches[first][0]}-{batches[first][1]}" if first < len(batches) else "none")
          for broker, batches in logs.items()}
    return f"p{partition}: replicas differ: log end offsets {ends}; their batch #{first} holds offsets {at}"


def _first_difference(a: Sequence[Batch], b: Sequence[Batch]) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x[2] != y[2]:
            return i
    return min(len(a), len(b))
