"""The group membership APIs: JoinGroup (11), SyncGroup (14), Heartbeat (12), LeaveGroup
(13), DescribeGroups (15), ListGroups (16), DeleteGroups (42).

Each handler translates between the wire version the client speaks and the group
coordinator's version-free requests and results (``coordinator.group``): JoinGroup v0 has no
rebalance timeout (the session timeout stands in, as in Kafka); only v4+ new members without
a ``group.instance.id`` are first answered MEMBER_ID_REQUIRED; static membership needs v5+;
protocol names are nullable only from v7; LeaveGroup v3+ removes several members at once and
answers per member, while v0-v2 fold the member's error into the top-level error code.

JoinGroup and SyncGroup wait (a rebalance, the leader's assignment): their handlers are
coroutines. A broker without a running coordinator answers COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

from odradek.coordinator.group.group_requests import (
    JoinRequest,
    LeavingMember,
    SyncRequest,
)
from odradek.coordinator.group.group_results import JoinResult
from odradek.coordinator.group.group_state import GroupState
from odradek.protocol.generated.delete_groups_response import (
    DeletableGroupResult,
    DeleteGroupsResponse,
)
from odradek.protocol.generated.describe_groups_response import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsResponse,
)
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.heartbeat_response import HeartbeatResponse
from odradek.protocol.generated.join_group_response import (
    JoinGroupResponse,
    JoinGroupResponseMember,
)
from odradek.protocol.generated.leave_group_response import (
    LeaveGroupResponse,
    MemberResponse,
)
from odradek.protocol.generated.list_groups_response import (
    ListedGroup,
    ListGroupsResponse,
)
from odradek.protocol.generated.sync_group_response import SyncGroupResponse
from odradek.server import authorize
from odradek.protocol.acl_binding import DELETE, DESCRIBE, GROUP, READ
from odradek.server.acl_operations import GROUP_OPERATIONS, authorized

CLASSIC = "classic"
CONSUMER = "consumer"  # KIP-848 groups (server/handlers/consumer_group_heartbeat.py)
SHARE = "share"  # KIP-932 groups (server/handlers/share_group_heartbeat.py)


def client_host(ctx) -> str:
    """Kafka's form of the client's address: ``/127.0.0.1``."""
    return "/" + ctx.connection.peer.rsplit(":", 1)[0]


# --- JoinGroup ---------------------------------------------------------------------------------
async def handle_join_group(ctx, request):
    coordinator = ctx.broker.group_coordinator
    v = ctx.api_version
    instance_id = request.group_instance_id if v >= 5 else None
    if not authorize.allowed(ctx, READ, GROUP, request.group_id):
        return _join_response(v, JoinResult.failed(request.member_id, ErrorCode.GROUP_AUTHORIZATION_FAILED))
    if coordinator is None:
        return _join_response(v, JoinResult.failed(request.member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE))
    req = JoinRequest(
        group_id=request.group_id, member_id=request.member_id, group_instance_id=instance_id,
        client_id=ctx.client_id or "", client_host=client_host(ctx),
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=request.rebalance_timeout_ms if v >= 1 else request.session_timeout_ms,
        protocol_type=request.protocol_type,
        protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
        require_known_member_id=v >= 4 and instance_id is None,
        supports_skip_assignment=v >= 9,
        reason=request.reason if v >= 8 else None,
    )
    return _join_response(v, await coordinator.join_group(req))


def _join_response(version: int, r) -> JoinGroupResponse:
    name = r.protocol_name if version >= 7 or r.protocol_name is not None else ""
    return JoinGroupResponse(
        throttle_time_ms=0, error_code=r.error, generation_id=r.generation_id,
        protocol_type=r.protocol_type, protocol_name=name, leader=r.leader_id,
        skip_assignment=r.skip_assignment, member_id=r.member_id,
        members=[JoinGroupResponseMember(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                         metadata=m.metadata) for m in r.members],
    )


# --- SyncGroup ---------------------------------------------------------------------------------
async def handle_sync_group(ctx, request):
    coordinator = ctx.broker.group_coordinator
    if coordinator is None:
        return SyncGroupResponse(throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if not authorize.allowed(ctx, READ, GROUP, request.group_id):
        return SyncGroupResponse(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    v = ctx.api_version
    req = SyncRequest(
        group_id=request.group_id, member_id=request.member_id,
        group_instance_id=request.group_instance_id if v >= 3 else None,
        generation_id=request.generation_id,
        protocol_type=request.protocol_type if v >= 5 else None,
        protocol_name=request.protocol_name if v >= 5 else None,
        assignments=tuple((a.member_id, bytes(a.assignment)) for a in request.assignments),
    )
    r = await coordinator.sync_group(req)
    return SyncGroupResponse(throttle_time_ms=0, error_code=r.error, protocol_type=r.protocol_type,
                             protocol_name=r.protocol_name, assignment=r.assignment)


# --- Heartbeat and LeaveGroup --------------------------------------------------------------------
def handle_heartbeat(ctx, request):
    coordinator = ctx.broker.group_coordinator
    if coordinator is None:
        return HeartbeatResponse(throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if not authorize.allowed(ctx, READ, GROUP, request.group_id):
        return HeartbeatResponse(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    instance_id = request.group_instance_id if ctx.api_version >= 3 else None
    error = coordinator.heartbeat(request.group_id, request.member_id, instance_id, request.generation_id)
    return HeartbeatResponse(throttle_time_ms=0, error_code=error)


def handle_leave_group(ctx, request):
    coordinator = ctx.broker.group_coordinator
    if ctx.api_version >= 3:
        leaving = [LeavingMember(m.member_id, m.group_instance_id, m.reason) for m in request.members]
    else:
        leaving = [LeavingMember(request.member_id)]
    if not authorize.allowed(ctx, READ, GROUP, request.group_id):
        error, per_member = ErrorCode.GROUP_AUTHORIZATION_FAILED, []
    elif coordinator is None:
        error, per_member = ErrorCode.COORDINATOR_NOT_AVAILABLE, []
    else:
        error, per_member = coordinator.leave_group(request.group_id, leaving)
    if ctx.api_version < 3:
        member_error = next((e for e in per_member if e != ErrorCode.NONE), ErrorCode.NONE)
        return LeaveGroupResponse(throttle_time_ms=0, error_code=error if error != ErrorCode.NONE else member_error)
    members = [MemberResponse(member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=e)
               for m, e in zip(leaving, per_member)]
    return LeaveGroupResponse(throttle_time_ms=0, error_code=error, members=members)


# --- DescribeGroups, ListGroups, DeleteGroups -------------------------------------------------------
def handle_describe_groups(ctx, request):
    coordinator = ctx.broker.group_coordinator
    asked = ctx.api_version >= 3 and request.include_authorized_operations
    groups = []
    for group_id in request.groups:
        operations = authorized(asked, authorize.allowed_operations(ctx, GROUP, group_id, GROUP_OPERATIONS))
        if not authorize.allowed(ctx, DESCRIBE, GROUP, group_id):
            groups.append(DescribedGroup(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=group_id))
            continue
        if coordinator is None:
            groups.append(DescribedGroup(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, group_id=group_id,
                                         authorized_operations=operations))
            continue
        d = coordinator.describe_group(group_id)
        if d.error == ErrorCode.GROUP_ID_NOT_FOUND:
            # Kafka 4: a consumer group is not described here ("Group X is not a classic
            # group." in v6's error message, a version this codec does not have yet).
            groups.append(DescribedGroup(error_code=d.error, group_id=group_id, group_state="",
                                         authorized_operations=operations))
            continue
        members = [DescribedGroupMember(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                        client_id=m.client_id, client_host=m.client_host,
                                        member_metadata=m.metadata, member_assignment=m.assignment)
                   for m in d.members]
        groups.append(DescribedGroup(error_code=d.error, group_id=group_id, group_state=d.state,
                                     protocol_type=d.protocol_type, protocol_data=d.protocol_data,
                                     members=members, authorized_operations=operations))
    return DescribeGroupsResponse(throttle_time_ms=0, groups=groups)


def handle_list_groups(ctx, request):
    """Classic groups report type "classic", KIP-848 ones "consumer", KIP-932 ones "share" (v5's
    ``group_type``; a share group's protocol type is "share");
    the states filter takes either kind's state names (Assigning, Reconciling, ...)."""
    coordinator = ctx.broker.group_coordinator
    if coordinator is None:
        return ListGroupsResponse(throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    states_filter = request.states_filter if ctx.api_version >= 4 else []
    types_filter = {t.lower() for t in (request.types_filter if ctx.api_version >= 5 else [])}
    names = {s.lower() for s in states_filter}
    states = {s for s in (GroupState.parse(name) for name in states_filter) if s is not None}
    listed = []
    error = ErrorCode.NONE
    if not types_filter or CLASSIC in types_filter:
        if not names or states:
            error, classic = coordinator.list_groups(states, set())
            listed += [(g.group_id, g.protocol_type, g.state, CLASSIC) for g in classic]
    if not types_filter or CONSUMER in types_filter:
        listed += [(group_id, "consumer", state, CONSUMER)
                   for group_id, state in coordinator.list_consumer_groups(names or None)]
    if not types_filter or SHARE in types_filter:
        listed += [(group_id, SHARE, state, SHARE) for group_id, state in coordinator.list_share_groups(names or None)]
    # Kafka: else only the describable groups; these denials filter, refusing nothing (not logged at INFO)
    if not authorize.allowed_cluster(ctx, DESCRIBE, log_if_denied=False):
        listed = [g for g in listed if authorize.allowed(ctx, DESCRIBE, GROUP, g[0], log_if_denied=False)]
    groups = [ListedGroup(group_id=g, protocol_type=p, group_state=state, group_type=kind)
              for g, p, state, kind in sorted(listed)]
    return ListGroupsResponse(throttle_time_ms=0, error_code=error, groups=groups)


async def handle_delete_groups(ctx, request):
    coordinator = ctx.broker.group_coordinator
    denied = {g: ErrorCode.GROUP_AUTHORIZATION_FAILED for g in request.groups_names
              if not authorize.allowed(ctx, DELETE, GROUP, g)}
    allowed = [g for g in dict.fromkeys(request.groups_names) if g not in denied]
    if coordinator is None:
        errors = {g: ErrorCode.COORDINATOR_NOT_AVAILABLE for g in allowed}
    else:
        errors = await coordinator.delete_groups(allowed) if allowed else {}
    errors.update(denied)
    results = [DeletableGroupResult(group_id=g, error_code=errors[g]) for g in dict.fromkeys(request.groups_names)]
    return DeleteGroupsResponse(throttle_time_ms=0, results=results)
