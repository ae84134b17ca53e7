"""Fetch from the closest replica (KIP-392): which replica a consumer's Fetch reads, on the
broker side (Kafka's ``ReplicaManager.findPreferredReadReplica``, ``FetchParams.fetchOnlyLeader``
and ``Partition.localLogWithEpochOrThrow``).

The handler (``server/handlers/fetch.py``) asks two things per partition of a consumer Fetch:

- ``readable_partition``: the local replica the fetch may read. A follower fetch
  (``replica_id >= 0``) and a consumer Fetch before v11 (no ``rack_id``, no ``client_metadata``)
  read only the leader (NOT_LEADER_OR_FOLLOWER elsewhere); a consumer Fetch v11+ may read any
  local replica, leader or follower. A follower serves records only up to ITS high watermark
  (the leader's, as the follower last learnt it from a fetch answer; never past its own log
  end), from ITS log start offset; a fetch offset beyond its log end is OFFSET_OUT_OF_RANGE, one
  between its high watermark and its log end an empty answer; the leader epoch is checked
  against the follower's (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH). ListOffsets stays at the
  leader (``handlers/list_offsets.py`` is not changed).
- ``preferred_read_replica``: on the leader only, with ``replica.selector.class`` set, the
  replica the selector (``server/replica_selector.py``) prefers for this consumer, or -1 for
  the leader itself. The candidates are the leader and every other replica that is in the ISR
  (a follower out of the ISR may lag without bound: a consumer sent there would fall behind
  forever), whose log (as its last fetch told the leader) holds the fetch offset
  (log start offset <= fetch offset <= log end offset), and whose broker is alive (registered,
  in the metadata image). A fetch answered with a preferred replica carries no records, only
  the leader's high watermark, last stable offset and log start offset, and is answered at once
  (no long poll), as Kafka's ``readFromLog`` skips the read.

The consumer follows the answer until an error from that replica or its
``metadata.max.age.ms`` passes, then asks the leader again (librdkafka: until a fetch error,
the replica's connection failing, or a 5 minute lease; odradek's own client:
``client/preferred_read_replica.py``). So a preferred replica that leaves the ISR stops being
named at once, and its consumers come back to the leader at their next error or expiry.
"""

from __future__ import annotations

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server.replica_selector import ClientMetadata, PartitionView, ReplicaView

NO_PREFERRED_REPLICA = -1
# Fetch v11 (KIP-392) adds rack_id: from it on a consumer may read from a follower.
FETCH_FROM_FOLLOWER_VERSION = 11


def client_metadata(request) -> ClientMetadata | None:
    """The consumer's metadata (Kafka's ``DefaultClientMetadata``: its ``rack_id``, ``""`` when it
    gave none) for a Fetch v11+; None for older versions, whose ``rack_id`` the handler sets to
    None (they read only from the leader)."""
    if request.rack_id is None:
        return None
    return ClientMetadata(rack_id=request.rack_id)


def readable_partition(broker, topic: str, index: int, consumer: bool, client: ClientMetadata | None):
    """``(partition, error)``: the local replica this fetch may read (see the module
    docstring); otherwise None and ``Broker.leader_partition``'s error."""
    part, error = broker.leader_partition(topic, index)
    if part is not None or error != ErrorCode.NOT_LEADER_OR_FOLLOWER or not consumer or client is None:
        return part, error
    follower = broker.replica_manager.get(topic, index)
    if follower is None:
        return None, error
    return follower, ErrorCode.NONE


def preferred_read_replica(broker, part, client: ClientMetadata | None, fetch_offset: int) -> int:
    """The broker id the consumer should read ``part`` from, or -1 (read here). Only a leader
    with a selector names another replica (see the module docstring)."""
    selector = getattr(broker, "replica_selector", None)
    if selector is None or client is None or not part.is_leader(broker.broker_id):
        return NO_PREFERRED_REPLICA
    image = broker.metadata_image()
    view = partition_view(part, broker.broker_id, image.brokers, fetch_offset, broker.clock.milliseconds())
    selected = selector.select(client, view)
    return NO_PREFERRED_REPLICA if selected is view.leader else selected.broker_id


def partition_view(part, leader_id: int, brokers, fetch_offset: int, now_ms: int) -> PartitionView:
    """The selector's candidates for ``part`` (led here by ``leader_id``): the leader, and the
    followers in the ISR whose last fetch showed a log holding ``fetch_offset`` and whose broker
    is among the live ``brokers`` (broker id -> ``BrokerInfo``)."""
    leader_info = brokers.get(leader_id)
    leader = ReplicaView(leader_id, leader_info.rack if leader_info else None, part.log_end_offset, 0)
    replicas = [leader]
    isr = set(part.isr)
    for broker_id, state in part.followers.items():
        info = brokers.get(broker_id)
        if info is None or broker_id not in isr:
            continue
        if not state.log_start_offset <= fetch_offset <= state.log_end_offset:
            continue
        replicas.append(ReplicaView(broker_id, info.rack, state.log_end_offset,
                                    now_ms - state.last_caught_up_time_ms))
    return PartitionView(tuple(replicas), leader)
