"""Produce requests whose appends the leader writes off its event loop
(``storage/pending_appends.py``) replicate like any other: followers fetch only what the
leader wrote and settled, acks=all is answered once the ISR has the records, and every
replica ends with the same bytes.

Three brokers, one partition led by the controller, pipelined requests of ~300 KB batches
(above ``OFF_LOOP_APPEND_BYTES``) with acks=1 and acks=all.
"""

from __future__ import annotations

import pytest

from odradek.client import AdminClient, NewTopic
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.replication.partition import OFF_LOOP_APPEND_BYTES
from tests.server.cluster.broker_node import log_batches
from tests.server.cluster.harness import wait_until
from tests.server.wire import WireClient, produce_body, simple_batch

pytestmark = pytest.mark.timeout(120)

TOPIC = "written-off-loop"
RECORD = 1000
REQUESTS = 6


def big_batch(tag: bytes) -> bytes:
    count = OFF_LOOP_APPEND_BYTES // RECORD + 20
    return simple_batch([tag.ljust(RECORD, b".") for _ in range(count)])


def test_off_loop_appends_replicate_byte_for_byte(make_cluster):
    cluster = make_cluster().start([1, 2, 3])
    leader = cluster.controller_id()
    followers = [b for b in (1, 2, 3) if b != leader]
    with AdminClient(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, replica_assignment={0: [leader, *followers]})])
    cluster.wait_for_isr(TOPIC, 0, [1, 2, 3])
    client = WireClient(cluster[leader].bootstrap, timeout=30)
    try:
        for acks in (1, -1):
            frames = [client.frame("Produce", 9, produce_body(TOPIC, 0, big_batch(b"%d-%d" % (acks, k)), acks=acks))
                      for k in range(REQUESTS)]
            client.send_raw(b"".join(frames))
            bases = []
            for _ in range(REQUESTS):
                _, body = client.response("Produce", 9)
                answer = body.responses[0].partition_responses[0]
                assert answer.error_code == ErrorCode.NONE
                bases.append(answer.base_offset)
            assert bases == sorted(bases) and len(set(bases)) == REQUESTS
    finally:
        client.close()
    expected = cluster[leader].partition_log(TOPIC, 0)
    assert len(log_batches(expected)) == 2 * REQUESTS
    for follower in followers:
        wait_until(lambda f=follower: cluster[f].partition_log(TOPIC, 0) == expected, 30,
                   f"broker {follower}'s copy of the leader's log")
