"""The transaction coordinator: transactional ids' state in ``__transaction_state``, kept by
the leader of each partition, and the end-transaction markers it writes to the partitions of
each transaction. ``TransactionCoordinator`` is the runtime; the state machine
(``transaction_metadata``, ``transaction_shard``) and the log records (``transaction_log``)
are plain code, tested without sockets."""

from odradek.coordinator.transaction.transaction_config import TRANSACTION_STATE_TOPIC, TransactionConfig
from odradek.coordinator.transaction.transaction_coordinator import TransactionCoordinator

__all__ = ["TRANSACTION_STATE_TOPIC", "TransactionConfig", "TransactionCoordinator"]
