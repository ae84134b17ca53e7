"""``partition.metadata``: the topic id a partition directory belongs to (Kafka's
``PartitionMetadataFile``, KIP-516).

Format (text, in the partition's directory)::

    version: 0
    topic_id: 5fJ1jE3zQXOPeGtWq0s3Ag

The id is printed as Kafka prints a ``Uuid``: base64, URL-safe alphabet, without padding.

Why: a topic deleted and created again under the same name gets a new id, so a directory the
old topic left behind (a deletion cut short by a failure, or carried out while this broker
was away) is recognised as not the new topic's and removed instead of served.

Written once, when the log is created or first led with an id, and not fsynced (creating
10,000 partitions would pay 10,000 more syncs): a crash soon after may leave the file
missing or torn, which reads as "no id recorded", and such a log takes the id of the topic
that leads it next, which is the topic that created it.
"""

from __future__ import annotations

import base64
import binascii
import os
import uuid

from odradek.storage.file_ops import write_file

FILE_NAME = "partition.metadata"
VERSION = 0


def topic_id_text(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")


def write_topic_id(directory: str, topic_id: uuid.UUID) -> None:
    """Record ``topic_id`` as the owner of the partition directory (OSError on failure)."""
    text = f"version: {VERSION}\ntopic_id: {topic_id_text(topic_id)}\n"
    write_file(os.path.join(directory, FILE_NAME), text.encode("ascii"))


def read_topic_id(directory: str) -> uuid.UUID | None:
    """The recorded topic id; None when there is no file (a log from before topic ids) or
    it does not parse (then the caller treats the log as one of unknown id)."""
    try:
        with open(os.path.join(directory, FILE_NAME), "rb") as f:
            lines = f.read(4096).decode("ascii").splitlines()
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    fields = dict(line.split(": ", 1) for line in lines if ": " in line)
    if fields.get("version") != str(VERSION) or "topic_id" not in fields:
        return None
    try:
        raw = base64.urlsafe_b64decode(fields["topic_id"] + "==")
    except (binascii.Error, ValueError):
        return None
    return uuid.UUID(bytes=raw) if len(raw) == 16 else None
