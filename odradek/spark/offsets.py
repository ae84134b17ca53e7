"""Offsets as the source's options and Spark's offset log spell them.

JSON form, Spark's Kafka source's: ``{"topic": {"partition": offset}}``; in
``startingOffsets`` an offset may be -2 (earliest) or -1 (latest), in ``endingOffsets`` -1.
``startingOffsetsByTimestamp`` has the same shape with millisecond timestamps.

The streaming source's offset is ``{topic: {partition: next_offset}}`` too, always built by
``offset_dict`` in one canonical order (topics sorted, partitions in numeric order): Spark
compares offsets as JSON strings, so the same positions must always serialize the same way,
or every trigger would look like new data.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from odradek.client.topic_partition import TopicPartition

__all__ = ["EARLIEST", "LATEST", "OffsetSpec", "parse_offset_spec", "parse_partition_json", "offset_dict",
           "from_offset_dict", "parse_assign"]

EARLIEST = -2
LATEST = -1


@dataclass(frozen=True)
class OffsetSpec:
    """Where to start or end: ``kind`` is "earliest", "latest", "offsets" (``values`` maps
    partitions to offsets, -2/-1 allowed), "timestamp" (every partition at ``timestamp``)
    or "timestamps" (``values`` maps partitions to timestamps)."""

    kind: str
    values: dict | None = None
    timestamp: int | None = None


def parse_offset_spec(text: str, option: str, allow_earliest: bool = True) -> OffsetSpec:
    """``earliest``, ``latest`` or partition JSON, as the ``option`` option gives it."""
    word = text.strip().lower()
    if word == "earliest":
        if not allow_earliest:
            raise ValueError(f"{option}: 'earliest' is not allowed here")
        return OffsetSpec("earliest")
    if word == "latest":
        return OffsetSpec("latest")
    values = parse_partition_json(text, option)
    for tp, offset in values.items():
        if offset < EARLIEST or (offset == EARLIEST and not allow_earliest):
            raise ValueError(f"{option}: offset {offset} for {tp} is not allowed "
                             f"(use an offset, {'-2 for earliest, ' if allow_earliest else ''}-1 for latest)")
    return OffsetSpec("offsets", values)


def parse_partition_json(text: str, option: str) -> dict[TopicPartition, int]:
    """``{"topic": {"0": 23, "1": -1}}`` as ``{TopicPartition: int}``; ValueError when it is
    not that shape."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{option}: expected 'earliest', 'latest' or JSON like "
                         f'{{"topic":{{"0":23}}}}, got {text!r} ({e})') from None
    if not isinstance(raw, dict):
        raise ValueError(f'{option}: expected a JSON object like {{"topic":{{"0":23}}}}, got {text!r}')
    out = {}
    for topic, partitions in raw.items():
        if not isinstance(partitions, dict):
            raise ValueError(f"{option}: partitions of {topic!r} must be a JSON object, got {partitions!r}")
        for partition, value in partitions.items():
            try:
                number = int(partition)
            except ValueError:
                raise ValueError(f"{option}: partition {partition!r} of {topic!r} is not a number") from None
            if type(value) is not int:
                raise ValueError(f"{option}: value for {topic}-{partition} must be an integer, got {value!r}")
            out[TopicPartition(topic, number)] = value
    return out


def parse_assign(text: str) -> list[TopicPartition]:
    """The ``assign`` option: ``{"topic": [0, 1]}``."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f'assign: expected JSON like {{"topic":[0,1]}}, got {text!r} ({e})') from None
    if not isinstance(raw, dict) or not all(isinstance(v, list) for v in raw.values()):
        raise ValueError(f'assign: expected JSON like {{"topic":[0,1]}}, got {text!r}')
    out = []
    for topic, partitions in raw.items():
        for p in partitions:
            if type(p) is not int or p < 0:
                raise ValueError(f"assign: partition {p!r} of {topic!r} is not a partition number")
            out.append(TopicPartition(topic, p))
    return sorted(set(out))


def offset_dict(offsets: dict) -> dict:
    """``{TopicPartition: offset}`` as the canonical ``{topic: {"partition": offset}}``."""
    out: dict = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def from_offset_dict(offsets: dict) -> dict[TopicPartition, int]:
    """The inverse of ``offset_dict`` (what Spark hands back from its offset log)."""
    return {TopicPartition(topic, int(p)): int(o) for topic, parts in offsets.items() for p, o in parts.items()}
