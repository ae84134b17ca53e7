"""Where one broker reaches another: the peer's registered endpoint on the inter-broker
listener, for the replica fetchers, the controller's channel and liveness checks, requests
to the controller and the brokers' own requests to their peers.

The listener is this broker's ``inter.broker.listener.name``, else its first listener on
``security.inter.broker.protocol``, else its first listener
(``server/listener_security.inter_broker_listener``); Kafka requires every broker of a
cluster to have it. As in Kafka, a peer registered without that listener has no inter-broker
endpoint (None): its listeners disagree with this broker's, a configuration error to report,
not to paper over by connecting to another of its endpoints, whose security protocol the
inter-broker connection (its TLS context, its SASL login) may not speak.
"""

from __future__ import annotations

from odradek.metadata.layout import BrokerInfo, Endpoint


def inter_broker_endpoint(info: BrokerInfo | None, listener: str) -> Endpoint | None:
    """``info``'s endpoint on ``listener``; None when the broker is not registered (``info``
    None) or has no such listener."""
    return None if info is None else info.endpoint(listener)


def peer_address(broker, broker_id: int) -> tuple[str, int] | None:
    """``(host, port)`` at which ``broker`` (a running `Broker`: its metadata image and
    ``inter_broker_listener``) reaches broker ``broker_id``, or None (`inter_broker_endpoint`)."""
    endpoint = inter_broker_endpoint(broker.metadata_image().broker(broker_id), broker.inter_broker_listener)
    return None if endpoint is None else (endpoint.host, endpoint.port)
