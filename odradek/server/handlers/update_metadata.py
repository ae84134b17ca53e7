"""UpdateMetadata (key 6): the controller's view of brokers and partition states.

Its partition states go into this broker's metadata image where newer than what it holds
(``metadata/controller_states.py``): a cluster broker watches no partition state znode. The
request is checked (STALE_BROKER_EPOCH, STALE_CONTROLLER_EPOCH, as for
LeaderAndIsr), its controller epoch remembered, and the topics it shows being deleted
(leader -2, Kafka's ``LeaderDuringDelete``) handed to the group coordinator
(``replication/state_change.update_metadata``), and each partition's offline replicas (v4+;
replicas in failed log directories among them) kept for Metadata's answers
(``metadata/offline_replicas.py``), and its live brokers kept for the brokers answered to
clients (``metadata/alive_brokers.py``). Every version: v0-4 list partition states flat
(``ungrouped_partition_states``), v5+ per topic (``topic_states``).
"""

from __future__ import annotations

from odradek.metadata.controller_states import ControllerState
from odradek.metadata.layout import PartitionState
from odradek.metadata.offline_replicas import ReportedPartition
from odradek.protocol.generated.update_metadata_response import UpdateMetadataResponse
from odradek.replication.role_change import ControlHeader
from odradek.replication.state_change import update_metadata
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol import acl_binding as acl
from odradek.server import authorize

LEADER_DURING_DELETE = -2


async def handle(ctx, request):
    if not authorize.allowed_cluster(ctx, acl.CLUSTER_ACTION):  # from the controller only (Kafka: CLUSTER_ACTION)
        return UpdateMetadataResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    header = ControlHeader(request.controller_id, request.controller_epoch, request.broker_epoch)
    alive = [b.id for b in request.live_brokers]
    flat = flat_states(request)
    error = await update_metadata(ctx.broker, header, deleted_topics(flat), reported_partitions(flat), alive,
                                  controller_states(flat))
    return UpdateMetadataResponse(error_code=error)


def flat_states(request) -> list[tuple[str, object, object]]:
    """``(topic name, topic id or None, partition state)`` for every partition of the
    request, whatever its version's layout."""
    flat = [(s.topic_name, None, s) for s in request.ungrouped_partition_states]
    flat += [(t.topic_name, t.topic_id, s) for t in request.topic_states for s in t.partition_states]
    return flat


def controller_states(flat) -> list[ControllerState]:
    """The partition states (`flat_states`) for the metadata image: all but those of topics
    being deleted (leader -2), whose states stay as they were until the topic is gone."""
    return [ControllerState(name, topic_id, s.partition_index,
                            PartitionState(s.leader, s.leader_epoch, tuple(s.isr), s.controller_epoch, s.zk_version))
            for name, topic_id, s in flat if s.leader != LEADER_DURING_DELETE]


def reported_partitions(flat) -> list[ReportedPartition]:
    """Every partition state (`flat_states`), with its leader and offline replicas."""
    return [ReportedPartition(name, s.partition_index, s.leader, tuple(s.offline_replicas))
            for name, _, s in flat]


def deleted_topics(flat) -> set[str]:
    """The topics with a partition (`flat_states`) whose leader is ``LEADER_DURING_DELETE``."""
    return {name for name, _, s in flat if s.leader == LEADER_DURING_DELETE}
