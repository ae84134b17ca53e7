"""KIP-227 incremental fetch sessions on the wire (``server/fetch_context.py``,
``server/fetch_session_cache.py``): raw Fetch requests against a real broker, and
kafka-python's consumer, whose ``FetchSessionHandler`` uses sessions."""

from __future__ import annotations

import time
import uuid

from kafka import KafkaConsumer

from odradek.protocol import codec
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.records.reader import iter_batches
from odradek.storage.clock import FakeClock
from odradek.testing.broker import InProcessBroker
from tests.server.test_bad_input import create_topic
from tests.server.wire import WireClient, produce_body, simple_batch

F = codec.module("FetchRequest")
MR = codec.module("MetadataRequest")


def _fetch(c: WireClient, session_id: int, epoch: int, parts=(), forgotten=(), version: int = 12, ids=None):
    """``parts``: (topic, partition, fetch offset); ``forgotten``: (topic, [partitions]). With
    ``ids`` (topic -> id) and version 13+, topics are named by id."""
    by_id = version >= 13
    topics = {}
    for t, p, off in parts:
        ft = topics.setdefault(t, F.FetchTopic(topic="" if by_id else t, topic_id=ids[t] if by_id else uuid.UUID(int=0),
                                               partitions=[]))
        ft.partitions.append(F.FetchPartition(partition=p, fetch_offset=off, partition_max_bytes=1 << 20))
    gone = [F.ForgottenTopic(topic="" if by_id else t, topic_id=ids[t] if by_id else uuid.UUID(int=0), partitions=ps)
            for t, ps in forgotten]
    body = F.MESSAGE(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, session_id=session_id,
                     session_epoch=epoch, topics=list(topics.values()), forgotten_topics_data=gone)
    return c.request("Fetch", version, body)[1]


def _answered(resp, names=None) -> dict:
    """(topic or topic id, partition) -> (error, high watermark, values)."""
    return {(t.topic_id if names is None and not t.topic else t.topic, p.partition_index):
            (p.error_code, p.high_watermark, [r.value for b in iter_batches(p.records or b"") for r in b.records()])
            for t in resp.responses for p in t.partitions}


def _produce(c: WireClient, topic: str, partition: int, *values: bytes) -> None:
    _, resp = c.request("Produce", 9, produce_body(topic, partition, simple_batch(list(values))))
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.NONE


def test_incremental_fetch_answers_only_changed_partitions(shared_broker):
    c = WireClient(shared_broker.bootstrap)
    create_topic(c, "fs-inc", partitions=3)
    _produce(c, "fs-inc", 0, b"a0")
    full = _fetch(c, 0, 0, [("fs-inc", p, 0) for p in range(3)])
    assert full.error_code == ErrorCode.NONE and full.session_id != 0
    assert _answered(full) == {("fs-inc", 0): (0, 1, [b"a0"]), ("fs-inc", 1): (0, 0, []), ("fs-inc", 2): (0, 0, [])}
    sid = full.session_id
    inc = _fetch(c, sid, 1, [("fs-inc", 0, 1)])  # only the moved fetch offset is sent
    assert (inc.session_id, _answered(inc)) == (sid, {})  # nothing new anywhere
    _produce(c, "fs-inc", 2, b"c0")
    inc = _fetch(c, sid, 2)  # partition 2 is read at the session's offset 0
    assert (inc.session_id, _answered(inc)) == (sid, {("fs-inc", 2): (0, 1, [b"c0"])})
    inc = _fetch(c, sid, 3, [("fs-inc", 2, 1)])
    assert _answered(inc) == {}


def test_wrong_epoch_and_unknown_session(shared_broker):
    c = WireClient(shared_broker.bootstrap)
    create_topic(c, "fs-epoch")
    sid = _fetch(c, 0, 0, [("fs-epoch", 0, 0)]).session_id
    assert _fetch(c, sid, 1).error_code == ErrorCode.NONE
    for epoch in (1, 3):  # replayed, and skipped ahead
        bad = _fetch(c, sid, epoch)
        assert (bad.error_code, bad.session_id, bad.responses) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0, [])
    assert _fetch(c, sid, 2).error_code == ErrorCode.NONE  # the session survives a bad epoch
    other = sid + 1 if sid + 1 != 0 else 2
    assert _fetch(c, other, 1).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert _fetch(c, sid, 3, version=13, ids={}).error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR


def test_partitions_added_and_forgotten_mid_session(shared_broker):
    c = WireClient(shared_broker.bootstrap)
    create_topic(c, "fs-add", partitions=2)
    create_topic(c, "fs-add2")
    _produce(c, "fs-add", 1, b"b0")
    _produce(c, "fs-add2", 0, b"x0")
    sid = _fetch(c, 0, 0, [("fs-add", 0, 0)]).session_id
    inc = _fetch(c, sid, 1, [("fs-add", 1, 0), ("fs-add2", 0, 0)])  # added: always answered once
    assert _answered(inc) == {("fs-add", 1): (0, 1, [b"b0"]), ("fs-add2", 0): (0, 1, [b"x0"])}
    inc = _fetch(c, sid, 2, [("fs-add", 1, 1), ("fs-add2", 0, 1)], forgotten=[("fs-add", [0])])
    assert _answered(inc) == {}
    _produce(c, "fs-add", 0, b"a0")  # forgotten: no longer read
    _produce(c, "fs-add2", 0, b"x1")
    assert _answered(_fetch(c, sid, 3)) == {("fs-add2", 0): (0, 2, [b"x1"])}
    emptied = _fetch(c, sid, 4, forgotten=[("fs-add", [1]), ("fs-add2", [0])])  # nothing left: sessionless
    assert (emptied.error_code, emptied.session_id) == (ErrorCode.NONE, 0)
    assert _fetch(c, sid, 5).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_close_with_final_epoch_answers_sessionless(shared_broker):
    c = WireClient(shared_broker.bootstrap)
    create_topic(c, "fs-close")
    _produce(c, "fs-close", 0, b"v")
    sid = _fetch(c, 0, 0, [("fs-close", 0, 0)]).session_id
    closed = _fetch(c, sid, -1, [("fs-close", 0, 0)])
    assert (closed.error_code, closed.session_id) == (ErrorCode.NONE, 0)
    assert _answered(closed) == {("fs-close", 0): (0, 1, [b"v"])}
    assert _fetch(c, sid, 1).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    sessionless = _fetch(c, 0, -1, [("fs-close", 0, 1)])
    assert (sessionless.session_id, _answered(sessionless)) == (0, {("fs-close", 0): (0, 1, [])})


def test_sessions_by_topic_id_and_a_recreated_topic(shared_broker):
    c = WireClient(shared_broker.bootstrap)
    create_topic(c, "fs-ids")
    _, meta = c.request("Metadata", 12, MR.MESSAGE(topics=[MR.MetadataRequestTopic(name="fs-ids")]))
    ids = {"fs-ids": meta.topics[0].topic_id}
    _produce(c, "fs-ids", 0, b"i0")
    full = _fetch(c, 0, 0, [("fs-ids", 0, 0)], version=13, ids=ids)
    assert _answered(full) == {(ids["fs-ids"], 0): (0, 1, [b"i0"])}
    sid = full.session_id
    assert _answered(_fetch(c, sid, 1, [("fs-ids", 0, 1)], version=13, ids=ids)) == {}
    assert _fetch(c, sid, 2, version=12).error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    DT = codec.module("DeleteTopicsRequest")
    c.request("DeleteTopics", 6, DT.MESSAGE(topics=[DT.DeleteTopicState(name="fs-ids")], timeout_ms=5000))
    inc = _fetch(c, sid, 2, version=13, ids=ids)  # the id is gone: its partition answers UNKNOWN_TOPIC_ID
    assert [(k, v[0]) for k, v in _answered(inc).items()] == [((ids["fs-ids"], 0), ErrorCode.UNKNOWN_TOPIC_ID)]


def test_full_cache_and_eviction_of_an_idle_session(tmp_path):
    clock = FakeClock(int(time.time() * 1000))
    with InProcessBroker(tmp_path / "data", clock=clock, **{"max.incremental.fetch.session.cache.slots": "1",
                                                          "min.incremental.fetch.session.eviction.ms": "1000"}) as b:
        c = WireClient(b.bootstrap)
        create_topic(c, "fs-evict")
        first = _fetch(c, 0, 0, [("fs-evict", 0, 0)]).session_id
        assert first != 0
        refused = _fetch(c, 0, 0, [("fs-evict", 0, 0)])  # full cache, the first session young: no session
        assert (refused.error_code, refused.session_id) == (ErrorCode.NONE, 0)
        assert _fetch(c, first, 1).error_code == ErrorCode.NONE
        clock.advance(1001)  # the first session idle past min.incremental.fetch.session.eviction.ms
        second = _fetch(c, 0, 0, [("fs-evict", 0, 0)]).session_id
        assert second not in (0, first)
        assert _fetch(c, first, 2).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        assert _fetch(c, second, 1).error_code == ErrorCode.NONE


def test_kafka_python_consumer_reads_through_an_incremental_session(shared_broker):
    c = WireClient(shared_broker.bootstrap)
    create_topic(c, "fs-kp", partitions=2)
    for i in range(3):
        _produce(c, "fs-kp", i % 2, b"m%d" % i)
    _fetch(c, 0, 0, [("fs-kp", 0, 0)])  # a session of its own: the broker has a session cache from here on
    before = set(shared_broker.broker.fetch_sessions.sessions)
    consumer = KafkaConsumer("fs-kp", bootstrap_servers=shared_broker.bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, fetch_max_wait_ms=50, consumer_timeout_ms=3000)
    try:
        got = []
        for msg in consumer:
            got.append(msg.value)
            if len(got) == 3:
                _produce(c, "fs-kp", 1, b"m3")
            if len(got) == 4:
                break
        assert sorted(got) == [b"m0", b"m1", b"m2", b"m3"]
        sessions = shared_broker.broker.fetch_sessions.sessions
        # The consumer's own session (epoch 1 when made), moved on by an incremental fetch.
        assert any(s.epoch >= 2 for sid, s in sessions.items() if sid not in before)
    finally:
        consumer.close()
