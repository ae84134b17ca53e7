"""DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key 51): SCRAM
credentials in ``/config/users/<user>`` (``server/scram_credentials.py``), validated as
Kafka's ``ZkAdminManager`` does. An upsertion carries the salt, the iterations and the salted
password (never the password): the broker derives the stored and server keys from them.

Errors per user: an empty name or too few/many iterations UNACCEPTABLE_CREDENTIAL, an unknown
mechanism UNSUPPORTED_SASL_MECHANISM, a user named twice DUPLICATE_RESOURCE, a deletion or
description of a credential that does not exist RESOURCE_NOT_FOUND. Under an authorizer, describing
needs DESCRIBE and altering ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED), as in Kafka. Store reads and writes
run off the event loop (ZooKeeper round trips).
"""

from __future__ import annotations

import asyncio
from collections import Counter

from odradek.protocol.generated.alter_user_scram_credentials_response import (
    AlterUserScramCredentialsResponse, AlterUserScramCredentialsResult,
)
from odradek.protocol.generated.describe_user_scram_credentials_response import (
    CredentialInfo, DescribeUserScramCredentialsResponse, DescribeUserScramCredentialsResult,
)
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.scram import MAX_ITERATIONS, MECHANISM_IDS, MECHANISM_TYPES, MECHANISMS, credential_from_salted
from odradek.protocol import acl_binding as acl
from odradek.server import authorize, scram_credentials


async def _off_loop(fn, *args):
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


# --- describe -------------------------------------------------------------------------------
async def handle_describe(ctx, request):
    if not authorize.allowed_cluster(ctx, acl.DESCRIBE):  # Kafka: DESCRIBE on the cluster
        return DescribeUserScramCredentialsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                    error_message=None)
    store = ctx.broker.metadata.store
    return await _off_loop(describe, store, None if not request.users else [u.name for u in request.users])


def describe(store, names: list[str] | None) -> DescribeUserScramCredentialsResponse:
    """Every user with credentials when ``names`` is None, else those named."""
    everyone = names is None
    if everyone:
        names = scram_credentials.users(store)
    counts = Counter(names)
    results = []
    for name in dict.fromkeys(names):
        if counts[name] > 1:
            results.append(DescribeUserScramCredentialsResult(
                user=name, error_code=ErrorCode.DUPLICATE_RESOURCE,
                error_message=f"Cannot describe SCRAM credentials for the same user twice in a single request: {name}"))
            continue
        credentials = scram_credentials.mechanisms_of(store, name)
        if not credentials:
            if not everyone:
                results.append(DescribeUserScramCredentialsResult(
                    user=name, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                    error_message=f"Attempt to describe a user credential that does not exist: {name}"))
            continue
        infos = [CredentialInfo(mechanism=MECHANISM_IDS[m], iterations=c.iterations)
                 for m, c in sorted(credentials.items())]
        results.append(DescribeUserScramCredentialsResult(user=name, error_code=ErrorCode.NONE,
                                                          error_message=None, credential_infos=infos))
    return DescribeUserScramCredentialsResponse(error_code=ErrorCode.NONE, error_message=None, results=results)


# --- alter ----------------------------------------------------------------------------------
async def handle_alter(ctx, request):
    if not authorize.allowed_cluster(ctx, acl.ALTER):  # Kafka: ALTER on the cluster, every user refused
        users = dict.fromkeys(op.name for op in [*request.deletions, *request.upsertions])
        return AlterUserScramCredentialsResponse(results=[AlterUserScramCredentialsResult(
            user=u, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None) for u in users])
    return await _off_loop(alter, ctx.broker.metadata.store, request)


def alter(store, request) -> AlterUserScramCredentialsResponse:
    errors: dict[str, tuple[ErrorCode, str]] = {}
    seen: Counter = Counter((op.name, op.mechanism) for op in [*request.deletions, *request.upsertions])
    for op in [*request.deletions, *request.upsertions]:
        error = _check(op, seen)
        if error is not None and op.name not in errors:
            errors[op.name] = error
    users = list(dict.fromkeys(op.name for op in [*request.deletions, *request.upsertions]))
    for user in users:
        if user in errors:
            continue
        existing = scram_credentials.mechanisms_of(store, user)
        deletions = [MECHANISM_TYPES[d.mechanism] for d in request.deletions if d.name == user]
        missing = [m for m in deletions if m not in existing]
        if missing:
            errors[user] = (ErrorCode.RESOURCE_NOT_FOUND,
                            f"Attempt to delete a user credential that does not exist: {missing[0]}")
            continue
        upserts = {MECHANISM_TYPES[u.mechanism]: credential_from_salted(
            MECHANISM_TYPES[u.mechanism], bytes(u.salted_password), bytes(u.salt), u.iterations)
            for u in request.upsertions if u.name == user}
        scram_credentials.alter(store, user, upserts, deletions)
    return AlterUserScramCredentialsResponse(results=[
        AlterUserScramCredentialsResult(user=u, error_code=errors.get(u, (ErrorCode.NONE, None))[0],
                                        error_message=errors.get(u, (ErrorCode.NONE, None))[1])
        for u in users])


def _check(op, seen: Counter) -> tuple[ErrorCode, str] | None:
    if not op.name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if not scram_credentials.valid_user(op.name):
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Username {op.name} is not valid"
    mechanism = MECHANISM_TYPES.get(op.mechanism)
    if mechanism is None:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if seen[(op.name, op.mechanism)] > 1:
        return ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"
    iterations = getattr(op, "iterations", None)
    if iterations is not None:
        if iterations < MECHANISMS[mechanism][1]:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
        if iterations > MAX_ITERATIONS:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
        if not op.salt or not op.salted_password:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"
    return None
