"""`BrokerToControllerChannel`: a broker's requests to the controller (Kafka's
``BrokerToControllerChannelManager``): ControlledShutdown at stop, AlterPartition from leaders.

``await channel.send(api_key, body)`` sends to the current controller, as the broker's
metadata image names it (``/controller``, watched), and returns the decoded response body.
``body`` is the request object, or a callable ``body(version) -> request`` for APIs whose
layout depends on the version (AlterPartition names topics before v2, ids from v2).

Retried, with a short back-off, until ``timeout`` (default ``controller.socket.timeout.ms``):
while no controller is known, on connection errors and timeouts, and on a top-level
NOT_CONTROLLER answer (the controller moved; the image will name the new one). Then
`KafkaTimeoutError`. When the controller is this broker, the request goes in-process to the
broker's own handler (`channel_manager.deliver_locally`), at the highest version both sides
know. Remote requests use one connection per controller on the inter-broker listener.
ElectLeaders from clients is forwarded this way too (`sent_by_a_broker` stops a loop).
"""

from __future__ import annotations

import asyncio
import logging

from odradek.client.errors import KafkaConnectionError, KafkaTimeoutError, UnsupportedVersionError
from odradek.controller.channel_manager import deliver_locally, local_version
from odradek.metadata.inter_broker_endpoint import peer_address
from odradek.metadata.layout import NO_LEADER
from odradek.protocol.generated.error_codes import ErrorCode

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.1
_CLIENT_ID = "broker-{}-to-controller"


def sent_by_a_broker(client_id: str | None) -> bool:
    """Whether a request came through a broker's channel to the controller (the client id
    these channels use): a handler that forwards requests to the controller must not forward
    such a request again (two brokers each naming the other would pass it back and forth)."""
    return bool(client_id) and client_id.startswith("broker-") and client_id.endswith(
        "-to-controller")


class BrokerToControllerChannel:
    """See the module docstring; one per broker (``broker.broker_to_controller``)."""

    def __init__(self, broker, *, retry_backoff: float = RETRY_BACKOFF_S) -> None:
        self.broker = broker
        self.retry_backoff = retry_backoff
        self.listener = broker.inter_broker_listener
        self.client_id = _CLIENT_ID.format(broker.broker_id)
        self._connection = None
        self._connection_to = NO_LEADER
        self._connect_lock = asyncio.Lock()

    async def send(self, api_key: int, body, *, timeout: float | None = None):
        """The controller's response to ``body`` (see the module docstring)."""
        if timeout is None:
            timeout = self.broker.config["controller.socket.timeout.ms"] / 1000
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        last: object = "no controller known"
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise KafkaTimeoutError(f"no answer from the controller to API {api_key}: {last}")
            controller_id = self.broker.metadata_image().controller_id
            if controller_id != NO_LEADER:
                try:
                    response = await self._send_once(controller_id, api_key, body, remaining)
                except (KafkaConnectionError, KafkaTimeoutError, OSError) as e:
                    last = e
                    self._drop_connection()
                else:
                    if getattr(response, "error_code", ErrorCode.NONE) != ErrorCode.NOT_CONTROLLER:
                        return response
                    last = f"broker {controller_id} is not the controller"
            await asyncio.sleep(min(self.retry_backoff, max(0.0, deadline - loop.time())))

    async def _send_once(self, controller_id: int, api_key: int, body, timeout: float):
        if controller_id == self.broker.broker_id:
            version = local_version(api_key)
            request = body(version) if callable(body) else body
            return await asyncio.wait_for(
                deliver_locally(self.broker, api_key, version, request, self.listener,
                                self.client_id),
                timeout,
            )
        connection = await self._connect(controller_id, timeout)
        try:
            version = connection.api_version(api_key)
        except UnsupportedVersionError as e:
            raise KafkaConnectionError(str(e)) from None
        request = body(version) if callable(body) else body
        return await connection.send(api_key, request, version=version, timeout=timeout)

    async def _connect(self, controller_id: int, timeout: float):
        from odradek.client.connection import BrokerConnection

        async with self._connect_lock:
            conn = self._connection
            if conn is not None and not conn.closed and self._connection_to == controller_id:
                return conn
            self._drop_connection()
            address = peer_address(self.broker, controller_id)
            if address is None:
                raise KafkaConnectionError(
                    f"controller {controller_id} has no endpoint on {self.listener!r}")
            conn = BrokerConnection(address[0], address[1], node_id=controller_id,
                                    client_id=self.client_id, request_timeout=timeout,
                                    ssl_context=getattr(self.broker, "inter_broker_ssl", None),
                                    sasl=getattr(self.broker, "inter_broker_sasl", None))
            await conn.connect(timeout=timeout)
            self._connection, self._connection_to = conn, controller_id
            return conn

    def _drop_connection(self) -> None:
        if self._connection is not None:
            self._connection.abort()
        self._connection, self._connection_to = None, NO_LEADER

    def close(self) -> None:
        """Close the connection (idempotent; the channel may be used again after)."""
        self._drop_connection()

