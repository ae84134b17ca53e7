"""DescribeCluster (key 60): cluster id, controller and brokers, and the cluster's authorized
operations when asked (``include_cluster_authorized_operations``). The controller is answered
as Metadata answers it (``metadata.answered_controller_id``)."""

from __future__ import annotations

from odradek.protocol.generated.describe_cluster_response import DescribeClusterBroker, DescribeClusterResponse
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol import acl_binding as acl
from odradek.server.acl_operations import CLUSTER_OPERATIONS, authorized
from odradek.server import authorize
from odradek.server.handlers.metadata import answered_controller_id

BROKERS = 1


def handle(ctx, request):
    broker = ctx.broker
    image = broker.metadata_image()
    if request.endpoint_type != BROKERS:
        return DescribeClusterResponse(error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                                       endpoint_type=request.endpoint_type, cluster_id=broker.cluster_id)
    brokers = []
    alive = broker.metadata.alive_brokers.of(image.brokers)  # as Metadata answers them
    for info in sorted(alive.values(), key=lambda b: b.broker_id):
        endpoint = next((e for e in info.endpoints if e.listener == ctx.connection.listener_name), info.endpoints[0])
        brokers.append(DescribeClusterBroker(broker_id=info.broker_id, host=endpoint.host, port=endpoint.port, rack=info.rack))
    controller = answered_controller_id(broker)
    return DescribeClusterResponse(error_code=ErrorCode.NONE, cluster_id=broker.cluster_id,
                                   controller_id=controller, brokers=brokers,
                                   cluster_authorized_operations=authorized(
                                       request.include_cluster_authorized_operations,
                                       authorize.allowed_operations(ctx, acl.CLUSTER, acl.CLUSTER_NAME,
                                                                    CLUSTER_OPERATIONS)))
