"""Replica assignment: which brokers hold each partition's replicas, the leader first.

Kafka's algorithms: ``AdminUtils.assignReplicasToBrokers``,
``assignReplicasToBrokersRackUnaware`` and ``replicaIndex`` in Kafka 2.8's
``core/src/main/scala/kafka/admin/AdminUtils.scala``.

Rack-unaware, over the broker list ``B`` (sorted by id) of ``n`` brokers:

* the leader of partition ``p`` is ``B[(p + start_index) % n]``: leaders go round the list;
* follower ``j`` (0-based) of a partition led by ``B[f]`` is ``B[(f + shift) % n]`` with
  ``shift = 1 + (replica_shift + j) % (n - 1)`` (`replica_index`): never the leader, the
  followers of a partition on consecutive brokers after a gap of ``replica_shift``;
* ``replica_shift`` grows by one each time the partition number passes a multiple of ``n``,
  so partitions ``p`` and ``p + n`` (same leader) get different followers.

``start_index`` and ``replica_shift`` are random in ``[0, n)`` unless ``fixed_start_index``
(>= 0) gives both. Worked example (checked in ``tests/controller/test_assignment.py``):
brokers 1000-1004, 10 partitions, 3 replicas, ``start_index = 0`` and ``replica_shift = 3``::

    partition  0: [1000, 1004, 1001]    5: [1000, 1001, 1002]
    partition  1: [1001, 1000, 1002]    6: [1001, 1002, 1003]
    partition  3: [1003, 1002, 1004]    7: [1002, 1003, 1004]

Rack-aware: the broker list is first rearranged to alternate racks (`rack_alternated_brokers`:
racks in name order, brokers in id order, one broker of each rack in turn), leaders go round it
as above, and follower candidates are walked with `replica_index` (the shift scaled by the
number of racks); a candidate is skipped while its rack already has a replica of the partition
and some rack has none, or while it already holds one and some broker holds none.

New partitions of an existing topic (`assign_new_partitions`) continue the same pattern from
the broker that leads partition 0, numbered on from the current partition count.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Mapping, Sequence

from odradek.metadata.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
)

Assignment = dict[int, list[int]]


class RackAwareMode(enum.Enum):
    """What to do with rack information (Kafka's RackAwareMode)."""

    ENFORCED = "enforced"  # use racks; refuse if only some brokers have one
    SAFE = "safe"  # use racks if every broker has one, else ignore them
    DISABLED = "disabled"  # ignore racks


def replica_index(
    first_replica_index: int, second_replica_shift: int, replica: int, n_brokers: int
) -> int:
    """Index in the broker list of follower ``replica`` (0-based) of a partition whose leader
    is at ``first_replica_index``: one to ``n_brokers - 1`` places after the leader."""
    shift = 1 + (second_replica_shift + replica) % (n_brokers - 1)
    return (first_replica_index + shift) % n_brokers


def _check_counts(n_partitions: int, replication_factor: int, n_brokers: int) -> None:
    if n_partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > n_brokers:
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {n_brokers}."
        )


def _starts(
    n_brokers: int, fixed_start_index: int, replica_shift: int | None, rng: random.Random | None
) -> tuple[int, int]:
    rng = rng or random.Random()
    if fixed_start_index >= 0:
        start = fixed_start_index
        shift = fixed_start_index if replica_shift is None else replica_shift
    else:
        start = rng.randrange(n_brokers)
        shift = rng.randrange(n_brokers) if replica_shift is None else replica_shift
    return start, shift


def assign_replicas_rack_unaware(
    n_partitions: int,
    replication_factor: int,
    broker_list: Sequence[int],
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    *,
    replica_shift: int | None = None,
    rng: random.Random | None = None,
) -> Assignment:
    """Kafka's ``assignReplicasToBrokersRackUnaware``; see the module docstring.

    ``replica_shift`` pins the follower shift on its own (Kafka draws it at random, or takes
    ``fixed_start_index``); ``rng`` supplies the random draws. Partitions are numbered from
    ``max(0, start_partition_id)``.
    """
    brokers = list(broker_list)
    _check_counts(n_partitions, replication_factor, len(brokers))
    n = len(brokers)
    start, shift = _starts(n, fixed_start_index, replica_shift, rng)
    partition = max(0, start_partition_id)
    out: Assignment = {}
    for _ in range(n_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        replicas = [brokers[first]]
        replicas += [
            brokers[replica_index(first, shift, j, n)] for j in range(replication_factor - 1)
        ]
        out[partition] = replicas
        partition += 1
    return out


def rack_alternated_brokers(broker_racks: Mapping[int, str]) -> list[int]:
    """Brokers ordered to alternate racks: ``{0:"a",1:"a",2:"b",3:"b",4:"c"}`` -> 0, 2, 4, 1, 3."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in broker_racks.items():
        by_rack.setdefault(rack, []).append(broker)
    queues = [sorted(by_rack[rack]) for rack in sorted(by_rack)]
    out: list[int] = []
    depth = 0
    while len(out) < len(broker_racks):
        out += [queue[depth] for queue in queues if depth < len(queue)]
        depth += 1
    return out


def assign_replicas_rack_aware(
    n_partitions: int,
    replication_factor: int,
    broker_racks: Mapping[int, str],
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    *,
    replica_shift: int | None = None,
    rng: random.Random | None = None,
) -> Assignment:
    """Kafka's ``assignReplicasToBrokersRackAware``; see the module docstring."""
    _check_counts(n_partitions, replication_factor, len(broker_racks))
    arranged = rack_alternated_brokers(broker_racks)
    n, n_racks = len(arranged), len(set(broker_racks.values()))
    start, shift = _starts(n, fixed_start_index, replica_shift, rng)
    partition = max(0, start_partition_id)
    out: Assignment = {}
    for _ in range(n_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        leader = arranged[first]
        replicas, racks, used = [leader], {broker_racks[leader]}, {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[replica_index(first, shift * n_racks, k, n)]
                rack = broker_racks[broker]
                k += 1
                if (rack not in racks or len(racks) == n_racks) and (
                    broker not in used or len(used) == n
                ):
                    replicas.append(broker)
                    racks.add(rack)
                    used.add(broker)
                    break
        out[partition] = replicas
        partition += 1
    return out


def assign_replicas_to_brokers(
    broker_racks: Mapping[int, str | None],
    n_partitions: int,
    replication_factor: int,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    *,
    rack_aware_mode: RackAwareMode = RackAwareMode.ENFORCED,
    rng: random.Random | None = None,
) -> Assignment:
    """Kafka's ``assignReplicasToBrokers``: pick the algorithm from the brokers' racks.

    ``broker_racks`` maps each live broker id to its rack (None: no rack), e.g.
    ``{b.broker_id: b.rack for b in metadata.brokers()}``. Raises InvalidPartitionsError,
    InvalidReplicationFactorError, and, in ENFORCED mode when only some brokers have a rack,
    InvalidReplicaAssignmentError.
    """
    _check_counts(n_partitions, replication_factor, len(broker_racks))
    racks = {b: r for b, r in broker_racks.items() if r is not None}
    if rack_aware_mode is RackAwareMode.DISABLED or not racks:
        return assign_replicas_rack_unaware(
            n_partitions,
            replication_factor,
            sorted(broker_racks),
            fixed_start_index,
            start_partition_id,
            rng=rng,
        )
    if len(racks) != len(broker_racks):
        if rack_aware_mode is RackAwareMode.ENFORCED:
            raise InvalidReplicaAssignmentError(
                "Not all brokers have rack information for replica rack aware assignment."
            )
        return assign_replicas_rack_unaware(
            n_partitions,
            replication_factor,
            sorted(broker_racks),
            fixed_start_index,
            start_partition_id,
            rng=rng,
        )
    return assign_replicas_rack_aware(
        n_partitions, replication_factor, racks, fixed_start_index, start_partition_id, rng=rng
    )


def assign_new_partitions(
    broker_racks: Mapping[int, str | None],
    existing: Mapping[int, Sequence[int]],
    total_partitions: int,
    *,
    rack_aware_mode: RackAwareMode = RackAwareMode.ENFORCED,
    rng: random.Random | None = None,
) -> Assignment:
    """Assignments for partitions ``len(existing) .. total_partitions - 1`` of a topic, as
    Kafka's CreatePartitions does: same replication factor as partition 0, leaders continuing
    from the first broker whose id is at least partition 0's leader."""
    if not existing or 0 not in existing:
        raise InvalidPartitionsError("the topic has no partition 0 to continue from")
    to_add = total_partitions - len(existing)
    if to_add <= 0:
        raise InvalidPartitionsError(
            f"Topic currently has {len(existing)} partitions, "
            f"{total_partitions} would not be an increase."
        )
    brokers = sorted(broker_racks)
    leader0 = existing[0][0]
    start = next((i for i, b in enumerate(brokers) if b >= leader0), 0)
    return assign_replicas_to_brokers(
        broker_racks,
        to_add,
        len(existing[0]),
        start,
        len(existing),
        rack_aware_mode=rack_aware_mode,
        rng=rng,
    )
