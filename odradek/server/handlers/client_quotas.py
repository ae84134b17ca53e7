"""DescribeClientQuotas (key 48) and AlterClientQuotas (key 49): client quotas in
``/config/users`` and ``/config/clients`` (``server/client_quota_configs.py``), with Kafka's
ZooKeeper-mode semantics (``ZkAdminManager.describeClientQuotas`` / ``alterClientQuotas``).

Describe: each filter component names an entity type (``user``, ``client-id``) and a match:
EXACT (that name), DEFAULT (the ``<default>`` entity) or SPECIFIED (any name, the default
included, as Kafka's ZooKeeper mode answers). An entity matches when every component matches
it; with ``strict`` it must also have no entity type the filter leaves out. A filter naming a
type twice, an empty type or ``ip`` with ``user``/``client-id`` is INVALID_REQUEST; another
type is UNSUPPORTED_VERSION (the whole response's error, no entries). odradek keeps no ``ip``
quotas, so an ``ip`` filter finds nothing.

Alter: one error per entity (INVALID_REQUEST for a bad entity, key or value); ``validate_only``
checks without writing. Each written entity is announced under ``/config/changes`` so every
broker applies it. Under an authorizer, describing needs DESCRIBE_CONFIGS and altering
ALTER_CONFIGS on the cluster (CLUSTER_AUTHORIZATION_FAILED), as in Kafka.
"""

from __future__ import annotations

import asyncio

from odradek.protocol import acl_binding as acl
from odradek.protocol.generated.alter_client_quotas_response import (
    AlterClientQuotasResponse, EntityData as AlterEntity, EntryData as AlterEntry,
)
from odradek.protocol.generated.describe_client_quotas_response import (
    DescribeClientQuotasResponse, EntityData, EntryData, ValueData,
)
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server import authorize, client_quota_configs as qc

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
IP = "ip"


async def _off_loop(fn, *args):
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


# --- describe -------------------------------------------------------------------------------
async def handle_describe(ctx, request):
    if not authorize.allowed_cluster(ctx, acl.DESCRIBE_CONFIGS):
        return DescribeClientQuotasResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                            error_message=None, entries=None)
    try:
        filters = parse_filter(request.components)
    except _FilterError as exc:
        return DescribeClientQuotasResponse(error_code=exc.code, error_message=str(exc), entries=None)
    quotas = await _off_loop(qc.all_quotas, ctx.broker.metadata.store)
    entries = [EntryData(entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity],
                         values=[ValueData(key=k, value=v) for k, v in sorted(values.items())])
               for entity, values in sorted(quotas.items(), key=lambda kv: qc.entity_path(kv[0]))
               if filters is not None and matches(filters, entity, request.strict)]
    return DescribeClientQuotasResponse(error_code=ErrorCode.NONE, error_message=None, entries=entries)


class _FilterError(ValueError):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def parse_filter(components) -> dict | None:
    """``{entity type: ... (any) | None (default) | name}``, or None for an ``ip`` filter
    (which finds nothing here). ``_FilterError`` for a filter Kafka refuses."""
    out: dict = {}
    for c in components:
        if c.entity_type == "":
            raise _FilterError(ErrorCode.INVALID_REQUEST, "Unexpected empty filter component entity type")
        if c.entity_type not in (qc.USER, qc.CLIENT_ID, IP):
            raise _FilterError(ErrorCode.UNSUPPORTED_VERSION, f"Custom entity type '{c.entity_type}' not supported")
        if c.entity_type in out:
            raise _FilterError(ErrorCode.INVALID_REQUEST, f"Duplicate {c.entity_type} filter component entity type")
        if c.match_type == MATCH_EXACT:
            if c.match is None:
                raise _FilterError(ErrorCode.INVALID_REQUEST,
                                   "Request specified MATCH_TYPE_EXACT, but set match string to null")
            out[c.entity_type] = c.match
        elif c.match_type == MATCH_DEFAULT:
            out[c.entity_type] = None
        elif c.match_type == MATCH_SPECIFIED:
            out[c.entity_type] = ...
        else:
            raise _FilterError(ErrorCode.INVALID_REQUEST, f"Unexpected match type: {c.match_type}")
    if IP in out and (qc.USER in out or qc.CLIENT_ID in out):
        raise _FilterError(ErrorCode.INVALID_REQUEST, "Invalid entity filter component combination, IP filter "
                           "component should not be used with user or clientId filter component.")
    return None if IP in out else out


def matches(filters: dict, entity: tuple, strict: bool) -> bool:
    names = dict(entity)
    for kind, want in filters.items():
        if kind not in names or (want is not ... and names[kind] != want):
            return False
    return not strict or set(names) <= set(filters)


# --- alter ----------------------------------------------------------------------------------
async def handle_alter(ctx, request):
    if not authorize.allowed_cluster(ctx, acl.ALTER_CONFIGS):
        return AlterClientQuotasResponse(entries=[
            _result(e.entity, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None) for e in request.entries])
    broker = ctx.broker
    results, written = await _off_loop(alter, broker.metadata.store, request)
    for entity, quotas in written.items():  # this broker at once; the others on the notification
        broker.client_quotas.update(entity, quotas)
    if written:
        await _off_loop(_notify, broker, list(written))
    return AlterClientQuotasResponse(entries=results)


def _notify(broker, entities) -> None:
    for entity in entities:
        broker.config_changes.notify(qc.entity_path(entity))


def alter(store, request) -> tuple[list, dict]:
    """The per-entity results, and the quotas now stored of each entity written."""
    results, written = [], {}
    for entry in request.entries:
        try:
            entity = _entity(entry.entity)
            ops = [(op.key, None if op.remove else op.value) for op in entry.ops]
            qc.alter(store, entity, ops, request.validate_only)
        except qc.QuotaConfigError as exc:
            results.append(_result(entry.entity, ErrorCode.INVALID_REQUEST, str(exc)))
            continue
        if not request.validate_only:
            written[entity] = qc.entity_quotas(store, entity)
        results.append(_result(entry.entity, ErrorCode.NONE, None))
    return results, written


def _entity(pairs) -> tuple:
    types = [p.entity_type for p in pairs]
    if len(set(types)) != len(types):
        raise qc.QuotaConfigError("Invalid client quota entity: an entity type given twice")
    for t in types:
        if t == IP:
            raise qc.QuotaConfigError("odradek keeps no ip quotas (connection_creation_rate)")
        if t not in (qc.USER, qc.CLIENT_ID):
            raise qc.QuotaConfigError(f"Unhandled client quota entity type: {t}")
    entity = tuple(sorted((p.entity_type, p.entity_name) for p in pairs))
    qc.entity_path(entity)  # checks the rest
    return entity


def _result(pairs, code: int, message) -> AlterEntry:
    return AlterEntry(error_code=code, error_message=message, entity=[
        AlterEntity(entity_type=p.entity_type, entity_name=p.entity_name) for p in pairs])
