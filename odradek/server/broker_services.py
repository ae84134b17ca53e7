"""What the broker offers the coordinators running in it (a mixin of ``Broker``).

The coordinators sit below the server and never import it (``tests/test_layers.py``); they
call these on the ``broker`` they are given. ``coordinator/inter_broker.py`` states the
contract; each method here only hands over to the server's one implementation.
"""

from __future__ import annotations

from odradek.coordinator.inter_broker import InterBrokerConnectionPool
from odradek.coordinator.transaction.marker_write import MarkerWrite
from odradek.server.handlers.find_coordinator import ensure_internal_topic
from odradek.server.inter_broker_connections import InterBrokerConnections
from odradek.server.txn_marker_writer import write_markers


class BrokerServices:
    def inter_broker_connections(self, purpose: str, request_timeout_s: float) -> InterBrokerConnectionPool:
        """A new pool of connections to the other brokers (``server/inter_broker_connections.py``)."""
        return InterBrokerConnections(self, purpose, request_timeout_s)

    async def write_txn_markers(self, writes: list[MarkerWrite]) -> None:
        """Write markers of partitions this broker leads (``server/txn_marker_writer.py``)."""
        await write_markers(self, writes)

    async def ensure_internal_topic(self, topic_name: str):
        """``(metadata image, error)`` once ``topic_name`` exists, created first when it does
        not (``server/handlers/find_coordinator.py``)."""
        return await ensure_internal_topic(self, topic_name)
