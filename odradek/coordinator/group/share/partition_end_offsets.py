"""Partition end offsets for share-partition lag (Kafka 4.2's PartitionMetadataClient
``listLatestOffsets``, which GroupCoordinatorService.describeShareGroupOffsets calls).

``latest_offsets(broker, partitions)`` answers ``{(topic, partition): (error, offset)}`` for
each asked partition: the high watermark (ListOffsets LATEST_TIMESTAMP at read_uncommitted:
the offset of the next record to be produced). Where odradek's group coordinator can reach it:

- a partition this broker leads: its own high watermark (``Broker.leader_partition``);
- another broker's: ListOffsets (replica id -1, as a consumer) to its leader in the metadata
  image over the inter-broker connections (``broker.inter_broker_connections``,
  ``coordinator/inter_broker.py``), one
  request per leader;
- no leader, or the request failed: that partition's error (LEADER_NOT_AVAILABLE,
  NETWORK_EXCEPTION, or the leader's answer).
"""

from __future__ import annotations

import logging
from collections import defaultdict

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.generated import list_offsets_request as lreq
from odradek.protocol.generated.error_codes import ErrorCode as E

log = logging.getLogger("odradek.coordinator.group")
LATEST_TIMESTAMP = -1
CONSUMER_REPLICA_ID = -1
READ_UNCOMMITTED = 0
REQUEST_TIMEOUT_S = 30.0

Answer = dict[tuple[str, int], tuple[E, int]]


async def latest_offsets(broker, partitions: list[tuple[str, int]]) -> Answer:
    out: Answer = {}
    remote: dict[int, list[tuple[str, int]]] = defaultdict(list)
    image = broker.metadata_image()
    for topic, index in partitions:
        part, error = broker.leader_partition(topic, index)
        if part is not None:
            out[(topic, index)] = (E.NONE, part.high_watermark)
            continue
        leader = image.leader(topic, index)
        if error != E.NOT_LEADER_OR_FOLLOWER or leader is None or leader < 0:
            out[(topic, index)] = (error if error != E.NOT_LEADER_OR_FOLLOWER else E.LEADER_NOT_AVAILABLE, -1)
        else:
            remote[leader].append((topic, index))
    for leader, asked in remote.items():
        out.update(await _list_offsets(broker, leader, asked))
    return out


async def _list_offsets(broker, leader: int, asked: list[tuple[str, int]]) -> Answer:
    topics: dict[str, list[lreq.ListOffsetsPartition]] = defaultdict(list)
    for topic, index in asked:
        topics[topic].append(lreq.ListOffsetsPartition(partition_index=index, timestamp=LATEST_TIMESTAMP))
    request = lreq.ListOffsetsRequest(replica_id=CONSUMER_REPLICA_ID, isolation_level=READ_UNCOMMITTED,
                                      topics=[lreq.ListOffsetsTopic(name=t, partitions=ps) for t, ps in topics.items()])
    connections = broker.inter_broker_connections("share-lag", REQUEST_TIMEOUT_S)
    try:
        conn = await connections.get(leader)
        theirs = conn.broker_versions.get(ApiKey.LIST_OFFSETS)
        version = min(theirs[1], 7) if theirs else 1
        response = await conn.send(ApiKey.LIST_OFFSETS, request, version=version, timeout=REQUEST_TIMEOUT_S)
    except Exception as e:  # noqa: BLE001 - each asked partition answers the failure
        log.debug("ListOffsets to broker %d for share lag failed: %s", leader, e)
        return {tp: (E.NETWORK_EXCEPTION, -1) for tp in asked}
    finally:
        connections.close()
    out: Answer = {tp: (E.UNKNOWN_SERVER_ERROR, -1) for tp in asked}
    for t in response.topics:
        for p in t.partitions:
            out[(t.name, p.partition_index)] = (E(p.error_code), p.offset)
    return out
