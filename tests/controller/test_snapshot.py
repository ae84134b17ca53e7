"""Reading a newly elected controller's snapshot from the store."""

from __future__ import annotations

import uuid

from odradek.controller.snapshot import read_snapshot
from odradek.metadata import layout
from odradek.metadata.embedded_store import EmbeddedStore
from odradek.metadata.layout import BrokerInfo, Endpoint, PartitionState, TopicAssignment


def test_read_snapshot():
    store = EmbeddedStore()
    for path in layout.PERSISTENT_PATHS:
        store.create(path, make_parents=True)
    store.create(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(3))
    store.set(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(4))
    info = BrokerInfo(1000, (Endpoint("PLAINTEXT", "h", 9092),))
    store.create(layout.broker_path(1000), info.to_json(0))
    t = TopicAssignment("t", uuid.UUID(int=1), {0: (1000,), 1: (1000,)})
    store.create(layout.topic_path("t"), t.to_json())
    state = PartitionState(1000, 2, (1000,), 3)
    store.create(layout.partition_state_path("t", 0), state.to_json(), make_parents=True)
    store.set(layout.partition_state_path("t", 0), state.to_json())
    store.create(layout.topic_config_path("t"), layout.encode_config(
        {"unclean.leader.election.enable": "true"}), make_parents=True)
    store.create(layout.delete_topic_path("gone"))

    snap = read_snapshot(store, 1000, {1000: 77})
    assert (snap.controller_id, snap.epoch, snap.epoch_zk_version) == (1000, 4, 1)
    assert [(b.broker_id, b.epoch, b.info) for b in snap.live_brokers] == [(1000, 77, info)]
    assert snap.topics == (t,)
    assert snap.partition_states == {("t", 0): state}
    assert snap.partition_states[("t", 0)].zk_version == 1
    assert snap.topics_to_delete == {"gone"}
    assert snap.unclean_topics == {"t"}
