"""``InterBrokerConnections``: one client connection per other broker, on the inter-broker
listener, for a broker's own requests to its peers (AddPartitionsToTxn verifications,
``server/add_partitions_to_txn_manager.py``).

The address is the peer's endpoint for ``inter.broker.listener.name`` as its registration
lists it (``metadata/inter_broker_endpoint.py``); the connection carries the broker's
inter-broker TLS context and SASL login (``broker.inter_broker_ssl``, ``inter_broker_sasl``),
as the replica fetchers' and the controller channel's do. Connections are opened on first
use, one at a time per peer (concurrent callers share the one being opened), and kept until
``drop`` (after a failure: the next ``get`` opens a new one) or ``close``. The versions each
peer serves are the connection's ``broker_versions`` (its ApiVersions answer).

The coordinators get theirs from ``broker.inter_broker_connections`` (``server/broker_services.py``;
the interface, ``InterBrokerConnectionPool``, is in ``coordinator/inter_broker.py``).
"""

from __future__ import annotations

import asyncio

from odradek.client.connection import BrokerConnection
from odradek.client.errors import KafkaConnectionError
from odradek.metadata.inter_broker_endpoint import peer_address


class InterBrokerConnections:
    def __init__(self, broker, purpose: str, request_timeout_s: float) -> None:
        self.broker = broker
        self.client_id = f"broker-{broker.broker_id}-{purpose}"
        self.request_timeout_s = request_timeout_s
        self._connections: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, asyncio.Lock] = {}
        self._closed = False

    async def get(self, broker_id: int) -> BrokerConnection:
        """The open connection to ``broker_id``, opened if needed. Raises
        ``KafkaConnectionError`` (or the connection's own error) when it cannot be had."""
        conn = self._connections.get(broker_id)
        if conn is not None and not conn.closed:
            return conn
        async with self._connecting.setdefault(broker_id, asyncio.Lock()):
            conn = self._connections.get(broker_id)
            if conn is not None and not conn.closed:
                return conn
            address = peer_address(self.broker, broker_id)
            if address is None:
                raise KafkaConnectionError(f"broker {broker_id} is not registered on listener "
                                           f"{self.broker.inter_broker_listener}")
            conn = BrokerConnection(address[0], address[1], node_id=broker_id, client_id=self.client_id,
                                    request_timeout=self.request_timeout_s,
                                    ssl_context=getattr(self.broker, "inter_broker_ssl", None),
                                    sasl=getattr(self.broker, "inter_broker_sasl", None))
            await conn.connect(self.request_timeout_s)
            if self._closed:
                conn.abort()
                raise KafkaConnectionError(f"{self.client_id}: closed")
            self._connections[broker_id] = conn
            return conn

    def drop(self, broker_id: int) -> None:
        """Forget (and abort) the connection to ``broker_id`` after it failed."""
        conn = self._connections.pop(broker_id, None)
        if conn is not None:
            conn.abort()

    def close(self) -> None:
        self._closed = True
        for conn in self._connections.values():
            conn.abort()
        self._connections.clear()
