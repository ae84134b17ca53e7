"""The share coordinator's state RPCs (KIP-932), from other brokers' Persisters:
InitializeShareGroupState (83), ReadShareGroupState (84), WriteShareGroupState (85),
DeleteShareGroupState (86), ReadShareGroupStateSummary (87).

Each request carries one share-partition (Kafka's PersisterStateManager sends them so; any
further ones are answered INVALID_REQUEST). Authorized with CLUSTER_ACTION on the cluster, as
Kafka's KafkaApis does: every partition of a refused request answers
CLUSTER_AUTHORIZATION_FAILED. The work is the local ``ShareCoordinator``'s
(``coordinator/share/share_coordinator.py``): NOT_COORDINATOR when this broker does not lead
the key's ``__share_group_state`` partition, COORDINATOR_LOAD_IN_PROGRESS while it loads.
"""

from __future__ import annotations

from odradek.coordinator.share import state_rpc
from odradek.coordinator.share.persister import ShareGroupState
from odradek.protocol import acl_binding as acl
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server import authorize
from odradek.protocol.primitives import ZERO_UUID

E = ErrorCode


def _one(request):
    """``(topic_id, partition data)`` of the request's only share-partition, or None."""
    topics = request.topics
    if len(topics) != 1 or len(topics[0].partitions) != 1:
        return None
    return topics[0].topic_id, topics[0].partitions[0]


def _refusal(ctx, request) -> ErrorCode | None:
    if not authorize.allowed_cluster(ctx, acl.CLUSTER_ACTION):
        return E.CLUSTER_AUTHORIZATION_FAILED
    if ctx.broker.share_coordinator is None:
        return E.COORDINATOR_NOT_AVAILABLE
    if _one(request) is None or not request.group_id:
        return E.INVALID_REQUEST
    return None


def _all(request, make, error):
    """A response answering ``error`` for every share-partition of ``request``."""
    responses = [make(t.topic_id, p.partition, error) for t in request.topics for p in t.partitions]
    if not responses:
        return make(ZERO_UUID, 0, error)
    first = responses[0]
    for other in responses[1:]:
        first.results.extend(other.results)
    return first


async def handle_initialize(ctx, request):
    if (error := _refusal(ctx, request)) is not None:
        return _all(request, state_rpc.initialize_response, error)
    topic_id, p = _one(request)
    error = await ctx.broker.share_coordinator.initialize_state(request.group_id, topic_id, p.partition,
                                                                p.state_epoch, p.start_offset)
    return state_rpc.initialize_response(topic_id, p.partition, error)


async def handle_write(ctx, request):
    from odradek.coordinator.share.persister import PersisterStateBatch

    if (error := _refusal(ctx, request)) is not None:
        return _all(request, state_rpc.write_response, error)
    topic_id, p = _one(request)
    batches = [PersisterStateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
               for b in p.state_batches]
    # v0 carries no DeliveryCompleteCount: it decodes as -1 (unknown), as Kafka stores it
    error = await ctx.broker.share_coordinator.write_state(request.group_id, topic_id, p.partition, p.state_epoch,
                                                           p.leader_epoch, p.start_offset, batches,
                                                           delivery_complete_count=p.delivery_complete_count)
    return state_rpc.write_response(topic_id, p.partition, error)


async def handle_delete(ctx, request):
    if (error := _refusal(ctx, request)) is not None:
        return _all(request, state_rpc.delete_response, error)
    topic_id, p = _one(request)
    error = await ctx.broker.share_coordinator.delete_state(request.group_id, topic_id, p.partition)
    return state_rpc.delete_response(topic_id, p.partition, error)


async def handle_read(ctx, request):
    if (error := _refusal(ctx, request)) is not None:
        return _all(request, lambda t, p, e: state_rpc.read_response(t, p, ShareGroupState(e, 0, -1, ())), error)
    topic_id, p = _one(request)
    state = await ctx.broker.share_coordinator.read_state(request.group_id, topic_id, p.partition, p.leader_epoch)
    return state_rpc.read_response(topic_id, p.partition, state)


async def handle_read_summary(ctx, request):
    if (error := _refusal(ctx, request)) is not None:
        return _all(request, lambda t, p, e: state_rpc.summary_response(t, p, e, 0, -1), error)
    topic_id, p = _one(request)
    summary = await ctx.broker.share_coordinator.read_summary(request.group_id, topic_id, p.partition,
                                                              p.leader_epoch)
    return state_rpc.summary_response(topic_id, p.partition, summary.error, summary.state_epoch,
                                      summary.start_offset, summary.leader_epoch, summary.delivery_complete_count)
