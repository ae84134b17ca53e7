"""``message.format.version`` (topic) and ``log.message.format.version`` (broker): deprecated
since Kafka 3.0 (KIP-724), accepted and ignored.

With an inter-broker protocol of 3.0 or newer, Kafka keeps the value among the topic's configs
(DescribeConfigs shows it) but writes record batches v2 whatever it says, and logs a warning
naming the topic. odradek, which writes only v2 batches, does the same. A value must still be
a version Kafka knows (``MetadataVersionValidator``): a release such as ``2.8``, ``0.10.2`` or
``3.0-IV1``, where ``2.8.1`` reads as ``2.8`` and ``0.10.2.1`` as ``0.10.2`` (two numbers, or
three for the 0.x releases, are kept).
"""

from __future__ import annotations

import logging

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server.topic_error import TopicError

log = logging.getLogger("odradek.topics")

TOPIC_KEY = "message.format.version"
BROKER_KEY = "log.message.format.version"
DEFAULT = "3.0-IV1"
INTER_BROKER_PROTOCOL_VERSION = "3.9"  # what odradek's wire protocol corresponds to, for the warning

# Kafka's MetadataVersion releases up to 3.9 with their sub-versions (IV = inter-broker version).
_RELEASES = {
    "0.8.0": 0, "0.8.1": 0, "0.8.2": 0, "0.9.0": 0, "0.10.0": 2, "0.10.1": 3, "0.10.2": 1, "0.11.0": 3,
    "1.0": 1, "1.1": 1, "2.0": 2, "2.1": 3, "2.2": 2, "2.3": 2, "2.4": 2, "2.5": 1, "2.6": 1, "2.7": 3, "2.8": 2,
    "3.0": 2, "3.1": 1, "3.2": 1, "3.3": 4, "3.4": 1, "3.5": 3, "3.6": 3, "3.7": 5, "3.8": 1, "3.9": 1,
}
VERSIONS = frozenset(_RELEASES) | frozenset(
    f"{release}-IV{i}" for release, count in _RELEASES.items() for i in range(count))


def is_valid(value: str) -> bool:
    """Whether Kafka's ``MetadataVersion.fromVersionString`` knows the version."""
    keep = 3 if value.startswith("0.") else 2
    parts = value.split(".")
    return (value if len(parts) <= keep else ".".join(parts[:keep])) in VERSIONS


def check(value: str) -> None:
    """Raise INVALID_CONFIG with Kafka's message for a version Kafka does not know."""
    if not is_valid(value):
        raise TopicError(ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {TOPIC_KEY}: "
                                                   f"Version {value} is not a valid version")


def warn_ignored(topic: str, configs: dict[str, str]) -> None:
    """Kafka's warning (``LogConfig.MessageFormatVersion.topicWarningMessage``) when a topic's
    configs carry the deprecated key."""
    value = configs.get(TOPIC_KEY)
    if value is not None:
        log.warning("Topic configuration %s with value `%s` is ignored for `%s` because the inter-broker protocol "
                    "version `%s` is greater or equal than 3.0. This configuration is deprecated and it will be "
                    "removed in Apache Kafka 4.0.", TOPIC_KEY, value, topic, INTER_BROKER_PROTOCOL_VERSION)
