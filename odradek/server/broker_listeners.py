"""The broker's listeners (a mixin of ``Broker``): binding each of ``listeners`` (with TLS
when its protocol is SSL or SASL_SSL, ``listener_security``), rebinding them when the dynamic
broker config changes them, and the endpoints advertised to clients and registered under
``/brokers/ids`` (a bound ephemeral port filled in).

Uses the broker's ``effective_config()``, ``config``, ``loop``, ``metadata``, ``broker_id``,
``connections`` and its ``servers`` / ``bound`` / ``listener_security`` maps.
"""

from __future__ import annotations

import logging
import os
import socket

from odradek.server.config import ConfigError, Listener
from odradek.server.connection import Connection
from odradek.server.listener_security import listener_security, protocol_map

log = logging.getLogger("odradek.broker")


class BrokerStartError(Exception):
    """The broker could not start; the message names the setting at fault and says why."""


class BrokerListeners:
    async def _listen(self) -> None:
        for listener in self.effective_config().listeners:
            try:
                await self._bind(listener)
            except ConfigError as e:
                raise BrokerStartError(str(e)) from None
            except OSError as e:
                reason = os.strerror(e.errno) if e.errno else str(e)
                raise BrokerStartError(f"listeners: cannot listen on {listener.host or '0.0.0.0'}:"
                                       f"{listener.port} ({listener.name}): {reason.lower()}") from None

    async def _bind(self, listener: Listener) -> None:
        """Listen on ``listener``, with TLS when its protocol is SSL or SASL_SSL; ConfigError
        for bad or unreadable TLS settings."""
        security = listener_security(self.effective_config(), listener.name)
        self.listener_security[listener.name] = security
        server = await self.loop.create_server(
            lambda name=listener.name: Connection(self, name), listener.host or None, listener.port,
            reuse_address=True, backlog=1024, ssl=security.ssl_context,
        )
        sock = server.sockets[0]
        set_buffer_sizes(sock, self.config)
        self.bound[listener.name] = (listener.host or socket.gethostname(), sock.getsockname()[1])
        self.servers[listener.name] = (listener, server)

    async def update_listeners(self) -> None:
        """Make the bound listeners those of ``listeners`` as it is now (a dynamic broker
        config): close removed or moved ones with their connections, bind new ones, and
        rewrite this broker's registration with the advertised endpoints."""
        wanted = {listener.name: listener for listener in self.effective_config().listeners}
        for name, (listener, server) in list(self.servers.items()):
            if wanted.get(name) != listener:
                server.close()
                del self.servers[name], self.bound[name]
                for conn in [c for c in self.connections if c.listener_name == name]:
                    conn.close()
        for name, listener in wanted.items():
            if name not in self.servers:
                try:
                    await self._bind(listener)
                except (OSError, ConfigError) as e:  # stored all the same, as Kafka does; the log says why
                    log.error("cannot listen on %s://%s:%d: %s", name, listener.host, listener.port, e)
        self.metadata.update_broker(self.broker_info())
        log.info("broker %d now listening on %s", self.broker_id, self.advertised())

    def advertised(self) -> list[tuple[str, str, int]]:
        """``(listener, host, port)`` that clients are told, with bound ports filled in."""
        out = []
        for listener in self.effective_config().advertised_listeners:
            host, port = listener.host, listener.port
            bound = self.bound.get(listener.name)
            if port == 0 and bound:
                port = bound[1]
            if not host or host == "0.0.0.0":
                host = bound[0] if bound and bound[0] != "0.0.0.0" else socket.gethostname()
            out.append((listener.name, host, port))
        return out

    def broker_info(self):
        from odradek.metadata.layout import BrokerInfo, Endpoint

        protocols = protocol_map(self.effective_config())
        endpoints = tuple(Endpoint(name, host, port, protocols.get(name, "PLAINTEXT"))
                          for name, host, port in self.advertised())
        return BrokerInfo(self.broker_id, endpoints, self.config["broker.rack"])

    @property
    def port(self) -> int:
        """The first listener's bound port (tests bind port 0)."""
        return next(iter(self.bound.values()))[1]


def set_buffer_sizes(sock: socket.socket, config) -> None:
    """Kafka's ``socket.send.buffer.bytes`` and ``socket.receive.buffer.bytes`` (SO_SNDBUF,
    SO_RCVBUF; -1 leaves the OS's own, which Linux grows with the traffic), set on the
    listening socket: connections it accepts inherit them, and a receive buffer is in place
    before the handshake announces the window."""
    for key, option in (("socket.send.buffer.bytes", socket.SO_SNDBUF),
                        ("socket.receive.buffer.bytes", socket.SO_RCVBUF)):
        size = config[key]
        if size != -1:
            sock.setsockopt(socket.SOL_SOCKET, option, size)
