"""odradek's consumer fetches through KIP-227 fetch sessions (``client/fetcher.py``, with the
handler of ``protocol/fetch_session_handler.py``) against a real broker
(``server/fetch_context.py``, ``server/fetch_session_cache.py``).

Every Fetch the client sends is recorded with its answer (``wire``) and checked against
Kafka's rules (``check_session_rules``): a full fetch at epoch 0, then the epochs in order, and
an incremental fetch carries only partitions new to the session or whose fetch offset changed.
The broker's cache is read too: it holds the consumer's session at the epoch the client
reached, with the consumer's positions as fetch offsets. And no record is lost or read twice
across assignment changes, a rebalance, an evicted session and a broker restart.
"""

from __future__ import annotations

import asyncio

import pytest

from odradek.client import AsyncConsumer, AsyncProducer, TopicPartition
from odradek.client.connection import BrokerConnection
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.fetch_response import FetchableTopicResponse, FetchResponse, PartitionData
from odradek.testing.broker import InProcessBroker, free_port
from odradek.testing.broker import test_config as broker_config
from tests.client.fake_broker import TOPIC_IDS, FakeBroker, metadata_response
from tests.client.helpers import create_topic, run

FAST = {"auto_offset_reset": "earliest", "fetch_max_wait_ms": 100}


class Fetch:
    """One Fetch on the wire: the request body, the client that sent it, the answer's future."""

    def __init__(self, client_id: str, body, future: asyncio.Future) -> None:
        self.client_id, self.body, self.future = client_id, body, future

    @property
    def key(self) -> tuple[int, int]:
        return self.body.session_id, self.body.session_epoch

    @property
    def partitions(self) -> dict[tuple[str, int], int]:
        """(topic, partition) -> fetch offset, of the partitions sent."""
        return {(t.topic, p.partition): p.fetch_offset for t in self.body.topics for p in t.partitions}

    @property
    def forgotten(self) -> set[tuple[str, int]]:
        return {(f.topic, p) for f in self.body.forgotten_topics_data for p in f.partitions}

    @property
    def answer(self):
        """The response, or None when the request failed (or has no answer yet)."""
        f = self.future
        return f.result() if f.done() and not f.cancelled() and f.exception() is None else None


@pytest.fixture
def wire(monkeypatch) -> list[Fetch]:
    sent: list[Fetch] = []
    real_send = BrokerConnection.send

    def recording_send(self, api_key, body, **kw):
        future = real_send(self, api_key, body, **kw)
        if api_key == ApiKey.FETCH:
            sent.append(Fetch(self.client_id, body, future))
        return future

    monkeypatch.setattr(BrokerConnection, "send", recording_send)
    return sent


def check_session_rules(fetches: list[Fetch]) -> list[int]:
    """Kafka's rules, request by request, for one client and one broker; the ids of the
    sessions made, in order. A full fetch (epoch 0) starts a session; an answered one gives
    its id, and the next fetch is that id at epoch 1, then 2, ... ; an incremental fetch sends
    a partition only if the session lacks it or its fetch offset moved, forgets only partitions
    the session has, and its answer names only partitions of the session."""
    made, session, epoch, held, names = [], 0, 0, {}, {}
    for f in fetches:
        names.update((t.topic_id, t.topic) for t in f.body.topics)
        sid, e = f.key
        if e == -1:  # sessionless, or the close of a session
            assert not f.partitions or sid == 0
            session, epoch, held = 0, 0, {}
            continue
        if e == 0:
            held = dict(f.partitions)
        else:
            assert (sid, e) == (session, epoch), f"fetch {f.key} in session {session} at epoch {epoch}"
            for tp, offset in f.partitions.items():
                assert held.get(tp) != offset, f"{tp} at unchanged offset {offset} sent again"
            assert f.forgotten <= held.keys() and not f.forgotten & f.partitions.keys()
            held.update(f.partitions)
            for tp in f.forgotten:
                del held[tp]
        answer = f.answer
        if answer is None or answer.error_code != ErrorCode.NONE:
            session, epoch = (sid, 0) if answer is None or answer.error_code != ErrorCode.FETCH_SESSION_ID_NOT_FOUND \
                else (0, 0)
            continue
        answered = {(t.topic or names[t.topic_id], p.partition_index) for t in answer.responses for p in t.partitions}
        assert answered <= held.keys(), f"answered {answered}, outside the session's {set(held)}"
        if answer.session_id == 0:
            session, epoch = 0, 0
        elif e == 0:
            session, epoch = answer.session_id, 1
            made.append(session)
        else:
            epoch += 1
    return made


def broker_sessions(broker: InProcessBroker, names: dict | None = None) -> dict[int, tuple[int, dict]]:
    """The broker's sessions: id -> (next epoch, {(topic, partition): fetch offset}); a session
    by topic id (Fetch v13+) names its topics through ``names`` (topic id -> name)."""
    names = names or {}

    def read():
        cache = getattr(broker.broker, "fetch_sessions", None)
        return {} if cache is None else {sid: (s.epoch, {(c.topic or names.get(c.topic_id), c.partition): c.fetch_offset
                                                        for c in s.partitions.values()})
                                          for sid, s in cache.sessions.items()}
    return broker.call(read)


async def produce(bootstrap: str, topic: str, counts: dict[int, int], start: int = 0) -> list[tuple]:
    """``counts[p]`` records into partition ``p``, values ``p-i`` from ``i = start``; the
    (partition, value) pairs."""
    sent = []
    async with AsyncProducer(bootstrap, linger_ms=1) as producer:
        for p, n in counts.items():
            for i in range(start, start + n):
                producer.send(topic, b"%d-%d" % (p, i), partition=p)
                sent.append((p, b"%d-%d" % (p, i)))
        await producer.flush()
    return sent


async def read(consumer: AsyncConsumer, count: int, seen: list) -> None:
    """Poll until ``seen`` holds ``count`` (partition, value) pairs."""
    for _ in range(200):
        if len(seen) >= count:
            return
        for tp, records in (await consumer.poll(1000)).items():
            seen.extend((tp.partition, r.value) for r in records)
    raise AssertionError(f"read {len(seen)} of {count} records")


async def poll_until(consumer: AsyncConsumer, seen: list, done) -> None:
    """Poll, collecting into ``seen``, until ``done()``."""
    for _ in range(200):
        if done():
            return
        for tp, records in (await consumer.poll(50)).items():
            seen.extend((tp.partition, r.value) for r in records)
    raise AssertionError("condition not reached")


async def settle(consumer: AsyncConsumer, broker: InProcessBroker, session_id: int) -> dict:
    """Poll (reading nothing) until the broker's session holds the consumer's positions;
    the session's partitions and fetch offsets."""
    for _ in range(100):
        assert await consumer.poll(50) == {}
        positions = {(tp.topic, tp.partition): await consumer.position(tp) for tp in consumer.assignment()}
        names = {consumer.cluster.metadata.topic_id(topic): topic for topic, _ in positions}
        held = broker_sessions(broker, names).get(session_id, (0, None))[1]
        if held == positions:
            return held
    raise AssertionError(f"the broker's session {held} never reached the positions {positions}")


def tps(topic: str, *partitions: int) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in partitions]


def test_the_consumer_reads_through_one_incremental_session_and_closes_it(broker, topic_name, wire):
    async def main():
        await create_topic(broker.bootstrap, topic_name, 3)
        sent = await produce(broker.bootstrap, topic_name, {0: 4, 1: 4, 2: 4})
        async with AsyncConsumer(broker.bootstrap, **FAST) as consumer:
            consumer.assign(tps(topic_name, 0, 1, 2))
            seen = []
            await read(consumer, 12, seen)
            for round in range(3):  # only partition 1 moves
                sent += await produce(broker.bootstrap, topic_name, {1: 2}, start=4 + 2 * round)
                await read(consumer, len(sent), seen)
            [session] = check_session_rules(wire)
            held = await settle(consumer, broker, session)
            assert held == {(topic_name, 0): 4, (topic_name, 1): 10, (topic_name, 2): 4}
            assert broker_sessions(broker)[session][0] >= 4  # the session's epochs grew on the broker
        assert sorted(seen) == sorted(sent)
        first, *later = wire[:-1]
        assert (first.key, first.answer.session_id) == ((0, 0), session)
        assert set(first.partitions) == {(topic_name, p) for p in range(3)}
        assert [f.key for f in later] == [(session, e) for e in range(1, len(later) + 1)]
        # after the first round, what moved is partition 1 alone
        assert {tp for f in later[1:] for tp in f.partitions} == {(topic_name, 1)}
        closing = wire[-1]
        assert (closing.key, closing.partitions, closing.forgotten) == ((session, -1), {}, set())
        assert session not in broker_sessions(broker)

    run(main())


def test_partitions_assigned_and_unassigned_mid_session(broker, topic_name, wire):
    async def main():
        await create_topic(broker.bootstrap, topic_name, 3)
        sent = await produce(broker.bootstrap, topic_name, {0: 3, 1: 3, 2: 3})
        async with AsyncConsumer(broker.bootstrap, **FAST) as consumer:
            consumer.assign(tps(topic_name, 0, 1))
            seen = []
            await read(consumer, 6, seen)
            [session] = check_session_rules(wire)
            consumer.assign(tps(topic_name, 1, 2))
            sent += await produce(broker.bootstrap, topic_name, {0: 2, 1: 2, 2: 2}, start=3)
            await read(consumer, 6 + 2 + 5, seen)
            assert await settle(consumer, broker, session) == {(topic_name, 1): 5, (topic_name, 2): 5}
            assert check_session_rules(wire) == [session]  # one session all along
            # unsubscribe sends nothing (as Kafka's consumer): the session stays until close
            await consumer.unsubscribe()
            unsubscribed = len(wire)
            assert await consumer.poll(200) == {}
            assert session in broker_sessions(broker)
        assert [f.key for f in wire[unsubscribed:]] == [(session, -1)]
        assert session not in broker_sessions(broker)
        assert any(f.key[0] == session and (topic_name, 0) in f.forgotten for f in wire)
        assert any(f.key[0] == session and f.key[1] > 0 and f.partitions.get((topic_name, 2)) == 0 for f in wire)
        assert sorted(seen) == sorted(x for x in sent if x[0] != 0 or x[1] in (b"0-0", b"0-1", b"0-2"))

    run(main())


def test_a_group_rebalance_moves_partitions_out_of_the_session(broker, topic_name, wire):
    group = "fs-" + topic_name
    config = {**FAST, "group_id": group, "heartbeat_interval_ms": 100, "metadata_max_age_ms": 1000}

    async def poll_both(consumers, seen, done):
        for _ in range(400):
            if done():
                return
            for batch in await asyncio.gather(*(c.poll(50) for c in consumers)):
                seen.extend((tp.partition, r.value) for tp, records in batch.items() for r in records)
        raise AssertionError("condition not reached")

    async def main():
        await create_topic(broker.bootstrap, topic_name, 4)
        sent = await produce(broker.bootstrap, topic_name, {p: 3 for p in range(4)})
        a = await AsyncConsumer(broker.bootstrap, client_id="a", **config).start()
        b = await AsyncConsumer(broker.bootstrap, client_id="b", **config).start()
        seen = []
        try:
            a.subscribe([topic_name])
            await poll_both([a], seen, lambda: len(seen) >= 12)
            b.subscribe([topic_name])
            await poll_both([a, b], seen, lambda: len(a.assignment()) == len(b.assignment()) == 2)
            sent += await produce(broker.bootstrap, topic_name, {p: 2 for p in range(4)}, start=3)
            await poll_both([a, b], seen, lambda: len(seen) >= len(sent))
            [session] = check_session_rules([f for f in wire if f.client_id == "a"])
            check_session_rules([f for f in wire if f.client_id == "b"])
            # a's one session lost b's partitions (forgotten) and holds a's at a's positions
            await settle(a, broker, session)
            forgot = set().union(*(f.forgotten for f in wire if f.client_id == "a"))
            assert {(tp.topic, tp.partition) for tp in b.assignment()} <= forgot
        finally:
            await a.close()
            await b.close()
        assert sorted(seen) == sorted(sent)

    run(main(), 60)


def test_an_evicted_session_starts_over_with_a_full_fetch(broker, topic_name, wire):
    async def main():
        await create_topic(broker.bootstrap, topic_name, 2)
        sent = await produce(broker.bootstrap, topic_name, {0: 3, 1: 3})
        async with AsyncConsumer(broker.bootstrap, **FAST) as consumer:
            consumer.assign(tps(topic_name, 0, 1))
            seen = []
            await read(consumer, 6, seen)
            [old] = check_session_rules(wire)
            assert broker.call(broker.broker.fetch_sessions.remove, old) is not None
            sent += await produce(broker.bootstrap, topic_name, {0: 2, 1: 2}, start=3)
            await read(consumer, 10, seen)
            await poll_until(consumer, seen, lambda: len(check_session_rules(wire)) == 2)
            old_again, new = check_session_rules(wire)
            assert await settle(consumer, broker, new) == {(topic_name, 0): 5, (topic_name, 1): 5}
        assert sorted(seen) == sorted(sent)
        refused = next(i for i, f in enumerate(wire) if f.answer is not None and f.answer.error_code)
        assert wire[refused].answer.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        restart = wire[refused + 1]
        assert restart.key == (0, 0) and set(restart.partitions) == {(topic_name, 0), (topic_name, 1)}
        assert (old_again, restart.answer.session_id) == (old, new) and new != old

    run(main())


def test_a_broker_restart_starts_a_new_session(tmp_path, topic_name, wire):
    props = broker_config(tmp_path / "data", listeners=f"PLAINTEXT://127.0.0.1:{free_port()}")

    async def main():
        first = InProcessBroker(tmp_path, props).start()
        try:
            await create_topic(first.bootstrap, topic_name, 2)
            sent = await produce(first.bootstrap, topic_name, {0: 3, 1: 3})
            consumer = await AsyncConsumer(first.bootstrap, **FAST).start()
            consumer.assign(tps(topic_name, 0, 1))
            seen = []
            await read(consumer, 6, seen)
            [old] = check_session_rules(wire)
        finally:
            first.stop()
        assert await consumer.poll(200) == {}  # the connection is lost
        with InProcessBroker(tmp_path, props) as second:
            try:
                sent += await produce(second.bootstrap, topic_name, {0: 2, 1: 2}, start=3)
                await read(consumer, 10, seen)
                assert await consumer.poll(200) == {}
                old_again, new = check_session_rules(wire)
                assert await settle(consumer, second, new) == {(topic_name, 0): 5, (topic_name, 1): 5}
            finally:
                await consumer.close()
        assert sorted(seen) == sorted(sent)
        restart = next(f for f in wire if f.key == (old, 0))  # closes the old session, asks a new one
        assert set(restart.partitions) == {(topic_name, 0), (topic_name, 1)}
        assert (old_again, restart.answer.session_id) == (old, new) and new != old

    run(main(), 60)


def test_a_broker_that_keeps_no_session_gets_full_fetches():
    """A scripted broker that answers with session id 0: every fetch stays full at epoch 0;
    and one answering INVALID_FETCH_SESSION_EPOCH makes the next fetch full, closing the
    session (its id at epoch 0)."""
    answers = iter([7, ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0, 0, 9])

    def handler(fake, header, body):
        if header.request_api_key == ApiKey.METADATA:
            return metadata_response([fake], {"t": [1]})
        offset = body.topics[0].partitions[0].fetch_offset if body.topics else None
        what = next(answers, 9)

        async def later():
            await asyncio.sleep(0.02)
            if what == ErrorCode.INVALID_FETCH_SESSION_EPOCH:
                return FetchResponse(error_code=what, session_id=0, responses=[])
            return FetchResponse(session_id=what, responses=[FetchableTopicResponse(
                topic="t", topic_id=TOPIC_IDS["t"], partitions=[PartitionData(
                    partition_index=0, high_watermark=0, last_stable_offset=0, records=None)])]
                if offset is not None else [])
        return later()

    async def main():
        fake = await FakeBroker(1, handler).start()
        try:
            async with AsyncConsumer(fake.bootstrap) as consumer:
                consumer.assign([TopicPartition("t", 0)])
                consumer.seek(TopicPartition("t", 0), 0)
                while len(fake.of(ApiKey.FETCH)) < 7:
                    await consumer.poll(50)
        finally:
            await fake.close()
        return [(f.session_id, f.session_epoch, len(f.topics)) for f in fake.of(ApiKey.FETCH)]

    fetches = run(main())
    # full, makes 7; incremental (nothing changed) refused: full closing 7, the broker keeps
    # no session (0): full again at session 0, which makes 9; incremental from there
    assert fetches[:7] == [(0, 0, 1), (7, 1, 0), (7, 0, 1), (0, 0, 1), (0, 0, 1), (9, 1, 0), (9, 2, 0)]
