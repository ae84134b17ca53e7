"""`watched_events`: watch names read into events; admin znodes taken (read and deleted)."""

from __future__ import annotations

import uuid

from odradek.controller import events as ev
from odradek.controller.watched_events import (
    PREFERRED_REPLICA_ELECTION,
    REASSIGN_PARTITIONS,
    broker_epochs,
    read_watched_event,
)
from odradek.metadata import layout
from odradek.metadata.embedded_store import EmbeddedStore
from odradek.metadata.layout import TopicAssignment
from tests.controller.service_fakes import info


def store_with_paths() -> EmbeddedStore:
    store = EmbeddedStore()
    for path in layout.PERSISTENT_PATHS:
        store.create(path, make_parents=True)
    return store


def test_brokers_with_their_czxid_epochs():
    store = store_with_paths()
    store.create(layout.broker_path(3), info(3).to_json(0), ephemeral=True)
    store.create(layout.broker_path(1), info(1).to_json(0), ephemeral=True)
    epochs = broker_epochs(store)
    assert epochs == {1: store.creation_id(layout.broker_path(1)),
                      3: store.creation_id(layout.broker_path(3))}
    assert epochs[1] > epochs[3]
    event = read_watched_event(store, "brokers")
    assert [(b.broker_id, b.epoch) for b in event.live_brokers] == sorted(epochs.items())


def test_topics_partitions_and_deletions():
    store = store_with_paths()
    assert read_watched_event(store, "delete_topics") is None
    topic = TopicAssignment("t", uuid.UUID(int=3), {0: (1,), 1: (1,)})
    store.create(layout.topic_path("t"), topic.to_json())
    assert read_watched_event(store, "topics").topics[0].name == "t"
    modified = read_watched_event(store, ("topic", "t"))
    assert isinstance(modified, ev.PartitionModifications) and modified.topic.zk_version == 0
    assert read_watched_event(store, ("topic", "gone")) is None
    store.create(layout.delete_topic_path("t"), b"")
    assert read_watched_event(store, "delete_topics") == ev.TopicDeletion(("t",))


def test_admin_znodes_are_read_and_malformed_ones_dropped(caplog):
    store = store_with_paths()
    assert read_watched_event(store, "preferred") is None
    store.create(PREFERRED_REPLICA_ELECTION, b'{"version":1,"partitions":[{"topic":"t","partition":2}]}')
    assert read_watched_event(store, "preferred") == ev.PreferredReplicaElection((("t", 2),))
    assert store.exists(PREFERRED_REPLICA_ELECTION) is None
    store.create(REASSIGN_PARTITIONS,
                 b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3]}]}')
    assert read_watched_event(store, "reassign") == ev.PartitionReassignment({("t", 0): (2, 3)})
    assert store.exists(REASSIGN_PARTITIONS) is not None  # kept until its partitions are done
    store.delete(REASSIGN_PARTITIONS)
    for bad in (b"not json", b"[1]", b'{"partitions":[{"topic":"t"}]}', b'{"partitions":7}'):
        store.create(REASSIGN_PARTITIONS, bad)
        assert read_watched_event(store, "reassign") is None
        assert store.exists(REASSIGN_PARTITIONS) is None
    assert sum("malformed" in r.message for r in caplog.records) == 4


def test_log_dir_event_notifications_are_taken():
    store = store_with_paths()
    for broker_id in (1002, 1000, 1002):
        body = b'{"version":1,"broker":%d,"event":1}' % broker_id
        store.create(layout.LOG_DIR_EVENT_PREFIX, body, sequential=True)
    store.create(layout.LOG_DIR_EVENT_PREFIX, b"not json", sequential=True)
    assert read_watched_event(store, "log_dir_events") == ev.LogDirEventNotification((1000, 1002))
    assert store.children(layout.LOG_DIR_EVENT_NOTIFICATION) == []
    assert read_watched_event(store, "log_dir_events") is None
