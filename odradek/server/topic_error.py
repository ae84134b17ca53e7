"""``TopicError``: a topic operation refused with a Kafka error code (and Kafka's message).

Raised by the topic manager (server/topics.py), by the checks of topic configs it calls
(server/message_format_version.py) and answered by the handlers of CreateTopics,
DeleteTopics, CreatePartitions, AlterConfigs and the rest as the partition's or topic's
``ErrorCode`` and ``ErrorMessage``. Kept apart from topics.py so those checks can raise it
without importing the manager that imports them.
"""

from __future__ import annotations

from odradek.protocol.generated.error_codes import ErrorCode


class TopicError(Exception):
    def __init__(self, error: ErrorCode, message: str = "") -> None:
        super().__init__(message or error.name)
        self.error = error
        self.message = message or None
