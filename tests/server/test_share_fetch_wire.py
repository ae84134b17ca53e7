"""ShareFetch v1 and ShareAcknowledge v1 on the wire against a real broker: a member joins
with ShareGroupHeartbeat, fetches whole batches with AcquiredRecords, acknowledges; the share
session's epochs (not found, wrong epoch, acknowledgements at epoch 0, close); a stranger to
the group is UNKNOWN_MEMBER_ID; records a closed session held go to another member."""

from __future__ import annotations

import uuid

import pytest

from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode as E
from odradek.records.batch import iter_batch_positions, read_header
from tests.server.group_clients import create_topic, produce, wait_for
from tests.server.group_wire import WireClient, module
from tests.server.test_share_group_heartbeat import join, settled

FETCH, ACK = ApiKey.SHARE_FETCH, ApiKey.SHARE_ACKNOWLEDGE
req = module("ShareFetchRequest")
ack_req = module("ShareAcknowledgeRequest")


def share_fetch(c, group, member, epoch, topic_id, acks=None, max_wait_ms=0, forget=False):
    part = req.FetchPartition(partition_index=0, acknowledgement_batches=acks or [])
    topics = [] if forget else [req.FetchTopic(topic_id=topic_id, partitions=[part])]
    forgotten = [req.ForgottenTopic(topic_id=topic_id, partitions=[0])] if forget else []
    return c.call(FETCH, 1, group_id=group, member_id=member, share_session_epoch=epoch, max_wait_ms=max_wait_ms,
                  min_bytes=1, max_bytes=1 << 20, max_records=500, batch_size=500, topics=topics,
                  forgotten_topics_data=forgotten)


def offsets(pd) -> list[int]:
    return [o for a in pd.acquired_records for o in range(a.first_offset, a.last_offset + 1)]


def batch_offsets(records) -> list[int]:
    data = bytes(records)
    return [o for pos, _ in iter_batch_positions(data) for o in
            range(read_header(data, pos).base_offset, read_header(data, pos).last_offset + 1)]


def test_share_fetch_and_acknowledge_on_the_wire(broker):
    create_topic(broker.bootstrap, "q", 1)
    topic_id = broker.broker.metadata_image().topic("q").topic_id
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    with WireClient(broker.port) as c:
        settled(c, "sg", a, join(c, "sg", a), 1)
        settled(c, "sg", b, join(c, "sg", b), 1)
        assert share_fetch(c, "sg", "stranger", 0, topic_id).error_code == E.UNKNOWN_MEMBER_ID
        assert share_fetch(c, "sg", a, 1, topic_id).error_code == E.SHARE_SESSION_NOT_FOUND
        acks = [req.AcknowledgementBatch(first_offset=0, last_offset=0, acknowledge_types=[1])]
        assert share_fetch(c, "sg", a, 0, topic_id, acks=acks).error_code == E.INVALID_REQUEST
        r = share_fetch(c, "sg", a, 0, topic_id)  # share.auto.offset.reset latest: starts at the end
        assert r.error_code == E.NONE and r.acquisition_lock_timeout_ms == 30000
        produce(broker.bootstrap, "q", [b"v%d" % i for i in range(5)], partitions=1)
        r = share_fetch(c, "sg", a, 1, topic_id, max_wait_ms=5000)
        (pd,) = r.responses[0].partitions
        assert pd.error_code == E.NONE and offsets(pd) == [0, 1, 2, 3, 4]
        assert set(offsets(pd)) <= set(batch_offsets(pd.records))
        assert [x.delivery_count for x in pd.acquired_records] == [1]
        assert share_fetch(c, "sg", a, 1, topic_id).error_code == E.INVALID_SHARE_SESSION_EPOCH
        # accept 0-1 in a ShareAcknowledge; the rest stays acquired by a
        ack = c.call(ACK, 1, group_id="sg", member_id=a, share_session_epoch=2, topics=[ack_req.AcknowledgeTopic(
            topic_id=topic_id, partitions=[ack_req.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
                ack_req.AcknowledgementBatch(first_offset=0, last_offset=1, acknowledge_types=[1])])])])
        assert ack.error_code == E.NONE and ack.responses[0].partitions[0].error_code == E.NONE
        assert c.call(ACK, 1, group_id="sg", member_id=a, share_session_epoch=0).error_code == E.INVALID_SHARE_SESSION_EPOCH
        # b sees nothing while a holds 2-4
        rb = share_fetch(c, "sg", b, 0, topic_id)
        assert all(not p.acquired_records for t in rb.responses for p in t.partitions)
        # a closes its session, acknowledging 2 as rejected: 3-4 go to b with delivery count 2
        acks = [req.AcknowledgementBatch(first_offset=2, last_offset=2, acknowledge_types=[3])]
        r = share_fetch(c, "sg", a, -1, topic_id, acks=acks)
        assert r.error_code == E.NONE and r.responses[0].partitions[0].acknowledge_error_code == E.NONE
        assert share_fetch(c, "sg", a, 4, topic_id).error_code == E.SHARE_SESSION_NOT_FOUND
        rb = share_fetch(c, "sg", b, 1, topic_id, max_wait_ms=5000)
        (pd,) = rb.responses[0].partitions
        assert offsets(pd) == [3, 4] and {x.delivery_count for x in pd.acquired_records} == {2}


def test_share_fetch_and_acknowledge_authorization(broker, monkeypatch):
    """READ on the group (GROUP_AUTHORIZATION_FAILED for the request) and on each topic
    (TOPIC_AUTHORIZATION_FAILED for its partitions, kept out of the session), as Kafka's
    KafkaApis; the authorizer's answers are faked here (its ACLs are tested elsewhere)."""
    from odradek.protocol.acl_binding import GROUP, READ, TOPIC
    from odradek.server import authorize

    create_topic(broker.bootstrap, "open", 1)
    create_topic(broker.bootstrap, "secret", 1)
    image = broker.broker.metadata_image()
    open_id, secret_id = image.topic("open").topic_id, image.topic("secret").topic_id
    denied = {(READ, GROUP, "closed-group"), (READ, TOPIC, "secret")}
    monkeypatch.setattr(authorize, "allowed", lambda ctx, op, rtype, name, **kw: (op, rtype, name) not in denied)
    a = str(uuid.uuid4())
    with WireClient(broker.port) as c:
        settled(c, "sg", a, join(c, "sg", a, topics=("open", "secret")), 2)
        r = share_fetch(c, "closed-group", a, 0, open_id)
        assert r.error_code == E.GROUP_AUTHORIZATION_FAILED
        r = c.call(ACK, 1, group_id="closed-group", member_id=a, share_session_epoch=1)
        assert r.error_code == E.GROUP_AUTHORIZATION_FAILED
        r = c.call(FETCH, 1, group_id="sg", member_id=a, share_session_epoch=0, max_wait_ms=0, min_bytes=1,
                   max_bytes=1 << 20, max_records=500, batch_size=500, topics=[
                       req.FetchTopic(topic_id=t, partitions=[req.FetchPartition(partition_index=0)])
                       for t in (open_id, secret_id)], forgotten_topics_data=[])
        errors = {t.topic_id: t.partitions[0].error_code for t in r.responses}
        assert r.error_code == E.NONE and errors == {open_id: E.NONE, secret_id: E.TOPIC_AUTHORIZATION_FAILED}
        assert list(broker.broker.share_partition_manager.sessions.get("sg", a).partitions) == [(open_id, 0)]
        ack = c.call(ACK, 1, group_id="sg", member_id=a, share_session_epoch=1, topics=[ack_req.AcknowledgeTopic(
            topic_id=secret_id, partitions=[ack_req.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
                ack_req.AcknowledgementBatch(first_offset=0, last_offset=0, acknowledge_types=[1])])])])
        assert ack.responses[0].partitions[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
