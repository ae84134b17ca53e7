"""Checks of what an administrator asks for a topic before anything is written: a manual
replica assignment (as Kafka's ``AdminZkClient`` checks it) and topic configs as string
pairs. Used by `ClusterMetadata` (one topic) and `topic_batch` (many at once).
"""

from __future__ import annotations

from collections.abc import Mapping

from odradek.metadata.errors import InvalidConfigError, InvalidPartitionsError, InvalidReplicaAssignmentError


def validate_replica_assignment(
    assignment: Mapping[int, list[int] | tuple[int, ...]], first_partition: int = 0
) -> dict[int, tuple[int, ...]]:
    """Check a manual assignment as Kafka's admin code does; return it normalised.

    Partitions must be exactly ``first_partition, first_partition + 1, ...``; every partition
    needs at least one replica, no broker twice, and all the same number of replicas.
    """
    if not assignment:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    try:
        replicas = {int(p): tuple(int(b) for b in r) for p, r in assignment.items()}
    except (TypeError, ValueError) as exc:
        raise InvalidReplicaAssignmentError(f"replica assignment is not numeric: {exc}") from exc
    expected = list(range(first_partition, first_partition + len(replicas)))
    if sorted(replicas) != expected:
        raise InvalidReplicaAssignmentError(
            f"partitions should be a consecutive integer sequence from {first_partition}, "
            f"got {sorted(replicas)}"
        )
    for partition, brokers in replicas.items():
        if not brokers:
            raise InvalidReplicaAssignmentError(f"partition {partition} has no replicas")
        if len(set(brokers)) != len(brokers):
            raise InvalidReplicaAssignmentError(
                f"Duplicate replica assignment found: {partition} -> {list(brokers)}"
            )
        if min(brokers) < 0:
            raise InvalidReplicaAssignmentError(f"partition {partition}: negative broker id")
    if len({len(b) for b in replicas.values()}) != 1:
        raise InvalidReplicaAssignmentError(
            "All partitions should have the same number of replicas"
        )
    return dict(sorted(replicas.items()))


def validate_configs(configs: Mapping[str, str] | None) -> dict[str, str]:
    """Configs are string pairs (their meaning is checked where they are used)."""
    out = dict(configs or {})
    for key, value in out.items():
        if not isinstance(key, str) or not key or not isinstance(value, str):
            raise InvalidConfigError(
                f"config entries must be non-empty string keys and string values: {key!r}"
            )
    return out
