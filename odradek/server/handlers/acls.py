"""CreateAcls (30), DescribeAcls (29) and DeleteAcls (31): the broker's ACLs, as Kafka's
``AclApis``.

Without an authorizer each answers SECURITY_DISABLED ("No Authorizer is configured"). Creating
and deleting need ALTER on the cluster, describing DESCRIBE on it (else
CLUSTER_AUTHORIZATION_FAILED). A binding Kafka would refuse (an UNKNOWN or ANY code, a MATCH
pattern, an operation its resource type lacks) answers INVALID_REQUEST for itself only; a
DescribeAcls or DeleteAcls filter with an UNKNOWN code answers INVALID_REQUEST. Store writes run
off the event loop.
"""

from __future__ import annotations

import asyncio

from odradek.protocol.generated.create_acls_response import AclCreationResult, CreateAclsResponse
from odradek.protocol.generated.delete_acls_response import (
    DeleteAclsFilterResult, DeleteAclsMatchingAcl, DeleteAclsResponse,
)
from odradek.protocol.generated.describe_acls_response import (
    AclDescription, DescribeAclsResource, DescribeAclsResponse,
)
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server import authorize
from odradek.protocol.acl_binding import (
    ALTER, DESCRIBE, AccessControlEntry, AclBinding, AclBindingFilter, ResourcePattern, invalid_binding,
)

NO_AUTHORIZER = "No Authorizer is configured."
NOT_ALLOWED = "Cluster authorization failed."


async def handle_create(ctx, request):
    def every(code, message):
        return CreateAclsResponse(results=[AclCreationResult(error_code=code, error_message=message)
                                           for _ in request.creations])
    authorizer = getattr(ctx.broker, "authorizer", None)
    refusal = _refusal(ctx, authorizer, ALTER)
    if refusal is not None:
        return every(*refusal)
    results, valid = [], []
    for c in request.creations:
        binding = AclBinding(ResourcePattern(c.resource_type, c.resource_name, c.resource_pattern_type),
                             AccessControlEntry(c.principal, c.host, c.operation, c.permission_type))
        why = invalid_binding(binding)
        results.append(AclCreationResult(error_code=ErrorCode.INVALID_REQUEST if why else ErrorCode.NONE,
                                         error_message=why))
        if why is None:
            valid.append(binding)
    if valid:
        try:
            await asyncio.to_thread(authorizer.create, valid)
        except Exception as e:  # the store failed: every valid creation failed with it
            for r in results:
                if r.error_code == ErrorCode.NONE:
                    r.error_code, r.error_message = ErrorCode.UNKNOWN_SERVER_ERROR, f"could not store the ACLs: {e}"
    return CreateAclsResponse(results=results)


def _refusal(ctx, authorizer, operation: int) -> tuple[ErrorCode, str] | None:
    """Why the whole request is refused (no authorizer; the operation not allowed on the
    cluster), as ``(error code, message)``; None when it is not."""
    if authorizer is None:
        return ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER
    if not authorize.allowed_cluster(ctx, operation):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, NOT_ALLOWED
    return None


def _filter(f, name_field: str) -> AclBindingFilter:
    return AclBindingFilter(f.resource_type_filter, getattr(f, name_field), f.pattern_type_filter,
                            f.principal_filter, f.host_filter, f.operation, f.permission_type)


def handle_describe(ctx, request):
    authorizer = getattr(ctx.broker, "authorizer", None)
    refusal = _refusal(ctx, authorizer, DESCRIBE)
    if refusal is not None:
        return DescribeAclsResponse(error_code=refusal[0], error_message=refusal[1])
    flt = _filter(request, "resource_name_filter")
    bad = flt.unknown_field()
    if bad is not None:
        return DescribeAclsResponse(error_code=ErrorCode.INVALID_REQUEST, error_message=f"Invalid {bad} in the filter")
    by_pattern: dict[ResourcePattern, list] = {}
    for b in authorizer.describe(flt):
        by_pattern.setdefault(b.pattern, []).append(b.entry)
    resources = [
        DescribeAclsResource(resource_type=p.resource_type, resource_name=p.name, pattern_type=p.pattern_type,
                             acls=[AclDescription(principal=e.principal, host=e.host, operation=e.operation,
                                                  permission_type=e.permission_type)
                                   for e in sorted(entries, key=lambda e: (e.principal, e.host, e.operation))])
        for p, entries in sorted(by_pattern.items(), key=lambda kv: (kv[0].resource_type, kv[0].name))
    ]
    return DescribeAclsResponse(error_code=ErrorCode.NONE, error_message=None, resources=resources)


async def handle_delete(ctx, request):
    def every(code, message):
        return DeleteAclsResponse(filter_results=[DeleteAclsFilterResult(error_code=code, error_message=message)
                                                  for _ in request.filters])
    authorizer = getattr(ctx.broker, "authorizer", None)
    refusal = _refusal(ctx, authorizer, ALTER)
    if refusal is not None:
        return every(*refusal)
    filters = [_filter(f, "resource_name_filter") for f in request.filters]
    results: list[DeleteAclsFilterResult | None] = []
    usable = []
    for f in filters:
        bad = f.unknown_field()
        results.append(DeleteAclsFilterResult(error_code=ErrorCode.INVALID_REQUEST,
                                              error_message=f"Invalid {bad} in the filter") if bad else None)
        if bad is None:
            usable.append(f)
    try:
        removed = await asyncio.to_thread(authorizer.delete, usable) if usable else []
    except Exception as e:
        return every(ErrorCode.UNKNOWN_SERVER_ERROR, f"could not delete the ACLs: {e}")
    found = iter(removed)
    for i, r in enumerate(results):
        if r is None:
            results[i] = DeleteAclsFilterResult(error_code=ErrorCode.NONE, error_message=None, matching_acls=[
                DeleteAclsMatchingAcl(error_code=ErrorCode.NONE, error_message=None, resource_type=b.pattern.resource_type,
                                      resource_name=b.pattern.name, pattern_type=b.pattern.pattern_type,
                                      principal=b.entry.principal, host=b.entry.host, operation=b.entry.operation,
                                      permission_type=b.entry.permission_type)
                for b in next(found)])
    return DeleteAclsResponse(filter_results=results)
