"""Kafka 4.2's share-group wire (KIP-932), as ``tools/protocol_supplement.py`` generates it.

The frames here are written byte by byte in the order librdkafka 2.15 writes and reads them
(``rd_kafka_ShareGroupHeartbeatRequest`` in ``rdkafka_request.c``; ``rd_kafka_ShareFetchRequest``
and ``rd_kafka_share_fetch_reply_handle`` in ``rdkafka_fetcher.c``): what odradek's broker
must read and write for the share consumer. Every message at every version also round-trips
in ``test_roundtrip.py`` (its field table comes from the same supplement).
"""

from __future__ import annotations

import struct
import uuid

import pytest

from odradek.protocol import codec
from odradek.protocol.generated import APIS, ApiKey
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated import share_fetch_response as sfr
from odradek.protocol.generated.response_header import ResponseHeader

TOPIC = uuid.UUID("0123456789abcdef0123456789abcdef")


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def cstr(s: str | None) -> bytes:
    """A compact (nullable) string: unsigned varint length + 1 (0 for null), then UTF-8."""
    if s is None:
        return b"\x00"
    data = s.encode()
    assert len(data) < 127
    return bytes([len(data) + 1]) + data


def carr(n: int) -> bytes:
    """A compact array's length: n + 1 as an unsigned varint (n < 127 here)."""
    return bytes([n + 1])


NO_TAGS = b"\x00"


def request_header_v2(api_key: int, version: int, correlation_id: int, client_id: str) -> bytes:
    """Request header v2: api key, version, correlation id, a classic int16-length client id,
    an empty tag section."""
    return i16(api_key) + i16(version) + i32(correlation_id) + i16(len(client_id)) + client_id.encode() + NO_TAGS


def test_share_group_heartbeat_v1_request_as_librdkafka_writes_it():
    """GroupId, MemberId, MemberEpoch, RackId (null), SubscribedTopicNames (librdkafka writes
    its subscription back to front), then the body's empty tag section."""
    frame = (
        request_header_v2(76, 1, 7, "rdkafka")
        + cstr("sg") + cstr("member-1") + i32(0) + cstr(None)
        + carr(2) + cstr("t2") + cstr("t1")
        + NO_TAGS
    )
    header, body = codec.decode_request(frame)
    assert (header.request_api_key, header.request_api_version, header.correlation_id) == (76, 1, 7)
    assert (body.group_id, body.member_id, body.member_epoch, body.rack_id) == ("sg", "member-1", 0, None)
    assert body.subscribed_topic_names == ["t2", "t1"]
    assert codec.encode_request(header, body) == frame


def test_share_group_heartbeat_v1_null_subscription_means_unchanged():
    frame = request_header_v2(76, 1, 8, "c") + cstr("sg") + cstr("m") + i32(3) + cstr("r1") + b"\x00" + NO_TAGS
    header, body = codec.decode_request(frame)
    assert (body.member_epoch, body.rack_id, body.subscribed_topic_names) == (3, "r1", None)
    assert codec.encode_request(header, body) == frame


def share_fetch_v1_frame() -> bytes:
    """One topic: partition 0 newly added (no acknowledgements), then partition 1 with one
    Accept batch 10-12, as two FetchTopic entries of the same topic (librdkafka writes its
    added partitions and its acknowledgements as separate runs); nothing forgotten."""
    return (
        request_header_v2(78, 1, 9, "rdkafka")
        + cstr("sg") + cstr("member-1")
        + i32(0) + i32(500) + i32(1) + i32(52428800) + i32(500) + i32(500)
        + carr(2)
        + TOPIC.bytes + carr(1) + i32(0) + carr(0) + NO_TAGS + NO_TAGS
        + TOPIC.bytes + carr(1) + i32(1)
        + carr(1) + i64(10) + i64(12) + carr(1) + i8(1) + NO_TAGS
        + NO_TAGS + NO_TAGS
        + carr(0)
        + NO_TAGS
    )


def test_share_fetch_v1_request_as_librdkafka_writes_it():
    """ShareSessionEpoch, MaxWaitMs, MinBytes, MaxBytes, MaxRecords, BatchSize; partitions carry
    no PartitionMaxBytes from v1 on."""
    frame = share_fetch_v1_frame()
    header, body = codec.decode_request(frame)
    assert (header.request_api_key, header.request_api_version) == (78, 1)
    assert (body.group_id, body.member_id, body.share_session_epoch) == ("sg", "member-1", 0)
    assert (body.max_wait_ms, body.min_bytes, body.max_bytes) == (500, 1, 52428800)
    assert (body.max_records, body.batch_size) == (500, 500)
    first, second = body.topics
    assert first.topic_id == second.topic_id == TOPIC
    assert [(p.partition_index, p.acknowledgement_batches) for p in first.partitions] == [(0, [])]
    (batch,) = second.partitions[0].acknowledgement_batches
    assert (batch.first_offset, batch.last_offset, batch.acknowledge_types) == (10, 12, [1])
    assert body.forgotten_topics_data == []
    assert codec.encode_request(header, body) == frame


def test_share_fetch_v2_adds_acquire_mode_and_renew_flag_after_batch_size():
    header, body = codec.decode_request(share_fetch_v1_frame())
    header.request_api_version = 2
    body.share_acquire_mode, body.is_renew_ack = 1, True
    v2 = codec.encode_request(header, body)
    v1 = share_fetch_v1_frame()
    at = v1.index(i32(500) + i32(500) + carr(2)) + 8  # after MaxRecords and BatchSize
    assert v2 == v1[:2] + i16(2) + v1[4:at] + i8(1) + b"\x01" + v1[at:]


def test_share_fetch_v1_response_in_the_order_librdkafka_reads_it():
    """ThrottleTimeMs, ErrorCode, ErrorMessage, AcquisitionLockTimeoutMs, then per topic and
    partition: index, error, message, acknowledge error, message, CurrentLeader, Records,
    AcquiredRecords; then NodeEndpoints."""
    records = b"\x01\x02\x03"
    body = sfr.ShareFetchResponse(
        throttle_time_ms=0, error_code=0, error_message=None, acquisition_lock_timeout_ms=30000,
        responses=[sfr.ShareFetchableTopicResponse(topic_id=TOPIC, partitions=[sfr.PartitionData(
            partition_index=1, error_code=0, error_message=None, acknowledge_error_code=0,
            acknowledge_error_message=None,
            current_leader=sfr.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1), records=records,
            acquired_records=[sfr.AcquiredRecords(first_offset=10, last_offset=12, delivery_count=1)])])],
        node_endpoints=[],
    )
    expected = (
        i32(5) + NO_TAGS  # response header v1
        + i32(0) + i16(0) + cstr(None) + i32(30000)
        + carr(1) + TOPIC.bytes + carr(1)
        + i32(1) + i16(0) + cstr(None) + i16(0) + cstr(None)
        + i32(-1) + i32(-1) + NO_TAGS
        + bytes([len(records) + 1]) + records
        + carr(1) + i64(10) + i64(12) + i16(1) + NO_TAGS
        + NO_TAGS + NO_TAGS
        + carr(0)
        + NO_TAGS
    )
    assert codec.encode_response(78, 1, ResponseHeader(correlation_id=5), body) == expected
    _, decoded = codec.decode_response(78, 1, expected)
    assert bytes(decoded.responses[0].partitions[0].records) == records
    assert decoded.acquisition_lock_timeout_ms == 30000


# Kafka 4.2's ranges (request validVersions) for every share-group API.
KAFKA_4_2_RANGES = {
    ApiKey.SHARE_GROUP_HEARTBEAT: (1, 1), ApiKey.SHARE_GROUP_DESCRIBE: (1, 1),
    ApiKey.SHARE_FETCH: (1, 2), ApiKey.SHARE_ACKNOWLEDGE: (1, 2),
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: (0, 0), ApiKey.READ_SHARE_GROUP_STATE: (0, 0),
    ApiKey.WRITE_SHARE_GROUP_STATE: (0, 1), ApiKey.DELETE_SHARE_GROUP_STATE: (0, 0),
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: (0, 1), ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (0, 0), ApiKey.DELETE_SHARE_GROUP_OFFSETS: (0, 0),
}


@pytest.mark.parametrize("api_key", list(KAFKA_4_2_RANGES), ids=[k.name for k in KAFKA_4_2_RANGES])
def test_share_group_api_versions_are_kafka_4_2s(api_key):
    assert APIS[api_key][3:5] == KAFKA_4_2_RANGES[api_key]
    for kind in (codec.request_module(api_key), codec.response_module(api_key)):
        assert kind.VALID_VERSIONS == KAFKA_4_2_RANGES[api_key]


def test_early_access_share_fetch_v0_is_refused():
    """Kafka 4.1 removed v0 of the client share APIs; a v0 frame is an unsupported version."""
    frame = request_header_v2(78, 0, 1, "c") + cstr("sg") + cstr("m") + i32(0) * 4 + carr(0) + carr(0) + NO_TAGS
    with pytest.raises(codec.UnsupportedVersionError):
        codec.decode_request(frame)


@pytest.mark.parametrize("name,record_type", [
    ("ShareSnapshotKey", 0), ("ShareUpdateKey", 1),
    ("ShareGroupMemberMetadataKey", 10), ("ShareGroupMetadataKey", 11),
    ("ShareGroupTargetAssignmentMetadataKey", 12), ("ShareGroupTargetAssignmentMemberKey", 13),
    ("ShareGroupCurrentMemberAssignmentKey", 14), ("ShareGroupStatePartitionMetadataKey", 15),
])
def test_record_keys_carry_kafkas_record_type_as_their_version(name, record_type):
    assert codec.module(name).VALID_VERSIONS == (record_type, record_type)


def test_share_update_value_delivery_complete_count_is_tagged():
    """KIP-1226 (Kafka 4.2): tag 0, left out at its default -1 so 4.1's readers see nothing new."""
    from odradek.protocol.generated import share_update_value as suv
    from odradek.protocol.primitives import EncodeBuffer

    def encoded(value) -> bytes:
        out = EncodeBuffer()
        suv.WRITERS[0](value, out)
        return out.to_bytes()

    plain = suv.ShareUpdateValue(snapshot_epoch=1, leader_epoch=2, start_offset=3, state_batches=[])
    assert encoded(plain) == i32(1) + i32(2) + i64(3) + carr(0) + NO_TAGS
    counted = suv.ShareUpdateValue(snapshot_epoch=1, leader_epoch=2, start_offset=3,
                                   delivery_complete_count=4, state_batches=[])
    assert encoded(counted) == i32(1) + i32(2) + i64(3) + carr(0) + b"\x01\x00\x04" + i32(4)


def test_share_error_codes():
    assert (ErrorCode.INVALID_RECORD_STATE, ErrorCode.SHARE_SESSION_NOT_FOUND,
            ErrorCode.INVALID_SHARE_SESSION_EPOCH, ErrorCode.FENCED_STATE_EPOCH,
            ErrorCode.SHARE_SESSION_LIMIT_REACHED) == (121, 122, 123, 124, 133)
