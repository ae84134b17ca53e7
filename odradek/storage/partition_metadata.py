"""``partition.metadata``: the topic id a partition directory belongs to (Kafka's
``PartitionMetadataFile``, KIP-516).

Format (text, in the partition's directory)::

    version: 0
    topic_id: 5fJ1jE3zQXOPeGtWq0s3Ag

The id is printed as Kafka prints a ``Uuid``: base64, URL-safe alphabet, without padding.

Why: a topic deleted and created again under the same name gets a new id, so a directory the
old topic left behind (a deletion cut short by a failure, or carried out while this broker
was away) is recognised as not the new topic's and removed instead of served. Written
atomically (a temporary file, fsynced, renamed over the old one, the directory fsynced), so
a crash leaves the old file or the new one.
"""

from __future__ import annotations

import base64
import binascii
import os
import uuid

from odradek.storage.file_ops import fsync_directory, write_file

FILE_NAME = "partition.metadata"
VERSION = 0


def topic_id_text(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")


def write_topic_id(directory: str, topic_id: uuid.UUID) -> None:
    """Record ``topic_id`` as the owner of the partition directory (OSError on failure)."""
    path = os.path.join(directory, FILE_NAME)
    text = f"version: {VERSION}\ntopic_id: {topic_id_text(topic_id)}\n"
    tmp = path + ".tmp"
    write_file(tmp, text.encode("ascii"))
    fd = os.open(tmp, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_directory(directory)


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
