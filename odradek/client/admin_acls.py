"""The admin client's ACLs, as Kafka's ``Admin.createAcls``, ``describeAcls`` and ``deleteAcls``.

    from odradek.protocol.acl_binding import (AclBinding, AclBindingFilter, AccessControlEntry,
                                              ResourcePattern, TOPIC, READ, ALLOW, LITERAL)
    alice_reads = AclBinding(ResourcePattern(TOPIC, "orders", LITERAL),
                             AccessControlEntry("User:alice", "*", READ, ALLOW))
    await admin.create_acls([alice_reads])             # {alice_reads: None}
    await admin.describe_acls(AclBindingFilter(TOPIC))   # [alice_reads, ...]
    await admin.delete_acls([AclBindingFilter(TOPIC, "orders", LITERAL)])  # {filter: [alice_reads]}

``create_acls`` answers per binding: None, or the broker's error (INVALID_REQUEST for a binding
Kafka refuses). ``describe_acls`` and ``delete_acls`` raise BrokerError when the broker refuses
(SECURITY_DISABLED without an authorizer, CLUSTER_AUTHORIZATION_FAILED without ALTER or
DESCRIBE on the cluster).
"""

from __future__ import annotations

from odradek.client.errors import BrokerError
from odradek.protocol.acl_binding import AccessControlEntry, AclBinding, AclBindingFilter, ResourcePattern
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.create_acls_request import AclCreation, CreateAclsRequest
from odradek.protocol.generated.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from odradek.protocol.generated.describe_acls_request import DescribeAclsRequest


def _filter_fields(f: AclBindingFilter) -> dict:
    return dict(resource_type_filter=f.resource_type, resource_name_filter=f.name, pattern_type_filter=f.pattern_type,
                principal_filter=f.principal, host_filter=f.host, operation=f.operation,
                permission_type=f.permission_type)


class AclAdmin:
    """Mixed into AsyncAdminClient (uses its ``_cluster``)."""

    async def create_acls(self, bindings) -> dict[AclBinding, BrokerError | None]:
        bindings = list(bindings)
        request = CreateAclsRequest(creations=[AclCreation(
            resource_type=b.pattern.resource_type, resource_name=b.pattern.name,
            resource_pattern_type=b.pattern.pattern_type, principal=b.entry.principal, host=b.entry.host,
            operation=b.entry.operation, permission_type=b.entry.permission_type) for b in bindings])
        response = await self._cluster.send(None, ApiKey.CREATE_ACLS, request)
        return {b: BrokerError(r.error_code, r.error_message, subject=b) if r.error_code else None
                for b, r in zip(bindings, response.results)}

    async def describe_acls(self, flt: AclBindingFilter = AclBindingFilter()) -> list[AclBinding]:
        response = await self._cluster.send(None, ApiKey.DESCRIBE_ACLS, DescribeAclsRequest(**_filter_fields(flt)))
        if response.error_code:
            raise BrokerError(response.error_code, response.error_message)
        return [AclBinding(ResourcePattern(r.resource_type, r.resource_name, r.pattern_type),
                           AccessControlEntry(a.principal, a.host, a.operation, a.permission_type))
                for r in response.resources for a in r.acls]

    async def delete_acls(self, filters) -> dict[AclBindingFilter, list[AclBinding]]:
        filters = list(filters)
        request = DeleteAclsRequest(filters=[DeleteAclsFilter(**_filter_fields(f)) for f in filters])
        response = await self._cluster.send(None, ApiKey.DELETE_ACLS, request)
        out = {}
        for f, r in zip(filters, response.filter_results):
            if r.error_code:
                raise BrokerError(r.error_code, r.error_message, subject=f)
            out[f] = [AclBinding(ResourcePattern(m.resource_type, m.resource_name, m.pattern_type),
                                 AccessControlEntry(m.principal, m.host, m.operation, m.permission_type))
                      for m in r.matching_acls]
        return out
