"""What handlers ask before they act: may this request's principal do an operation on a resource?

Every answer is yes while the broker has no authorizer (``authorizer.class.name`` unset), as in
Kafka. Otherwise the connection's principal and client host (``server/connection.py``) are
checked by the broker's ``AclAuthorizer``. The error each resource type answers with is Kafka's
``AclEntry.authorizationError``.

Each check is written to the authorizer's audit log under the request's API
(``server/authorizer_log.py``). ``log_if_allowed`` / ``log_if_denied`` are Kafka's ``Action``
flags (``AuthHelper.authorize``): a handler passes ``log_if_denied=False`` where a denial refuses
nothing by itself, as Kafka's ``KafkaApis`` does: a listing filtered to what the principal may
describe, or a broad check (CREATE on the cluster) before the narrow one (CREATE on the topic).
"""

from __future__ import annotations

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.acl_binding import (
    CLUSTER, CLUSTER_NAME, GROUP, TOPIC, TRANSACTIONAL_ID, WRITE,
)
from odradek.server.principal import ANONYMOUS

ERROR_OF = {
    TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}


def _who(ctx):
    connection = ctx.connection
    return getattr(connection, "principal", ANONYMOUS), getattr(connection, "client_host", "?")


def enabled(ctx) -> bool:
    return getattr(ctx.broker, "authorizer", None) is not None


def allowed(ctx, operation: int, resource_type: int, name: str, *, log_if_allowed: bool = True,
            log_if_denied: bool = True) -> bool:
    return connection_allowed(ctx.broker, ctx.connection, operation, resource_type, name, api_key=ctx.api_key,
                              log_if_allowed=log_if_allowed, log_if_denied=log_if_denied)


def connection_allowed(broker, connection, operation: int, resource_type: int, name: str, *,
                       api_key: int | None = None, log_if_allowed: bool = True, log_if_denied: bool = True) -> bool:
    """``allowed`` for a request known by its connection and API key (the produce fast path
    builds no request context)."""
    authorizer = getattr(broker, "authorizer", None)
    if authorizer is None or getattr(connection, "in_process", False):
        return True  # no authorizer, or the broker's own request (its controller's, in-process)
    principal = getattr(connection, "principal", ANONYMOUS)
    host = getattr(connection, "client_host", "?")
    # A resource a request names only by id, unknown here, has no name: no ACL names it.
    return authorizer.authorize(principal, host, operation, resource_type, name or "", api_key=api_key,
                                log_if_allowed=log_if_allowed, log_if_denied=log_if_denied)


def allowed_cluster(ctx, operation: int, *, log_if_denied: bool = True) -> bool:
    return allowed(ctx, operation, CLUSTER, CLUSTER_NAME, log_if_denied=log_if_denied)


def allowed_any(ctx, operation: int, resource_type: int) -> bool:
    """Allowed on some resource of the type (``authorizeByResourceType``, KIP-679)."""
    authorizer = getattr(ctx.broker, "authorizer", None)
    if authorizer is None or getattr(ctx.connection, "in_process", False):
        return True
    principal, host = _who(ctx)
    return authorizer.authorize_by_resource_type(principal, host, operation, resource_type, api_key=ctx.api_key)


def idempotent_write_allowed(ctx) -> bool:
    """IDEMPOTENT_WRITE on the cluster, or WRITE on any topic (KIP-679). The first denial
    refuses nothing while the second may still allow (Kafka's ``handleInitProducerIdRequest``)."""
    from odradek.protocol.acl_binding import IDEMPOTENT_WRITE
    return allowed_cluster(ctx, IDEMPOTENT_WRITE, log_if_denied=False) or allowed_any(ctx, WRITE, TOPIC)


def allowed_operations(ctx, resource_type: int, name: str, operations: int) -> int:
    """The bits of ``operations`` (a bitfield of AclOperation codes, ``server/acl_operations.py``)
    that the principal is allowed on the resource."""
    authorizer = getattr(ctx.broker, "authorizer", None)
    if authorizer is None:
        return operations
    out = 0
    for op in range(32):
        # Only asked, nothing granted or refused: logged at TRACE and DEBUG (Kafka's
        # AuthHelper.authorizedOperations).
        if operations & (1 << op) and allowed(ctx, op, resource_type, name, log_if_allowed=False,
                                              log_if_denied=False):
            out |= 1 << op
    return out
