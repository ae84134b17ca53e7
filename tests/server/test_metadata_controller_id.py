"""The controller id of Metadata and DescribeCluster (``handlers.metadata.answered_controller_id``):
a broker cut off from its metadata store (ZooKeeper SUSPENDED or LOST) does not answer its own
id as controller, since ``/controller`` may name another broker by now: it answers -1, which
Kafka's clients take as "no controller yet". Another broker's id is answered as it was read.

The broker is an in-process one on the embedded store, its own controller; the store's
`connected` is made False, as ZooKeeperStore's is while kazoo is not CONNECTED.
"""

from __future__ import annotations

import pytest

from odradek.protocol import codec
from odradek.testing.broker import InProcessBroker
from tests.metadata.store_contract import wait_for
from tests.server.test_control_requests import deliver, me

MR = codec.module("MetadataRequest")
DC = codec.module("DescribeClusterRequest")


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    with InProcessBroker(tmp_path_factory.mktemp("data")) as b:
        wait_for(lambda: b.call(b.broker.controller_id) == me(b), "the broker to be controller", 30)
        yield b


def answered(node) -> tuple[int, int]:
    """The controller id as Metadata (v12) and DescribeCluster (v0) answer it."""
    metadata = deliver(node, "Metadata", 12, MR.MESSAGE(topics=[], allow_auto_topic_creation=False))
    cluster = deliver(node, "DescribeCluster", 0, DC.MESSAGE())
    return metadata.controller_id, cluster.controller_id


def cut_off(node, monkeypatch) -> None:
    store = node.broker.metadata.store
    monkeypatch.setattr(type(store), "connected", property(lambda self: False))


def test_a_connected_controller_answers_its_own_id(node):
    assert answered(node) == (me(node), me(node))


def test_a_controller_cut_off_from_its_store_answers_no_controller(node, monkeypatch):
    cut_off(node, monkeypatch)
    assert answered(node) == (-1, -1)


def test_another_brokers_id_is_answered_while_cut_off(node, monkeypatch):
    cut_off(node, monkeypatch)
    monkeypatch.setattr(node.broker, "controller_id", lambda: me(node) + 1)
    assert answered(node) == (me(node) + 1, me(node) + 1)
