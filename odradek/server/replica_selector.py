"""Replica selection for consumers (KIP-392, fetch from the closest replica): Kafka's
``org.apache.kafka.common.replica`` package (``ReplicaSelector``, ``RackAwareReplicaSelector``,
``ReplicaView``, ``PartitionView``, ``ClientMetadata``).

``replica.selector.class`` names the selector a partition's leader asks, for each consumer
Fetch (v11+, which carries the consumer's ``rack_id``, its ``client.rack``), which replica that
consumer should read from:

- unset (Kafka's default): no selector; consumers always read from the leader;
- ``org.apache.kafka.common.replica.RackAwareReplicaSelector``: a consumer with a rack id reads
  from the leader if the leader is in its rack; otherwise from the most caught-up replica in its
  rack (highest log end offset; on a tie the one caught up most recently; then the highest
  broker id); without a rack id, or with no replica in its rack, from the leader.

The selector is a pure function of views: which replicas are candidates at all (in the ISR,
holding the fetch offset, alive) is decided by the caller,
``server/fetch_from_follower.preferred_read_replica`` (Kafka's
``ReplicaManager.findPreferredReadReplica``).

Any other class name is refused when the broker starts (``make_replica_selector`` raises
``ConfigError``), as Kafka fails on a class it cannot load.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.server.config import ConfigError

RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


@dataclass(frozen=True, slots=True)
class ClientMetadata:
    """What the broker knows of the consumer asking (Kafka's ``DefaultClientMetadata``):
    ``rack_id`` is the Fetch request's (``""``: none given)."""

    rack_id: str
    client_id: str = ""
    client_address: str = ""
    principal: str = ""
    listener_name: str = ""


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """One replica as the selector sees it (Kafka's ``DefaultReplicaView``): its broker id and
    rack (None: the broker set no ``broker.rack``), its log end offset, and how long ago it
    was last caught up with the leader (0 for the leader itself)."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_last_caught_up_ms: int

    def rank(self) -> tuple[int, int, int]:
        """The order of ``ReplicaView.comparator``: larger is better (more data, then caught up
        more recently, then the higher broker id)."""
        return (self.log_end_offset, -self.time_since_last_caught_up_ms, self.broker_id)


@dataclass(frozen=True, slots=True)
class PartitionView:
    """The candidates of one partition (Kafka's ``DefaultPartitionView``): ``replicas`` holds
    ``leader`` too."""

    replicas: tuple[ReplicaView, ...]
    leader: ReplicaView


class RackAwareReplicaSelector:
    """Kafka's ``RackAwareReplicaSelector`` (see the module docstring)."""

    name = RACK_AWARE

    def select(self, client: ClientMetadata, partition: PartitionView) -> ReplicaView:
        rack = client.rack_id
        if not rack:
            return partition.leader
        same_rack = [r for r in partition.replicas if r.rack == rack]
        if not same_rack or partition.leader in same_rack:
            return partition.leader
        return max(same_rack, key=ReplicaView.rank)


_SELECTORS = {RACK_AWARE: RackAwareReplicaSelector}


def make_replica_selector(config) -> RackAwareReplicaSelector | None:
    """The selector ``replica.selector.class`` names; None when it is unset (leader only).
    Raises ConfigError for a class odradek does not provide."""
    name = (config["replica.selector.class"] or "").strip()
    if not name:
        return None
    selector = _SELECTORS.get(name)
    if selector is None:
        raise ConfigError(f"replica.selector.class: odradek provides {', '.join(sorted(_SELECTORS))}, not {name}")
    return selector()
