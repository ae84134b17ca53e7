"""Fetch waits and bounds, seen through raw Fetch frames.

- ``min_bytes``: a fetch finding fewer bytes than it asks for waits (up to ``max_wait_ms``)
  until appends bring enough, across several appends, and only then answers;
- a consumer's fetch is bounded by the high watermark: when it lags the log end (as followers
  make it do), no batch holding an offset at or above it is served, even one straddling it.

Whether a fetch is waiting is read from the broker (its parked waiter), never guessed from
elapsed time.
"""

from __future__ import annotations

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.records.reader import iter_batches
from tests.server.clients import wait_until
from tests.server.test_bad_input import create_topic
from tests.server.wire import WireClient, fetch_body, produce_body, simple_batch


def _produce(client: WireClient, topic: str, values: list[bytes]) -> int:
    """Produce one batch; return its size in bytes."""
    batch = simple_batch(values)
    _, resp = client.request("Produce", 9, produce_body(topic, 0, batch))
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    return len(batch)


def _values(part) -> list[bytes]:
    return [r.value for b in iter_batches(part.records) for r in b.records()]


def _parked(broker, topic: str) -> bool:
    """Whether a fetch is waiting for appends to ``topic``-0 now."""
    waiters = broker.broker.replica_manager._waiters
    return broker.call(lambda: any(not f.done() for f in waiters.get((topic, 0), ())))


def test_fetch_waits_until_min_bytes_have_arrived(broker):
    c = WireClient(broker.bootstrap)
    producer = WireClient(broker.bootstrap)
    create_topic(producer, "minbytes")
    first = _produce(producer, "minbytes", [b"a"])
    # Asks for more than the first batch and the next together: it must wait through the
    # next append and answer only after the third.
    second_size = len(simple_batch([b"b"]))
    body = fetch_body("minbytes", 0, 0, max_wait_ms=60_000, min_bytes=first + second_size + 1)
    c.send_raw(c.frame("Fetch", 11, body))
    wait_until(lambda: _parked(broker, "minbytes"), what="the fetch waiting for more bytes")
    _produce(producer, "minbytes", [b"b"])
    wait_until(lambda: _parked(broker, "minbytes"), what="the fetch still waiting after one append")
    _produce(producer, "minbytes", [b"c"])
    c.sock.settimeout(30)
    _, resp = c.response("Fetch", 11)
    part = resp.responses[0].partitions[0]
    assert part.error_code == ErrorCode.NONE
    assert _values(part) == [b"a", b"b", b"c"]
    c.close()
    producer.close()


def test_fetch_short_of_min_bytes_answers_what_it_has_at_max_wait(broker):
    c = WireClient(broker.bootstrap)
    create_topic(c, "maxwait")
    size = _produce(c, "maxwait", [b"only"])
    _, resp = c.request("Fetch", 11, fetch_body("maxwait", 0, 0, max_wait_ms=50, min_bytes=size * 100))
    part = resp.responses[0].partitions[0]
    assert part.error_code == ErrorCode.NONE and _values(part) == [b"only"]
    c.close()


def test_consumer_fetch_stops_below_a_lagging_high_watermark(broker):
    c = WireClient(broker.bootstrap)
    create_topic(c, "lagging")
    for i in range(4):  # batches [0, 1], [2, 3], [4, 5], [6, 7]
        _produce(c, "lagging", [b"%d" % (2 * i), b"%d" % (2 * i + 1)])
    part = broker.broker.replica_manager.get("lagging", 0)
    # A follower that has only offsets below 5: the high watermark lags the log end and
    # falls inside the batch [4, 5].
    broker.call(lambda: setattr(part, "high_watermark", 5))
    _, resp = c.request("Fetch", 11, fetch_body("lagging", 0, 0))
    answer = resp.responses[0].partitions[0]
    assert answer.error_code == ErrorCode.NONE and answer.high_watermark == 5
    batches = list(iter_batches(answer.records))
    assert [(b.base_offset, b.last_offset) for b in batches] == [(0, 1), (2, 3)]
    for offset in (4, 5, 6):  # at or past the straddling batch: nothing yet, no error
        _, resp = c.request("Fetch", 11, fetch_body("lagging", 0, offset))
        answer = resp.responses[0].partitions[0]
        assert answer.error_code == ErrorCode.NONE and not answer.records, offset
    c.close()
