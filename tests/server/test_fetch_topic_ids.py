"""Fetch v13+ names topics by id: known ids are read, unknown ones (and the zero id) are
UNKNOWN_TOPIC_ID for each partition asked for."""

from __future__ import annotations

import uuid

from odradek.protocol import codec
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.records.reader import iter_batches
from tests.server.test_bad_input import create_topic
from tests.server.wire import WireClient, produce_body, simple_batch

F = codec.module("FetchRequest")
MR = codec.module("MetadataRequest")
UNKNOWN = uuid.UUID("6b1f2c1e-0000-4000-8000-0000000f0f0f")


def fetch_by_id(c: WireClient, version: int, *topics: tuple[uuid.UUID, list[int]]):
    body = F.MESSAGE(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, topics=[
        F.FetchTopic(topic_id=tid, partitions=[F.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=1 << 20)
                                               for p in parts]) for tid, parts in topics])
    _, resp = c.request("Fetch", version, body)
    return resp


def test_fetch_by_topic_id(shared_broker):
    c = WireClient(shared_broker.bootstrap)
    create_topic(c, "fetch-by-id")
    c.request("Produce", 9, produce_body("fetch-by-id", 0, simple_batch([b"by id"])))
    _, meta = c.request("Metadata", 12, MR.MESSAGE(topics=[MR.MetadataRequestTopic(name="fetch-by-id")]))
    tid = meta.topics[0].topic_id
    for version in (13, 17):
        resp = fetch_by_id(c, version, (tid, [0, -1]), (UNKNOWN, [0]), (uuid.UUID(int=0), [3]))
        assert [t.topic_id for t in resp.responses] == [tid, UNKNOWN, uuid.UUID(int=0)]
        known, unknown, zero = resp.responses
        assert [p.error_code for p in known.partitions] == [ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        assert [r.value for b in iter_batches(known.partitions[0].records) for r in b.records()] == [b"by id"]
        assert [(p.partition_index, p.error_code) for p in unknown.partitions + zero.partitions] == [
            (0, ErrorCode.UNKNOWN_TOPIC_ID), (3, ErrorCode.UNKNOWN_TOPIC_ID)]
