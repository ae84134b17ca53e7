"""The security gate of a client connection (server/connection.py): who the peer is, and what
it may send before it has said so. Kafka's ``ChannelBuilders`` / ``KafkaChannel``
authenticator step, kept out of the connection's framing, dispatch and writing.

- ``security_protocol`` is the listener's (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL: its entry
  in ``listener.security.protocol.map``, server/listener_security.py).
- ``principal`` is who the peer is (server/principal.py): User:ANONYMOUS until TLS or SASL
  says otherwise. Handlers authorize it from ``client_host``.
- TLS: asyncio makes the connection only once the handshake is done, so ``tls_established``
  runs from ``connection_made``: the client certificate's subject becomes the principal
  through ``ssl.principal.mapping.rules`` (a subject no rule maps closes the connection), and
  record batches can no longer go out with ``os.sendfile`` (the bytes are encrypted in user
  space, server/region_writer.py). A TLS handshake that fails (a plaintext client, a
  certificate the truststore does not vouch for) never makes a connection: asyncio drops the
  socket.
- SASL listeners authenticate before serving (server/sasl_authenticator.py,
  ``SaslServerAuthenticator``): until then it sees every frame first (``intercepted``), reads
  at most ``sasl.server.max.receive.size`` a request (``frame_too_large`` answers an oversized
  one the way Kafka does), and it re-authenticates on ``connections.max.reauth.ms``.

The connection keeps the results as plain attributes (``security_protocol``, ``principal``,
``security``, ``sasl``) that handlers and tests read.
"""

from __future__ import annotations

from odradek.protocol.framing import FrameTooLargeError
from odradek.server.listener_security import authenticate_tls, connection_protocol
from odradek.server.principal import ANONYMOUS
from odradek.server.sasl_authenticator import SaslServerAuthenticator


def open_gate(connection, broker, listener_name: str) -> None:
    """Set the connection's ``security_protocol``, ``principal`` (ANONYMOUS), ``security``
    (the listener's ``ListenerSecurity``: the TLS principal mapper; or None) and ``sasl``
    (a ``SaslServerAuthenticator`` on SASL listeners, else None). Needs ``connection.parser``
    (the SASL authenticator lowers its limit)."""
    connection.security_protocol = connection_protocol(broker.config, listener_name)
    connection.principal = ANONYMOUS
    connection.security = getattr(broker, "listener_security", {}).get(listener_name)
    connection.sasl = SaslServerAuthenticator(connection) if connection.security_protocol.startswith("SASL_") else None


def tls_established(connection, transport) -> bool:
    """Whether ``transport`` is TLS; if so the peer's certificate sets the principal (or
    closes the connection)."""
    if transport.get_extra_info("sslcontext") is None:
        return False
    authenticate_tls(connection, transport)
    return True


def intercepted(connection, frame) -> bool:
    """Whether the SASL authenticator took ``frame`` (a bare SASL token, or a request refused
    before authentication): the connection then does nothing more with it."""
    return connection.sasl is not None and connection.sasl.intercept(frame)


def frame_too_large(connection, error: FrameTooLargeError) -> bool:
    """Whether the SASL authenticator answered an oversized frame itself; else the
    connection closes for ``socket.request.max.bytes``."""
    return connection.sasl is not None and connection.sasl.frame_too_large(error)


def close_gate(connection) -> None:
    """The connection is gone: stop the SASL authenticator's re-authentication timer."""
    if connection.sasl is not None:
        connection.sasl.release()
