"""The transactional calls of ``AsyncProducer`` (mixed in), each handed to its
``TransactionManager`` (see ``transaction_manager`` for the states and requests).

    async with AsyncProducer(bootstrap, transactional_id="orders-writer") as producer:
        await producer.init_transactions()
        producer.begin_transaction()
        producer.send("orders", b"paid")
        await producer.send_offsets_to_transaction({TopicPartition("in", 0): 42}, consumer.group_metadata())
        await producer.commit_transaction()

Timeouts are seconds (None: ``max_block_ms``); a call that times out may be made again and
resumes. A producer without ``transactional_id`` raises TransactionStateError.
"""

from __future__ import annotations

from odradek.client.errors import TransactionStateError
from odradek.client.transactions import TransactionHandle

__all__ = ["TransactionalProducer"]


class TransactionalProducer:
    """Mixed into AsyncProducer (uses its ``_txn``, a TransactionManager or None)."""

    _txn = None

    def _transactions(self):
        if self._txn is None:
            raise TransactionStateError("not a transactional producer: give it a transactional_id")
        return self._txn

    @property
    def transaction_state(self) -> str | None:
        """The transaction state's Kafka name (None for a producer without transactional id)."""
        return None if self._txn is None else self._txn.state.value

    async def init_transactions(self, timeout: float | None = None) -> None:
        """Get the transactional id's producer id and epoch, fencing earlier producers of it."""
        await self._transactions().init(timeout)

    def begin_transaction(self) -> None:
        """Start a transaction: ``send`` is allowed until it commits or aborts."""
        self._transactions().begin()

    async def send_offsets_to_transaction(self, offsets: dict, group_metadata, timeout: float | None = None) -> None:
        """Commit ``offsets`` (``TopicPartition -> int | OffsetAndMetadata``) for the group
        (a group id or a consumer's ``group_metadata()``) with the transaction."""
        await self._transactions().send_offsets(offsets, group_metadata, timeout)

    async def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush the transaction's records, then commit it (raises what made it fail:
        ``abort_transaction`` then, or a new producer after a fatal error)."""
        await self._transactions().commit(timeout)

    async def abort_transaction(self, timeout: float | None = None) -> None:
        """Drop the records not sent yet (TransactionAbortedError), then abort."""
        await self._transactions().abort(timeout)

    async def prepare_transaction(self, timeout: float | None = None) -> TransactionHandle:
        """Flush the open transaction and return its handle, leaving it open."""
        return await self._transactions().prepare(timeout)
