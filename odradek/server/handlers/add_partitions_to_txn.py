"""AddPartitionsToTxn (key 24): a transactional producer names the partitions it is about to
write in its transaction (v0-v3, the client versions); a partition leader asks whether
partitions are in transactions (v4+, broker to broker, KIP-890).

v0-v3, one transaction: served by the transactional id's coordinator
(``TransactionCoordinator.add_partitions``): the transaction becomes (or stays) Ongoing with
these partitions, written to ``__transaction_state`` before the answer. Every partition gets
the same error. Partitions of topics that do not exist answer UNKNOWN_TOPIC_OR_PARTITION and
the others OPERATION_NOT_ATTEMPTED, nothing added, as Kafka does. PRODUCER_FENCED is
INVALID_PRODUCER_EPOCH before v2.

v4+, a batch of transactions (``Transactions``), sent by other brokers' partition leaders
(``server/add_partitions_to_txn_manager.py``) and authorized by CLUSTER_ACTION on the cluster
(denied: the top-level error CLUSTER_AUTHORIZATION_FAILED and no results; no topic or
transactional-id ACL is checked). Each entry is answered on its own, in ``ResultsByTransaction``:

    VerifyOnly=true     per partition, ``TransactionCoordinator.verify``: NONE (in the
                        Ongoing transaction), TRANSACTION_ABORTABLE (not added; INVALID_TXN_STATE
                        for v4, which predates that code), PRODUCER_FENCED,
                        INVALID_PRODUCER_ID_MAPPING, CONCURRENT_TRANSACTIONS, or the
                        coordinator's own error (NOT_COORDINATOR, ...)
    VerifyOnly=false    the partitions added, as for v3 (Kafka serves it too), one error for all
    empty id            INVALID_REQUEST for each partition
    unknown partitions  UNKNOWN_TOPIC_OR_PARTITION, the others OPERATION_NOT_ATTEMPTED

The response is sent once every entry is answered (a verification may wait for an
AddPartitionsToTxn of the same transaction being written, or for the previous transaction's
markers, at most ``SETTLE_WAIT_S``).
"""

from __future__ import annotations

import asyncio

from odradek.coordinator.transaction.transaction_coordinator import answer_now
from odradek.protocol.generated.add_partitions_to_txn_response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopicResult,
)
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol import acl_binding as acl
from odradek.server import authorize

E = ErrorCode
BROKER_VERSION = 4  # Kafka's EARLIEST_BROKER_VERSION: v4+ come from brokers, v0-v3 from clients


def handle(ctx, request):
    """The response, or a coroutine of it while the coordinator's write is replicated. The
    coordinator writes (or prepares) the transit here, before the connection reads the next
    request: a Produce pipelined behind this request finds the partitions added, or being
    added, and its verification waits for them (KIP-890)."""
    if ctx.api_version >= BROKER_VERSION:
        return _handle_transactions(ctx, request)
    partitions = [(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
    image = ctx.broker.metadata_image()
    unknown = {tp for tp in partitions if _unknown(image, tp)}
    coordinator = ctx.broker.txn_coordinator
    # Kafka: WRITE on the transactional id, then WRITE on each topic (the others not attempted)
    if not authorize.allowed(ctx, acl.WRITE, acl.TRANSACTIONAL_ID, request.v3_and_below_transactional_id):
        return _respond(E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, partitions)
    denied = {tp for tp in partitions if not authorize.allowed(ctx, acl.WRITE, acl.TOPIC, tp[0])}
    if denied:
        return _respond({tp: E.TOPIC_AUTHORIZATION_FAILED if tp in denied else E.OPERATION_NOT_ATTEMPTED
                         for tp in partitions})
    if unknown:
        return _respond(_not_attempted(partitions, unknown))
    if coordinator is None:
        return _respond(dict.fromkeys(partitions, E.COORDINATOR_NOT_AVAILABLE))
    added = coordinator.add_partitions(request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                                       request.v3_and_below_producer_epoch, partitions)
    error = answer_now(added)
    if error is None:
        return _answer(added, partitions, ctx.api_version)
    return _respond(_per_version(error, ctx.api_version), partitions)


async def _answer(added, partitions, version: int) -> AddPartitionsToTxnResponse:
    return _respond(_per_version(await added, version), partitions)


def _per_version(error: ErrorCode, version: int) -> ErrorCode:
    if error == E.PRODUCER_FENCED and version < 2:
        return E.INVALID_PRODUCER_EPOCH
    if error == E.TRANSACTION_ABORTABLE and version < 5:  # v5 brought TRANSACTION_ABORTABLE
        return E.INVALID_TXN_STATE
    return error


def _respond(error: ErrorCode | dict, partitions=()) -> AddPartitionsToTxnResponse:
    """The v0-v3 response: ``error`` for every partition, or per partition (a dict)."""
    errors = error if isinstance(error, dict) else dict.fromkeys(partitions, error)
    return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=_by_topic(errors))


def _unknown(image, tp) -> bool:
    topic = image.topic(tp[0])
    return topic is None or not 0 <= tp[1] < len(topic.partitions)


def _not_attempted(partitions, unknown: set) -> dict:
    return {tp: E.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else E.OPERATION_NOT_ATTEMPTED for tp in partitions}


def _by_topic(errors: dict) -> list[AddPartitionsToTxnTopicResult]:
    topics: dict[str, AddPartitionsToTxnTopicResult] = {}
    for (topic, p), error in errors.items():
        result = topics.setdefault(topic, AddPartitionsToTxnTopicResult(name=topic, results_by_partition=[]))
        result.results_by_partition.append(AddPartitionsToTxnPartitionResult(partition_index=p,
                                                                             partition_error_code=error))
    return list(topics.values())


# --- v4+: transactions from other brokers -----------------------------------------------------
def _handle_transactions(ctx, request):
    if not authorize.allowed_cluster(ctx, acl.CLUSTER_ACTION):
        return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=E.CLUSTER_AUTHORIZATION_FAILED,
                                          results_by_transaction=[])
    version = ctx.api_version
    answers = [_transaction(ctx.broker, txn, version) for txn in request.transactions]
    if all(isinstance(a, AddPartitionsToTxnResult) for a in answers):
        return _respond_transactions(answers)
    return _gathered(answers)


async def _gathered(answers: list) -> AddPartitionsToTxnResponse:
    results = [a if isinstance(a, AddPartitionsToTxnResult) else await a for a in answers]
    return _respond_transactions(results)


def _respond_transactions(results: list) -> AddPartitionsToTxnResponse:
    return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=E.NONE, results_by_transaction=results)


def _transaction(broker, txn, version: int):
    """One entry's ``AddPartitionsToTxnResult``, or an awaitable of it."""
    tid = txn.transactional_id
    partitions = list(dict.fromkeys((t.name, p) for t in txn.topics for p in t.partitions))
    if not tid:
        return _result(tid, dict.fromkeys(partitions, E.INVALID_REQUEST))
    image = broker.metadata_image()
    unknown = {tp for tp in partitions if _unknown(image, tp)}
    if unknown:
        return _result(tid, _not_attempted(partitions, unknown))
    coordinator = broker.txn_coordinator
    if coordinator is None:
        return _result(tid, dict.fromkeys(partitions, E.COORDINATOR_NOT_AVAILABLE))
    if not txn.verify_only:
        added = coordinator.add_partitions(tid, txn.producer_id, txn.producer_epoch, partitions)
        error = answer_now(added)
        if error is None:
            return _added_later(tid, added, partitions, version)
        return _result(tid, dict.fromkeys(partitions, _per_version(error, version)))
    answers = {tp: coordinator.verify(tid, txn.producer_id, txn.producer_epoch, tp) for tp in partitions}
    if all(isinstance(a, ErrorCode) for a in answers.values()):
        return _result(tid, {tp: _per_version(a, version) for tp, a in answers.items()})
    return _verified_later(tid, answers, version)


async def _added_later(tid: str, added, partitions, version: int) -> AddPartitionsToTxnResult:
    return _result(tid, dict.fromkeys(partitions, _per_version(await added, version)))


async def _verified_later(tid: str, answers: dict, version: int) -> AddPartitionsToTxnResult:
    waiting = [a for a in answers.values() if not isinstance(a, ErrorCode)]
    done = iter(await asyncio.gather(*waiting))
    errors = {tp: a if isinstance(a, ErrorCode) else next(done) for tp, a in answers.items()}
    return _result(tid, {tp: _per_version(e, version) for tp, e in errors.items()})


def _result(tid: str, errors: dict) -> AddPartitionsToTxnResult:
    return AddPartitionsToTxnResult(transactional_id=tid, topic_results=_by_topic(errors))
