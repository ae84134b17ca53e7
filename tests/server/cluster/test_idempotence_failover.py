"""An idempotent producer's retry is recognised by the new leader after a failover.

Kafka keeps each producer's last sequence numbers in every replica (followers rebuild them
from the batches they copy), so a batch the old leader appended and acknowledged, sent again
to the new leader with the same producer id, epoch and sequence (a producer that missed the
acknowledgement), is answered as a duplicate: no error, the original offset, nothing appended.
A batch that skips sequence numbers is refused (OUT_OF_ORDER_SEQUENCE_NUMBER).

Driven byte by byte (tests/server/wire.py) so the retry is certain, not left to a client.
"""

from __future__ import annotations

import time

import pytest

from odradek.protocol import codec
from odradek.records.builder import BatchSpec, build_batch
from odradek.records.record import Record
from tests.server.cluster.cluster_clients import create_topic
from tests.server.cluster.harness import SESSION_TIMEOUT_MS
from tests.server.wire import WireClient, produce_body

pytestmark = pytest.mark.timeout(120)

TOPIC = "exactly-once"
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
# UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER: the broker's role
# comes with the controller's LeaderAndIsr, a moment after the state znode names it.
NOT_LEADER_YET = (3, 5, 6)


def batch(pid: int, epoch: int, seq: int, values: list[bytes]) -> bytes:
    spec = BatchSpec(producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    return build_batch([Record(offset=i, timestamp=1_700_000_000_000, key=None, value=v, headers=())
                        for i, v in enumerate(values)], spec)


def produce(bootstrap: str, records: bytes) -> tuple[int, int]:
    """``(error_code, base_offset)`` of an acks=all Produce v8 of ``records`` to partition 0,
    asked again for a few seconds while the broker is not (yet) the leader."""
    deadline = time.monotonic() + 15
    while True:
        client = WireClient(bootstrap)
        try:
            _, response = client.request("Produce", 8, produce_body(TOPIC, 0, records, acks=-1))
        finally:
            client.close()
        part = response.responses[0].partition_responses[0]
        if part.error_code not in NOT_LEADER_YET or time.monotonic() > deadline:
            return part.error_code, part.base_offset
        time.sleep(0.2)


def test_a_retried_batch_is_a_duplicate_on_the_new_leader(make_cluster):
    cluster = make_cluster().start([1, 2, 3])
    create_topic(cluster.bootstrap, TOPIC, 1, 3, {"min.insync.replicas": "2"})
    cluster.wait_topic_ready(TOPIC, 1)
    cluster.wait_for_isr(TOPIC, 0, [1, 2, 3])
    leader = cluster.leader(TOPIC, 0)

    client = WireClient(cluster[leader].bootstrap)
    try:
        m = codec.module("InitProducerIdRequest")
        _, init = client.request("InitProducerId", 1, m.MESSAGE(transactional_id=None, transaction_timeout_ms=60000))
    finally:
        client.close()
    assert init.error_code == 0
    pid, epoch = init.producer_id, init.producer_epoch

    first = batch(pid, epoch, 0, [b"a0", b"a1", b"a2"])
    second = batch(pid, epoch, 3, [b"b0", b"b1"])
    assert produce(cluster[leader].bootstrap, first) == (0, 0)
    assert produce(cluster[leader].bootstrap, second) == (0, 3)
    cluster.wait_replicas_identical(TOPIC, 0, [1, 2, 3])

    cluster[leader].kill()
    new_leader = cluster.wait_for_leader(TOPIC, 0, other_than=leader, timeout=SESSION_TIMEOUT_MS / 1000 + 10)
    address = cluster[new_leader].bootstrap
    end = cluster[new_leader].log_end_offset(TOPIC, 0)

    # Both earlier batches again: duplicates, answered with their first offsets.
    assert produce(address, second) == (0, 3)
    assert produce(address, first) == (0, 0)
    assert cluster[new_leader].log_end_offset(TOPIC, 0) == end == 5
    # A gap in the sequence is refused; the next sequence is appended after the rest.
    assert produce(address, batch(pid, epoch, 7, [b"gap"]))[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce(address, batch(pid, epoch, 5, [b"c0"])) == (0, 5)


def init_producer_id(bootstrap: str) -> int:
    client = WireClient(bootstrap)
    try:
        m = codec.module("InitProducerIdRequest")
        _, init = client.request("InitProducerId", 1, m.MESSAGE(transactional_id=None, transaction_timeout_ms=60000))
    finally:
        client.close()
    assert init.error_code == 0
    return init.producer_id


def test_producer_ids_are_unique_across_brokers(make_cluster):
    """Each broker takes its own block of producer ids from ``/latest_producer_id_block``
    (a conditional update, so two brokers never get the same block)."""
    cluster = make_cluster().start([1, 2, 3])
    ids = {b: [init_producer_id(cluster[b].bootstrap) for _ in range(2)] for b in (1, 2, 3)}
    every = [pid for pids in ids.values() for pid in pids]
    assert len(set(every)) == len(every), ids
    blocks = {b: {pid // 1000 for pid in pids} for b, pids in ids.items()}
    assert all(len(v) == 1 for v in blocks.values()) and len(set().union(*blocks.values())) == 3, ids
    latest = cluster.read_json("/latest_producer_id_block")
    assert int(latest["block_end"]) >= max(every), latest
