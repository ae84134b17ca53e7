"""A broker reaches a peer on the inter-broker listener only, as Kafka does: the listener's
name from this broker's configuration, the peer's endpoint of that name, and no fallback to
another of its endpoints."""

from __future__ import annotations

from dataclasses import replace

import pytest

from odradek.metadata.inter_broker_endpoint import inter_broker_endpoint, peer_address
from odradek.metadata.image import EMPTY_IMAGE, with_entry
from odradek.metadata.layout import BrokerInfo, Endpoint
from odradek.server.config import BrokerConfig, ConfigError
from odradek.server.listener_security import inter_broker_listener

TWO = BrokerInfo(2, (Endpoint("CLIENT", "h", 1), Endpoint("REPL", "r", 2)))


def config(**props) -> BrokerConfig:
    return BrokerConfig.from_props({"broker.id": 1, "listeners": "CLIENT://:9092,REPL://:9093",
                                    "listener.security.protocol.map": "CLIENT:SASL_PLAINTEXT,REPL:PLAINTEXT",
                                    **props})


def test_the_peers_endpoint_on_the_listener_and_no_other():
    assert inter_broker_endpoint(TWO, "REPL") == Endpoint("REPL", "r", 2)
    assert inter_broker_endpoint(TWO, "OTHER") is None  # not CLIENT: its protocol may differ
    assert inter_broker_endpoint(None, "REPL") is None


def test_the_listener_is_named_chosen_by_protocol_or_the_first():
    assert inter_broker_listener(config()) == "CLIENT"
    assert inter_broker_listener(config(**{"inter.broker.listener.name": "repl"})) == "REPL"
    assert inter_broker_listener(config(**{"security.inter.broker.protocol": "PLAINTEXT"})) == "REPL"
    with pytest.raises(ConfigError):
        inter_broker_listener(config(**{"security.inter.broker.protocol": "SSL"}))


class Broker:
    """What `peer_address` reads of a running broker."""

    def __init__(self, listener: str) -> None:
        self.inter_broker_listener = listener
        self._image = replace(EMPTY_IMAGE, brokers=with_entry(EMPTY_IMAGE.brokers, 2, TWO))

    def metadata_image(self):
        return self._image


def test_a_peer_without_the_listener_has_no_address():
    assert peer_address(Broker("REPL"), 2) == ("r", 2)
    assert peer_address(Broker("INTERNAL"), 2) is None
    assert peer_address(Broker("REPL"), 3) is None  # not registered
