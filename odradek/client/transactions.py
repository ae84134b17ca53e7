"""Transactions seen from outside one producer: the handle of a prepared transaction, the
consumer group metadata that ``send_offsets_to_transaction`` takes, and ending a prepared
transaction from another process (a two-phase commit driver).

    handle = producer.prepare_transaction()      # flushed, still open at the coordinator
    ...                                          # the driver records the handle, decides
    end_transaction("127.0.0.1:9092", handle, commit=True)

``end_transaction`` finds the handle's transaction coordinator (FindCoordinator, key type 1)
and sends EndTxn with the handle's producer id and epoch, retrying what Kafka's producer
retries (CONCURRENT_TRANSACTIONS, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
COORDINATOR_LOAD_IN_PROGRESS, a lost connection) until ``timeout_ms``. Ending a transaction
that already ended the same way answers NONE (the coordinator treats it as a retry), so a
driver may repeat it after a crash: the call is idempotent. Ending it the other way, or with
a fenced epoch, raises the broker's error (INVALID_TXN_STATE, PRODUCER_FENCED,
INVALID_PRODUCER_EPOCH). A handle whose producer id is -1 (a prepared transaction that wrote
nothing) has nothing to end: the call returns at once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
from typing import NamedTuple

from odradek.client.cluster import ClusterClient
from odradek.client.coordinator import TRANSACTION_KEY, GroupCoordinatorClient
from odradek.client.errors import BrokerError, KafkaTimeoutError
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.end_txn_request import EndTxnRequest
from odradek.protocol.generated.error_codes import ErrorCode

__all__ = ["ConsumerGroupMetadata", "TransactionHandle", "end_transaction", "end_transaction_async",
           "send_end_txn"]

# The first retry of CONCURRENT_TRANSACTIONS: the previous transaction's markers are being
# written (EndTxn is answered once PrepareCommit is, before them), which took 0.5-0.8 ms on one
# broker; backoff doubles from here (0.1, 0.3, 0.7, 1.5 ms ... after the first answer) up to
# retry_backoff_max. Java waits 20 ms, 20 transactions' worth at 1,000 records of 100 B each.
CONCURRENT_RETRY_S = 0.0001


class TransactionHandle(NamedTuple):
    """What identifies an open transaction to its coordinator: enough to end it anywhere."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


class ConsumerGroupMetadata(NamedTuple):
    """A consumer's group identity for ``send_offsets_to_transaction``: with a generation and
    member id the group coordinator fences offsets from a member that lost its partitions
    (KIP-447); with a group id alone (generation -1) it does not."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


async def send_end_txn(coordinator: GroupCoordinatorClient, handle: TransactionHandle, commit: bool,
                       deadline: float) -> None:
    """EndTxn for ``handle`` through ``coordinator`` (a transaction coordinator client),
    retrying until ``deadline`` (loop time); raises the broker's error otherwise. A handle
    without producer id (a prepared transaction that wrote nothing) has nothing to end."""
    if handle.producer_id < 0:
        return
    request = EndTxnRequest(transactional_id=handle.transactional_id, producer_id=handle.producer_id,
                            producer_epoch=handle.producer_epoch, committed=commit)
    await txn_request(coordinator, ApiKey.END_TXN, request, lambda r: r.error_code, deadline)


async def txn_request(coordinator: GroupCoordinatorClient, api_key: int, request, error_of, deadline: float):
    """Send ``request`` to the transaction coordinator until it answers something other than
    CONCURRENT_TRANSACTIONS (retried after a short, doubling backoff) or a coordinator error
    (retried by ``coordinator.send``); return the response when its error is NONE, else raise
    its BrokerError. KafkaTimeoutError once ``deadline`` (loop time) passes."""
    cluster = coordinator.cluster
    loop = cluster.loop
    delay = CONCURRENT_RETRY_S
    attempt = 0
    while True:
        response = await coordinator.send(api_key, request, error_of, deadline=deadline)
        code = error_of(response)
        if code == ErrorCode.NONE:
            return response
        error = BrokerError(code, subject=coordinator.label)
        if code == ErrorCode.CONCURRENT_TRANSACTIONS:
            wait, delay = delay, min(delay * 2, cluster.retry_backoff_max)
        elif error.retriable:
            wait, attempt = cluster.backoff(attempt), attempt + 1
        else:
            raise error
        if loop.time() + wait >= deadline:
            raise KafkaTimeoutError(f"{coordinator.label}: still {error.code.name} at the deadline")
        await asyncio.sleep(wait)


async def end_transaction_async(bootstrap_servers, handle: TransactionHandle, commit: bool, *,
                                timeout_ms: int = 60_000, **config) -> None:
    """Commit (``commit=True``) or abort the prepared transaction ``handle``; ``config`` are
    client settings (``client_id``, ``request_timeout_ms``, ``retry_backoff_ms``, ...)."""
    handle = TransactionHandle(*handle)
    if handle.producer_id < 0:
        return  # prepared without writing anything: no transaction at the coordinator
    known = inspect.signature(ClusterClient).parameters
    settings = {k: v for k, v in config.items() if k in known}  # producer settings are ignored
    cluster = ClusterClient(bootstrap_servers, **{"client_id": "odradek-txn", **settings})
    await cluster.start()
    try:
        coordinator = GroupCoordinatorClient(cluster, handle.transactional_id, dedicated_connection=False,
                                             key_type=TRANSACTION_KEY)
        await send_end_txn(coordinator, handle, commit, cluster.loop.time() + timeout_ms / 1000)
    finally:
        await cluster.close()


def end_transaction(bootstrap_servers, handle: TransactionHandle, commit: bool, **config) -> None:
    """``end_transaction_async``, synchronously (on a loop of its own; in a thread of its
    own when the caller's thread runs a loop already)."""
    coroutine = end_transaction_async(bootstrap_servers, handle, commit, **config)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
