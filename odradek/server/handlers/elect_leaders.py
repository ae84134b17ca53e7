"""ElectLeaders (key 43): move partition leadership, PREFERRED (back to each partition's first
replica) or UNCLEAN (any live replica of a partition without a leader, in sync or not); v0 is
always PREFERRED, ``topic_partitions`` null means every partition.

At the controller (Kafka's ``KafkaApis.handleElectLeaders`` -> ``ReplicaManager.electLeaders``
-> ``KafkaController.electLeaders``) the request becomes an `events.ElectLeaders` for the
controller's event thread (`replica_election` decides per partition); the answer then waits
until this broker's metadata shows the new leaders (`delayed_elect_leader`, up to
``timeout_ms``). Any other broker forwards the request to the controller through its
`BrokerToControllerChannel` (as KRaft-mode brokers forward ElectLeaders), so clients may send
it anywhere; a request that a broker forwarded is not forwarded again: a broker that is no
longer the controller answers it NOT_CONTROLLER and the forwarding channel asks the new one.

As Kafka, a request for every partition lists only the partitions that were elected or
failed (not ELECTION_NOT_NEEDED), and per-partition errors carry Kafka's messages.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from odradek.protocol import acl_binding as acl
from odradek.client.errors import KafkaError
from odradek.controller import events as ev
from odradek.controller.commands import ElectionOutcome
from odradek.controller.replica_election import ElectionType
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.elect_leaders_response import (
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
)
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server.broker_to_controller import sent_by_a_broker
from odradek.server.delayed_elect_leader import await_elected_leaders
from odradek.server import authorize

_TOP_LEVEL_ERROR_FROM = 1  # v1+ has a top-level error code


async def handle(ctx, request):
    broker = ctx.broker
    election_type = request.election_type if ctx.api_version >= 1 else ElectionType.PREFERRED
    partitions = None
    if request.topic_partitions is not None:
        partitions = tuple((t.topic, p) for t in request.topic_partitions for p in t.partitions)
    if not authorize.allowed_cluster(ctx, acl.ALTER):  # Kafka: ALTER on the cluster
        return _failed(ctx, partitions, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Authorization failed.")
    if election_type not in tuple(ElectionType):
        return _failed(ctx, partitions, ErrorCode.INVALID_REQUEST,
                       f"Unknown election type {election_type}")
    service = getattr(broker, "controller_service", None)
    if service is not None and service.active:
        event = ev.ElectLeaders(partitions, int(election_type))
        reply = await asyncio.wrap_future(service.submit(event))
        if reply.error == ErrorCode.NONE:
            outcomes = await await_elected_leaders(broker, list(reply.partitions),
                                                   request.timeout_ms)
            return _response(ctx, outcomes, ErrorCode.NONE, everything=partitions is None)
    channel = getattr(broker, "broker_to_controller", None)
    if channel is None or sent_by_a_broker(ctx.client_id):
        return _failed(ctx, partitions, ErrorCode.NOT_CONTROLLER, None)
    try:
        return await channel.send(ApiKey.ELECT_LEADERS, request)
    except KafkaError as e:  # no controller answered in time
        return _failed(ctx, partitions, ErrorCode.REQUEST_TIMED_OUT, str(e))


def _failed(ctx, partitions, error: ErrorCode, message: str | None) -> ElectLeadersResponse:
    """The same ``error`` for the whole request and each partition it names."""
    outcomes = [ElectionOutcome(t, p, error, message) for t, p in dict.fromkeys(partitions or ())]
    return _response(ctx, outcomes, error, everything=False)


def _response(ctx, outcomes: Iterable[ElectionOutcome], error: ErrorCode, *,
              everything: bool) -> ElectLeadersResponse:
    """Results grouped by topic, in the order the partitions came; for a request of every
    partition, those that needed no election are left out (Kafka's handler does so)."""
    by_topic: dict[str, list[PartitionResult]] = {}
    for o in outcomes:
        if everything and o.error == ErrorCode.ELECTION_NOT_NEEDED:
            continue
        by_topic.setdefault(o.topic, []).append(
            PartitionResult(partition_id=o.partition, error_code=int(o.error),
                            error_message=o.message))
    top = int(error) if ctx.api_version >= _TOP_LEVEL_ERROR_FROM else 0
    return ElectLeadersResponse(
        throttle_time_ms=0, error_code=top,
        replica_election_results=[ReplicaElectionResult(t, ps) for t, ps in by_topic.items()],
    )
