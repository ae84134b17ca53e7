"""A broker whose ZooKeeper session is lost while it starts still starts (Kafka's
``KafkaZkClient.registerBroker`` retries its checked create until connected).

In process, so the losses fall at a chosen write: kazoo's ``create`` is wrapped to expire the
broker's session at the cluster id's creation (after applying it) and at the registration
(before applying it).
"""

from __future__ import annotations

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss, SessionExpiredError

from odradek.metadata import layout
from odradek.testing.broker import InProcessBroker
from tests.metadata.test_zookeeper_store import expire_client_session


def test_a_broker_whose_session_is_lost_while_it_starts_registers(zookeeper, chroot, tmp_path,
                                                                 monkeypatch):
    real_create, lost = KazooClient.create, []

    def create(client, path, *args, **kwargs):
        if path == layout.CLUSTER_ID and "cluster id" not in lost:
            lost.append("cluster id")
            real_create(client, path, *args, **kwargs)
            expire_client_session(zookeeper.hosts, client)
            raise ConnectionLoss()
        if path == layout.broker_path(1) and "registration" not in lost:
            lost.append("registration")
            expire_client_session(zookeeper.hosts, client)
            raise SessionExpiredError()
        return real_create(client, path, *args, **kwargs)

    monkeypatch.setattr(KazooClient, "create", create)
    with InProcessBroker(tmp_path, node_id=1, zookeeper_connect=zookeeper.hosts + chroot) as b:
        assert lost == ["cluster id", "registration"]
        store = b.broker.metadata.store
        data, stat = store._client.get(layout.broker_path(1))
        assert stat.ephemeralOwner == store._client.client_id[0]
        assert b.broker.broker_epoch == stat.czxid
        assert b.broker.cluster_id == layout.decode_cluster_id(store.get(layout.CLUSTER_ID)[0])
        assert 1 in b.call(b.broker.metadata_image).brokers
