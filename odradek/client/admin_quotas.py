"""The admin client's client quotas, as Kafka's ``Admin.describeClientQuotas`` and
``Admin.alterClientQuotas`` have them.

    await admin.alter_client_quotas([
        ClientQuotaAlteration({"client-id": "greedy"}, [("producer_byte_rate", 204800)]),
        ClientQuotaAlteration({"user": None}, [("consumer_byte_rate", None)]),  # None removes
    ])  # {(("client-id", "greedy"),): None, (("user", None),): None}
    await admin.describe_client_quotas(ClientQuotaFilter([
        ClientQuotaFilterComponent.of_entity("client-id", "greedy")], strict=True))
    # {(("client-id", "greedy"),): {"producer_byte_rate": 204800.0}}

An entity is a mapping of entity type (``user``, ``client-id``) to name, None naming the
default entity; results are keyed by the entity as a sorted tuple of its pairs. Alteration
results are per entity: None for success, else the broker's error.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from odradek.client.errors import BrokerError
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.alter_client_quotas_request import (
    AlterClientQuotasRequest, EntityData, EntryData, OpData,
)
from odradek.protocol.generated.describe_client_quotas_request import ComponentData, DescribeClientQuotasRequest

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


@dataclass(frozen=True)
class ClientQuotaFilterComponent:
    """Kafka's ``ClientQuotaFilterComponent``: one entity type and how its name must match."""
    entity_type: str
    match_type: int
    match: str | None = None

    @classmethod
    def of_entity(cls, entity_type: str, name: str) -> ClientQuotaFilterComponent:
        return cls(entity_type, MATCH_EXACT, name)

    @classmethod
    def of_default_entity(cls, entity_type: str) -> ClientQuotaFilterComponent:
        return cls(entity_type, MATCH_DEFAULT)

    @classmethod
    def of_entity_type(cls, entity_type: str) -> ClientQuotaFilterComponent:
        return cls(entity_type, MATCH_SPECIFIED)


@dataclass(frozen=True)
class ClientQuotaFilter:
    """Kafka's ``ClientQuotaFilter``: ``strict`` excludes entities of types not named."""
    components: list = field(default_factory=list)
    strict: bool = False


@dataclass(frozen=True)
class ClientQuotaAlteration:
    """``ops`` are ``(key, value)`` pairs; a value of None removes the key."""
    entity: dict
    ops: list


def entity_key(pairs) -> tuple:
    return tuple(sorted((p.entity_type, p.entity_name) for p in pairs))


class QuotaAdmin:
    """Mixed into AsyncAdminClient (uses its ``_cluster`` and ``_timeout``)."""

    async def describe_client_quotas(self, quota_filter: ClientQuotaFilter | None = None) -> dict[tuple, dict]:
        quota_filter = quota_filter or ClientQuotaFilter()
        request = DescribeClientQuotasRequest(strict=quota_filter.strict, components=[
            ComponentData(entity_type=c.entity_type, match_type=c.match_type, match=c.match)
            for c in quota_filter.components])
        response = await self._cluster.send(None, ApiKey.DESCRIBE_CLIENT_QUOTAS, request, timeout=self._timeout)
        if response.error_code:
            raise BrokerError(response.error_code, response.error_message)
        return {entity_key(e.entity): {v.key: v.value for v in e.values} for e in response.entries or []}

    async def alter_client_quotas(self, alterations, validate_only: bool = False) -> dict[tuple, BrokerError | None]:
        request = AlterClientQuotasRequest(validate_only=validate_only, entries=[EntryData(
            entity=[EntityData(entity_type=t, entity_name=n) for t, n in sorted(a.entity.items())],
            ops=[OpData(key=k, value=0.0 if v is None else float(v), remove=v is None) for k, v in a.ops])
            for a in alterations])
        response = await self._cluster.send(None, ApiKey.ALTER_CLIENT_QUOTAS, request, timeout=self._timeout)
        return {entity_key(e.entity): BrokerError(e.error_code, e.error_message) if e.error_code else None
                for e in response.entries}
