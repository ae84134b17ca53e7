"""What a consumer group subscribes to, resolved against the cluster's metadata.

The coordinator learns of topics from the broker's ``MetadataImage`` (``metadata/image.py``),
read afresh at every heartbeat: a subscribed topic created, deleted or given more partitions
changes ``subscription_metadata`` at the next heartbeat of any member, which bumps the group
epoch and so the target assignment (Kafka does the same on its metadata refresh and on
``onNewMetadataImage``).

Regular expressions (``subscribed_topic_regex``, ConsumerGroupHeartbeat v1) are resolved for
the group by ``regex_resolution`` (batched, written as ConsumerGroupRegularExpression records);
Kafka compiles them with RE2/J and matches whole topic names. odradek uses Python's ``re`` with
``fullmatch``: the common subset (character classes, ``.*``, alternation, anchors) means the
same; RE2-only syntax is refused with INVALID_REGULAR_EXPRESSION, and Python-only constructs
(backreferences, look-arounds) are accepted although Kafka would refuse them.
"""

from __future__ import annotations

import re
from functools import lru_cache

from odradek.coordinator.group.consumer.assignment import TopicMetadata


class InvalidRegex(ValueError):
    pass


@lru_cache(maxsize=256)
def compile_regex(pattern: str) -> re.Pattern:
    try:
        return re.compile(pattern)
    except re.error as e:
        raise InvalidRegex(f"SubscribedTopicRegex {pattern} is not a valid regular expression: {e}") from None


def topic_metadata(image, name: str) -> TopicMetadata | None:
    """The ``TopicMetadata`` of ``name`` in ``image``; None when the topic does not exist or is
    being deleted. ``partition_racks`` from the replicas' brokers' racks, empty when no
    broker has a rack."""
    assignment = image.topic(name)
    if assignment is None or name in image.topics_being_deleted:
        return None
    racks = {}
    for p, replicas in assignment.partitions.items():
        known = frozenset(b.rack for r in replicas if (b := image.broker(r)) is not None and b.rack)
        if known:
            racks[p] = known
    return TopicMetadata(assignment.topic_id, name, len(assignment.partitions), racks)


def compute(names, image) -> dict[str, TopicMetadata]:
    """``subscription_metadata`` for the topic ``names``: those that exist."""
    out = {}
    for name in names:
        metadata = topic_metadata(image, name)
        if metadata is not None:
            out[name] = metadata
    return out
