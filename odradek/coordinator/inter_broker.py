"""What the coordinators ask of the broker they run in: connections to the other brokers, the
transaction markers of the partitions it leads, and the internal topics.

The coordinators sit below the server (``tests/test_layers.py``): they never import
``odradek.server``. The server's parts reach them through the ``broker`` each coordinator is
given, which provides (``server/broker_services.py``, a mixin of ``Broker``):

- ``broker.inter_broker_connections(purpose, request_timeout_s) -> InterBrokerConnectionPool``:
  a new pool of connections to the other brokers on ``inter.broker.listener.name``, with the
  broker's inter-broker TLS and SASL (``server/inter_broker_connections.py``); ``purpose``
  names it in the client id (``broker-<id>-<purpose>``). Used by the transaction markers
  (``transaction/marker_channel.py``), the share state RPCs (``share/default_persister.py``)
  and share-group lag (``group/share/partition_end_offsets.py``).
- ``await broker.write_txn_markers(writes)``: append the ``MarkerWrite``s
  (``transaction/marker_write.py``) of partitions this broker leads, as the WriteTxnMarkers
  handler does, setting each one's ``error`` (``server/txn_marker_writer.py``).
- ``await broker.ensure_internal_topic(topic) -> (metadata image, ErrorCode)``: the image once
  the internal topic exists, creating it first as FindCoordinator does
  (``server/handlers/find_coordinator.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from odradek.protocol.generated.error_codes import ErrorCode

if TYPE_CHECKING:
    from odradek.client.connection import BrokerConnection


class InterBrokerConnectionPool(Protocol):
    """One client connection per other broker, opened on first use and kept until dropped."""

    async def get(self, broker_id: int) -> BrokerConnection:
        """The open connection to ``broker_id``, opened if needed; raises ``KafkaConnectionError``
        (or the connection's own error) when it cannot be had."""

    def drop(self, broker_id: int) -> None:
        """Forget (and abort) the connection to ``broker_id`` after it failed: the next ``get``
        opens a new one."""

    def close(self) -> None:
        """Abort every connection; the pool opens no more."""


def error_code_of(code: int) -> ErrorCode:
    """A peer's error code; UNKNOWN_SERVER_ERROR for one this version of odradek lacks."""
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR
