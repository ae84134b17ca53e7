"""The Fetch handler's replica path on a real broker: a follower's fetches tell the leader
how far it got, which moves the high watermark (answering acks=all produces), expands the ISR
through the alter-partition manager, and acks=all waits end with NOT_LEADER_OR_FOLLOWER when
the leadership goes."""

from __future__ import annotations

import threading

import pytest

from odradek.protocol import codec
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.records.reader import iter_batches
from odradek.testing.broker import InProcessBroker
from tests.replication.test_alter_partition_manager import FakeChannel, accept
from tests.server.clients import unique_topic, wait_until
from tests.server.test_bad_input import create_topic
from tests.server.wire import WireClient, produce_body, simple_batch

F = codec.module("FetchRequest")


@pytest.fixture(scope="module")
def leader(tmp_path_factory):
    with InProcessBroker(tmp_path_factory.mktemp("leader")) as b:
        def fake_controller():
            b.broker.broker_to_controller = FakeChannel(accept)
        b.call(fake_controller)
        yield b


@pytest.fixture
def wire(leader):
    client = WireClient(leader.bootstrap)
    yield client
    client.close()


def _replicated(leader: InProcessBroker, wire: WireClient, isr: tuple[int, ...]) -> str:
    """A topic whose partition 0 broker 1 leads at epoch 1 with replicas [1, 2], as a
    LeaderAndIsr would make it."""
    topic = unique_topic("replica-path")
    create_topic(wire, topic)

    def lead():
        rm = leader.broker.replica_manager
        part = rm.get(topic, 0)
        rm.make_leader(topic, 0, part.topic_id, (1, 2), isr, 1, part.log.config)
        part.zk_version = 0
    leader.call(lead)
    return topic


def _partition(leader, topic):
    return leader.call(lambda: leader.broker.replica_manager.get(topic, 0))


def _follower_fetch(wire: WireClient, leader, topic: str, offset: int, version: int = 12, replica: int = 2):
    part = _partition(leader, topic)
    fp = F.FetchPartition(partition=0, current_leader_epoch=1, fetch_offset=offset, log_start_offset=0,
                          partition_max_bytes=1 << 20)
    body = F.MESSAGE(replica_id=replica if version < 15 else -1, replica_state=F.ReplicaState(replica, -1),
                     max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                     topics=[F.FetchTopic(topic=topic, topic_id=part.topic_id, partitions=[fp])])
    _, resp = wire.request("Fetch", version, body)
    return resp.responses[0].partitions[0]


def _produce_in_background(leader, topic: str, count: int, acks: int = -1):
    """Produce ``count`` records with ``acks`` on another connection; the thread's result
    holds the partition's answer once it comes."""
    result = {}

    def run():
        c = WireClient(leader.bootstrap)
        try:
            _, resp = c.request("Produce", 9, produce_body(topic, 0, simple_batch([b"r"] * count), acks=acks))
            result["answer"] = resp.responses[0].partition_responses[0]
        finally:
            c.close()
    thread = threading.Thread(target=run)
    thread.start()
    wait_until(lambda: _partition(leader, topic).log_end_offset == count, what="the append")
    return thread, result


@pytest.mark.parametrize("version", [12, 17])
def test_follower_fetches_move_the_high_watermark_and_answer_acks_all(leader, wire, version):
    topic = _replicated(leader, wire, (1, 2))
    thread, result = _produce_in_background(leader, topic, 3)
    first = _follower_fetch(wire, leader, topic, 0, version)
    assert first.error_code == ErrorCode.NONE and first.high_watermark == 0
    assert sum(len(list(b.records())) for b in iter_batches(first.records)) == 3  # read past the high watermark
    assert "answer" not in result  # the follower has not got the records yet
    second = _follower_fetch(wire, leader, topic, 3, version)
    assert second.error_code == ErrorCode.NONE and second.high_watermark == 3
    thread.join(10)
    assert result["answer"].error_code == ErrorCode.NONE and result["answer"].base_offset == 0
    follower = _partition(leader, topic).followers[2]
    assert follower.log_end_offset == 3


def test_a_caught_up_follower_joins_the_isr_through_the_controller(leader, wire):
    topic = _replicated(leader, wire, (1,))
    wire.request("Produce", 9, produce_body(topic, 0, simple_batch([b"a", b"b"])))
    assert _follower_fetch(wire, leader, topic, 0).high_watermark == 2  # the ISR is the leader alone
    _follower_fetch(wire, leader, topic, 2)
    part = wait_until(lambda: (p := _partition(leader, topic)).isr == (1, 2) and p, what="ISR expansion")
    assert part.pending_isr is None and part.zk_version == 1
    request = leader.broker.broker_to_controller.sent[-1]
    assert request.topics[0].topic_name == topic and request.topics[0].partitions[0].new_isr == [1, 2]


def test_a_fetch_from_a_broker_that_is_no_replica_is_refused(leader, wire):
    topic = _replicated(leader, wire, (1, 2))
    assert _follower_fetch(wire, leader, topic, 0, replica=3).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert 3 not in _partition(leader, topic).followers


def test_a_follower_ahead_of_the_leader_is_not_recorded(leader, wire):
    topic = _replicated(leader, wire, (1,))
    assert _follower_fetch(wire, leader, topic, 5).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    part = _partition(leader, topic)
    assert part.followers[2].log_end_offset == -1 and part.pending_isr is None and part.isr == (1,)


def test_acks_all_answers_not_leader_when_the_leadership_is_lost(leader, wire):
    topic = _replicated(leader, wire, (1, 2))
    thread, result = _produce_in_background(leader, topic, 2)

    def resign():  # what becoming a follower does to the waiters
        rm = leader.broker.replica_manager
        rm.get(topic, 0).leader_id = 2
        rm.notify((topic, 0))
    leader.call(resign)
    thread.join(10)
    assert result["answer"].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
