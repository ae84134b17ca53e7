"""Znodes read for the metadata image, parsed leniently: a missing znode is None (an empty
config), and a malformed one is logged and left out, never raised: one bad znode written by
another tool must not stop a broker from following the rest. ``found`` is what
`MetadataStore.get` or `get_many` returned: ``(data, version)`` or None."""

from __future__ import annotations

import logging
from types import MappingProxyType

from odradek.metadata import layout
from odradek.metadata.errors import MalformedMetadataError
from odradek.metadata.layout import PartitionState, TopicAssignment

log = logging.getLogger("odradek.metadata.metadata_cache")

Found = tuple[bytes, int] | None


def parse_topic(name: str, found: Found) -> TopicAssignment | None:
    """A topic's assignment, at ``/brokers/topics/<name>``."""
    if found is None:
        return None
    try:
        return TopicAssignment.from_json(name, found[0], found[1])
    except MalformedMetadataError:
        log.warning("ignoring the malformed assignment of topic %r", name)
        return None


def parse_state(topic: str, partition: int, found: Found) -> PartitionState | None:
    """A partition's state, at ``.../partitions/<partition>/state``."""
    if found is None:
        return None
    try:
        return PartitionState.from_json(found[0], found[1], f"state of {topic}-{partition}")
    except MalformedMetadataError:
        log.warning("ignoring the malformed state of %s-%d", topic, partition)
        return None


def parse_config(name: str, found: Found) -> MappingProxyType:
    """A topic's config overrides, at ``/config/topics/<name>``."""
    if found is None:
        return MappingProxyType({})
    try:
        return MappingProxyType(layout.decode_config(found[0], f"config of topic {name!r}"))
    except MalformedMetadataError:
        log.warning("ignoring the malformed config of topic %r", name)
        return MappingProxyType({})
