"""The server-side assignors a consumer group may use, from ``group.consumer.assignors``.

``group.consumer.assignors`` (Kafka's ``GroupCoordinatorConfig.CONSUMER_GROUP_ASSIGNORS_CONFIG``)
lists assignors by name ("uniform", "range") or by Kafka's class name
(``org.apache.kafka.coordinator.group.assignor.UniformAssignor``, ``...RangeAssignor``); the
first is the group's default. Default value: ``uniform,range``.

A ConsumerGroupHeartbeat may name a ``ServerAssignor``; Kafka's
``GroupMetadataManager.throwIfConsumerGroupHeartbeatRequestIsInvalid`` refuses a name that
is not configured with ``UNSUPPORTED_ASSIGNOR`` ("ServerAssignor x is not supported.
Supported assignors: ..."): ``ConsumerGroupAssignors.validate_server_assignor`` raises
``UnsupportedAssignorError`` (carrying that error code) for it. A group then assigns with
the name most of its members ask for (Kafka's ``ConsumerGroup.computePreferredServerAssignor``),
or the default when none asks: ``ConsumerGroupAssignors.preferred``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from odradek.coordinator.group.consumer.assignment import PartitionAssignor
from odradek.coordinator.group.consumer.range_assignor import RANGE_ASSIGNOR_NAME, RangeAssignor
from odradek.coordinator.group.consumer.uniform_assignor import (
    UNIFORM_ASSIGNOR_NAME,
    UniformAssignor,
)
from odradek.protocol.generated.error_codes import ErrorCode

CONSUMER_GROUP_ASSIGNORS_CONFIG = "group.consumer.assignors"
DEFAULT_ASSIGNOR = UNIFORM_ASSIGNOR_NAME
DEFAULT_ASSIGNORS = (UNIFORM_ASSIGNOR_NAME, RANGE_ASSIGNOR_NAME)

# The assignors are stateless, so one instance of each serves every group.
ASSIGNORS: Mapping[str, PartitionAssignor] = MappingProxyType(
    {UNIFORM_ASSIGNOR_NAME: UniformAssignor(), RANGE_ASSIGNOR_NAME: RangeAssignor()}
)

# Kafka's class names, accepted in the config for the same assignors.
_KAFKA_CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": UNIFORM_ASSIGNOR_NAME,
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": RANGE_ASSIGNOR_NAME,
}


class UnsupportedAssignorError(Exception):
    """A client asked for a server assignor the broker doesn't offer (Kafka's
    ``UnsupportedAssignorException``); answer with ``error_code``."""

    error_code = ErrorCode.UNSUPPORTED_ASSIGNOR


@dataclass(frozen=True)
class ConsumerGroupAssignors:
    """The configured assignors, in config order; ``default`` is the first."""

    by_name: Mapping[str, PartitionAssignor]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.by_name)

    @property
    def default(self) -> PartitionAssignor:
        return next(iter(self.by_name.values()))

    def is_supported(self, name: str) -> bool:
        return name in self.by_name

    def validate_server_assignor(self, name: str | None) -> None:
        """Raise ``UnsupportedAssignorError`` when a heartbeat's ``ServerAssignor`` names
        an assignor that is not configured; ``None`` (no preference) is always fine."""
        if name is not None and name not in self.by_name:
            raise UnsupportedAssignorError(
                f"ServerAssignor {name} is not supported. "
                f"Supported assignors: {', '.join(self.by_name)}."
            )

    def resolve(self, name: str | None) -> PartitionAssignor:
        """The assignor a client asked for, or the default when it asked for none."""
        self.validate_server_assignor(name)
        return self.default if name is None else self.by_name[name]

    def preferred(self, requested_counts: Mapping[str, int]) -> PartitionAssignor:
        """The assignor for a group: the configured name most members ask for
        (``requested_counts``: name -> number of members asking), ties going to the name
        configured first; the default when no member asks for a configured one."""
        best = None
        for position, name in enumerate(self.by_name):
            count = requested_counts.get(name, 0)
            if count > 0 and (best is None or count > best[0]):
                best = (count, position, name)
        return self.default if best is None else self.by_name[best[2]]


def consumer_group_assignors(
    configured: str | Iterable[str] = DEFAULT_ASSIGNORS,
) -> ConsumerGroupAssignors:
    """Parse ``group.consumer.assignors`` (a comma-separated string or a list of names).

    Raises ``ValueError`` for an empty list, an unknown name or a name given twice: the
    broker refuses to start, as Kafka does for a bad config.
    """
    if isinstance(configured, str):
        configured = configured.split(",")
    names = [n.strip() for n in configured if n.strip()]
    if not names:
        raise ValueError(f"{CONSUMER_GROUP_ASSIGNORS_CONFIG} must name at least one assignor")
    by_name: dict[str, PartitionAssignor] = {}
    for configured_name in names:
        name = _KAFKA_CLASS_NAMES.get(configured_name, configured_name)
        if name not in ASSIGNORS:
            raise ValueError(
                f"{CONSUMER_GROUP_ASSIGNORS_CONFIG}: unknown assignor {configured_name!r} "
                f"(known: {', '.join(ASSIGNORS)})"
            )
        if name in by_name:
            raise ValueError(f"{CONSUMER_GROUP_ASSIGNORS_CONFIG}: assignor {name!r} listed twice")
        by_name[name] = ASSIGNORS[name]
    return ConsumerGroupAssignors(MappingProxyType(by_name))
