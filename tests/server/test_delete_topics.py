"""DeleteTopics is all-or-nothing and restartable: whatever fails midway (a checkpoint, a
rename, the controller's removal of the znodes after its mark, or the broker stopping before
StopReplica deleted the logs), the deleted topic's records are never served again once
deleted, and a new topic of the same name starts empty, after a restart too (the next
controller finishes the deletion; the broker removes the logs of a marked topic at start-up)."""

import errno
import os

import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from odradek.controller.commands import DeleteZnode
from odradek.metadata import layout
from odradek.metadata.embedded_store import EmbeddedStore
from odradek.metadata.store import DeleteOp
from odradek.server.handlers import stop_replica as stop_replica_handler
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.storage import log_manager as log_manager_module
from odradek.storage.checkpoint import OffsetCheckpointFile
from odradek.testing.broker import InProcessBroker
from tests.server.clients import read_from_beginning, wait_until

TOPIC = "doomed"


def enospc(*_args, **_kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def create(bootstrap, partitions=3):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(TOPIC, partitions, 1)])
    finally:
        admin.close()


def delete(bootstrap, timeout_ms=10_000):
    """DeleteTopics; the error code of the topic (0, or the failure's)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return admin.delete_topics([TOPIC], timeout_ms=timeout_ms, raise_errors=False)["topics"][0]["error_code"]
    finally:
        admin.close()


def produce(bootstrap, values, partitions=3):
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1)
    try:
        for i, value in enumerate(values):
            producer.send(TOPIC, value, partition=i % partitions).get(10)
    finally:
        producer.close()


def read_all(bootstrap, partitions=3):
    return read_from_beginning(bootstrap, TOPIC, partitions)


def rename_failing_for(name):
    rename = os.rename

    def patched(src, dst):
        if os.path.basename(src) == name:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return rename(src, dst)

    return patched


TOPIC_ZNODES = (layout.topic_path(TOPIC), layout.topic_config_path(TOPIC), layout.delete_topic_path(TOPIC))


def topic_znodes_refused(apply):
    """A lone delete (`DeleteZnode.apply`) of the topic's znodes refused."""
    def patched(self, store):
        if self.path in TOPIC_ZNODES:
            enospc()
        return apply(self, store)

    return patched


def topic_znodes_refused_in_multi(multi):
    """A ``multi`` deleting one of the topic's znodes refused (the controller batches deletes)."""
    def patched(self, ops):
        if any(isinstance(op, DeleteOp) and op.path in TOPIC_ZNODES for op in ops):
            enospc()
        return multi(self, ops)

    return patched


async def stop_replica_never_done(*_args):
    raise ConnectionResetError("the broker stopped before it deleted the logs")


# The last two stay in force until the broker stopped: the deletion is still under way then,
# and the next start finishes it.
FAILURES = {
    "checkpoint": [(OffsetCheckpointFile, "write", enospc)],
    "rename of partition 1": [(log_manager_module.os, "rename", rename_failing_for(f"{TOPIC}-1"))],
    # The controller's removal of the topic's znodes refused (a full disk for the metadata):
    # its writer repeats it until it lands, or the controller stops.
    "metadata after its mark": [(DeleteZnode, "apply", topic_znodes_refused(DeleteZnode.apply)),
                                (EmbeddedStore, "multi", topic_znodes_refused_in_multi(EmbeddedStore.multi))],
    # StopReplica with delete fails on the broker (as if it stopped before deleting the
    # logs): the controller holds the topic as ineligible for deletion meanwhile.
    "stop before the logs": [(stop_replica_handler, "stop_replicas", stop_replica_never_done)],
}
UNTIL_STOPPED = {"metadata after its mark", "stop before the logs"}


@pytest.mark.parametrize("failure", FAILURES)
def test_deleted_records_never_come_back(tmp_path, monkeypatch, failure):
    data = tmp_path / "data"
    with InProcessBroker(data) as b:
        create(b.bootstrap)
        produce(b.bootstrap, [b"old-%d" % i for i in range(9)])
        for target, name, fake in FAILURES[failure]:
            monkeypatch.setattr(target, name, fake)
        code = delete(b.bootstrap, 2_000 if failure in UNTIL_STOPPED else 10_000)
        assert code == (ErrorCode.REQUEST_TIMED_OUT if failure in UNTIL_STOPPED else ErrorCode.NONE)
        if failure not in UNTIL_STOPPED:
            monkeypatch.undo()
        if failure != "stop before the logs":
            assert b.call(lambda: [tp for tp in b.broker.replica_manager.partitions if tp[0] == TOPIC]) == []
    monkeypatch.undo()
    with InProcessBroker(data) as b:
        assert not [n for n in os.listdir(data) if n.startswith(TOPIC) and not n.endswith("-delete")]
        # The controller drops the topic's znodes, then its deletion mark: CreateTopics is
        # refused ("marked for deletion") until the mark is gone too.
        wait_until(lambda: TOPIC not in b.call(lambda: b.broker.metadata_image().topics)
                   and b.call(lambda: b.broker.metadata.store.exists(f"{layout.DELETE_TOPICS}/{TOPIC}")) is None,
                   what="the deletion finished")
        create(b.bootstrap)
        assert read_all(b.bootstrap) == []
        produce(b.bootstrap, [b"new"])
        assert read_all(b.bootstrap) == [(0, 0, b"new")]


def test_a_failed_checkpoint_still_answers_and_a_recreated_topic_starts_empty(tmp_path, monkeypatch):
    with InProcessBroker(tmp_path / "data") as b:
        create(b.bootstrap)
        produce(b.bootstrap, [b"old-%d" % i for i in range(9)])
        monkeypatch.setattr(OffsetCheckpointFile, "write", enospc)
        assert delete(b.bootstrap) == 0
        monkeypatch.undo()
        create(b.bootstrap)
        wait_until(lambda: len(b.call(lambda: [tp for tp in b.broker.replica_manager.partitions
                                               if tp[0] == TOPIC])) == 3, what="new partitions")
        assert read_all(b.bootstrap) == []


def test_a_log_a_failed_deletion_left_is_never_the_recreated_topics(tmp_path, monkeypatch):
    """The rename of partition 1 fails at the deletion and again when the topic is created
    anew (its partition 1 is then not led); after a restart the directory, recorded as the
    old topic id's, is removed and the new topic's partition 1 starts empty."""
    data = tmp_path / "data"
    with InProcessBroker(data) as b:
        create(b.bootstrap)
        produce(b.bootstrap, [b"old-%d" % i for i in range(9)])
        monkeypatch.setattr(log_manager_module.os, "rename", rename_failing_for(f"{TOPIC}-1"))
        assert delete(b.bootstrap) == 0
        create(b.bootstrap)
        assert b.call(lambda: sorted(i for t, i in b.broker.replica_manager.partitions if t == TOPIC)) == [0, 2]
        monkeypatch.undo()
    with InProcessBroker(data) as b:
        assert read_all(b.bootstrap) == []
        produce(b.bootstrap, [b"new"] * 3)
        assert read_all(b.bootstrap) == [(p, 0, b"new") for p in range(3)]
