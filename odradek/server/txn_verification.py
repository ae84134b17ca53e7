"""Transaction verification (KIP-890 part 1): a partition leader checks with the transaction
coordinator that a partition is in the transaction before the transaction's first batch
there is appended.

Without it, a transactional batch that reaches a partition the coordinator never added (a
producer that sent it before AddPartitionsToTxn was answered, or whose AddPartitionsToTxn
failed) opens a transaction that no marker will ever close: a "hanging" transaction that
holds the partition's last stable offset back for good. With it, odradek's producer may send
a partition's first batch right behind its AddPartitionsToTxn on the same connection (the
coordinator's broker leading the partition): the verification waits for the partitions that
request is adding.

``transaction.partition.verification.enable`` (Kafka's switch, dynamic) set to false turns
verification off: batches are appended unverified, as before KIP-890, and odradek's feature
(``protocol/features.py``) is no longer listed to clients (``enabled``).

``verification(broker, part, records, transactional_id)`` looks at the first batch header:
nothing is checked (None) for a batch that is not transactional, or whose producer already
has a transaction open in the partition. Otherwise the answer is a ``ProduceError`` to refuse
with, None (verified at once), or an awaitable that raises ``ProduceError`` or returns once
verified (the append then queues behind it, ``ReplicaManager.append_off_loop``).

Where the coordinator is: on this broker (the leader of the transactional id's
``__transaction_state`` partition is here), it is asked in-process
(``TransactionCoordinator.verify``); elsewhere (it answers NOT_COORDINATOR), the broker's
``AddPartitionsToTxnManager`` asks the coordinator's broker with AddPartitionsToTxn v4+
``VerifyOnly`` over the inter-broker listener, batched per broker
(``server/add_partitions_to_txn_manager.py``). A coordinator's broker that serves only
AddPartitionsToTxn v0-v3 cannot verify: the batch is then appended unverified, as before
KIP-890 (Kafka does the same).

The coordinator's answers become what a producer understands, as Kafka's ``ReplicaManager``
maps them: not in the transaction is INVALID_TXN_STATE, a fenced epoch
INVALID_PRODUCER_EPOCH, and the coordinator being busy, moving, loading, unknown or out of
reach (CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
NOT_COORDINATOR, NETWORK_EXCEPTION) NOT_ENOUGH_REPLICAS, which every client retries without
refreshing its metadata.
"""

from __future__ import annotations

import asyncio

from odradek.coordinator.transaction.transaction_coordinator import SETTLE_WAIT_S
from odradek.coordinator.transaction.transaction_verification import settled
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.records.batch import BATCH_HEADER_SIZE, MAGIC_OFFSET, read_header
from odradek.replication.produce_validation import ProduceError

E = ErrorCode
ENABLE = "transaction.partition.verification.enable"
_RETRY = frozenset({E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE,
                    E.NOT_COORDINATOR, E.NETWORK_EXCEPTION})


def verification(broker, part, records, transactional_id: str | None):
    """None, a ``ProduceError``, or an awaitable (see the module's docstring)."""
    if records is None or len(records) < BATCH_HEADER_SIZE or records[MAGIC_OFFSET] != 2:
        return None  # legacy or cut records: the append's validation answers them
    header = read_header(records)
    if not header.is_transactional or header.producer_id < 0:
        return None
    if not transactional_id:
        # Kafka answers the whole request so: a transactional batch needs its transactional id.
        return ProduceError(E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                            "transactional records sent without a transactional id")
    coordinator = broker.txn_coordinator
    if coordinator is None or not enabled(broker):
        return None
    if part.producer_state.in_transaction(header.producer_id):
        # Its transaction is open here, but if it is being ended the batch belongs to the next
        # one (sent behind that one's AddPartitionsToTxn before the markers closed this one):
        # it waits for the markers, then is verified as the next transaction's first.
        ending = coordinator.ending(transactional_id)
        if ending is None:
            return None
        return asyncio.ensure_future(_after_end(ending, broker, part, header, transactional_id))
    answer = coordinator.verify(transactional_id, header.producer_id, header.producer_epoch, part.key)
    if answer == E.NOT_COORDINATOR:  # coordinated on another broker: asked there
        remote = getattr(broker, "add_partitions_to_txn", None)
        if remote is None:
            return None  # a broker without the manager (not started): nothing to ask with
        answer = remote.verify(transactional_id, header.producer_id, header.producer_epoch, part.key)
    if isinstance(answer, ErrorCode):
        return _refusal(answer)
    return asyncio.ensure_future(_verified(answer))


def enabled(broker) -> bool:
    """``transaction.partition.verification.enable``, dynamic broker configs applied."""
    return broker.effective_config()[ENABLE]


async def _verified(answer) -> None:
    refusal = _refusal(await answer)
    if refusal is not None:
        raise refusal


async def _after_end(ending: asyncio.Future, broker, part, header, transactional_id: str) -> None:
    deadline = asyncio.get_running_loop().time() + SETTLE_WAIT_S
    while ending is not None:
        if not await settled(ending, deadline):
            raise _refusal(E.CONCURRENT_TRANSACTIONS)
        ending = broker.txn_coordinator.ending(transactional_id)
    if part.producer_state.in_transaction(header.producer_id):
        # The markers gave up here (the coordinator moved away mid-way): the batch joins the
        # open transaction, which the next coordinator ends, as without verification.
        return
    answer = broker.txn_coordinator.verify(transactional_id, header.producer_id, header.producer_epoch, part.key)
    await _verified(answer if not isinstance(answer, ErrorCode) else _done(answer))


async def _done(code: ErrorCode) -> ErrorCode:
    return code


def _refusal(code: ErrorCode) -> ProduceError | None:
    if code == E.NONE:
        return None
    if code in _RETRY:
        return ProduceError(E.NOT_ENOUGH_REPLICAS, "unable to verify that the partition was added to the "
                            f"transaction: {code.name}")
    if code in (E.TRANSACTION_ABORTABLE, E.INVALID_TXN_STATE):  # INVALID_TXN_STATE: a v4 coordinator's word
        return ProduceError(E.INVALID_TXN_STATE, "the partition was not added to the transaction")
    if code == E.PRODUCER_FENCED:
        return ProduceError(E.INVALID_PRODUCER_EPOCH, "the producer's epoch is fenced")
    return ProduceError(code, f"transaction verification failed: {code.name}")
