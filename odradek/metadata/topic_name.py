"""Kafka's rules for topic names.

A legal name is 1 to 249 characters of ``[a-zA-Z0-9._-]`` and is neither ``.`` nor ``..``
(it becomes a directory name, ``<topic>-<partition>``, and a znode name). Because metric names
turn ``.`` into ``_``, two topics whose names differ only there would collide:
`collision_key` gives the name both map to, so topic creation can refuse the second one.
"""

from __future__ import annotations

import re

from odradek.metadata.errors import InvalidTopicError

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")

GROUP_METADATA_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC})


def validate_topic_name(name: str) -> str:
    """Return ``name`` if it is a legal topic name, else raise InvalidTopicError."""
    if not isinstance(name, str) or not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError('Topic name cannot be "." or ".."')
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, "
            f"topic name: {name[:MAX_NAME_LENGTH]}..."
        )
    if not _LEGAL.fullmatch(name):
        raise InvalidTopicError(
            f"Topic name {name!r} is illegal, it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    return name


def has_collision_chars(name: str) -> bool:
    return "." in name or "_" in name


def collision_key(name: str) -> str:
    """The name with ``.`` read as ``_``: topics with equal keys would collide in metrics."""
    return name.replace(".", "_")


def is_internal(name: str) -> bool:
    return name in INTERNAL_TOPICS
