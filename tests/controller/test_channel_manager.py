"""`ControllerChannelManager`: in-process delivery to this broker, ordered sends to remote
brokers over a real socket (a fake Kafka server), retry after a dropped connection, queues
dropped with their broker, and StopReplica(delete) outcomes back to the controller."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from odradek.controller import events as ev
from odradek.controller.channel_manager import (
    ControllerChannelManager,
    stop_replica_outcome,
)
from odradek.controller.commands import (
    LeaderAndIsrPartition,
    LeaderAndIsrRequest,
    LiveBroker,
    StopReplicaPartition,
    StopReplicaRequest,
    UpdateMetadataPartition,
    UpdateMetadataRequest,
)
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.leader_and_isr_response import LeaderAndIsrResponse
from odradek.protocol.generated.stop_replica_response import (
    StopReplicaPartitionError,
    StopReplicaResponse,
)
from odradek.protocol.generated.update_metadata_response import UpdateMetadataResponse
from tests.controller.fake_kafka_server import FakeKafkaServer
from tests.controller.service_fakes import FakeBroker, async_wait_until, config, info

TOPIC_ID = uuid.UUID(int=5)


def leader_and_isr(broker_id: int, partition: int = 0) -> LeaderAndIsrRequest:
    p = LeaderAndIsrPartition("t", partition, 1, 1, 3, (1, 2), 4, (1, 2), is_new=True)
    return LeaderAndIsrRequest(broker_id, 1, 1, 77, (p,), (LiveBroker(1, 5, info(1)),),
                               (("t", TOPIC_ID),))


def stop_replica(broker_id: int, delete: bool = True) -> StopReplicaRequest:
    parts = tuple(StopReplicaPartition("t", p, -2, delete) for p in (0, 1))
    return StopReplicaRequest(broker_id, 1, 1, 77, parts)


def answers(key, version, body):
    if key == ApiKey.LEADER_AND_ISR:
        return LeaderAndIsrResponse()
    if key == ApiKey.UPDATE_METADATA:
        return UpdateMetadataResponse()
    return StopReplicaResponse(partition_errors=[
        StopReplicaPartitionError("t", 0, ErrorCode.NONE),
        StopReplicaPartitionError("t", 1, ErrorCode.KAFKA_STORAGE_ERROR),
    ])


RANGES = {ApiKey.LEADER_AND_ISR: (0, 5), ApiKey.UPDATE_METADATA: (0, 7),
          ApiKey.STOP_REPLICA: (0, 3)}


def test_stop_replica_outcome():
    response = StopReplicaResponse(partition_errors=[
        StopReplicaPartitionError("t", 1, ErrorCode.KAFKA_STORAGE_ERROR)])
    outcome = stop_replica_outcome(stop_replica(3), response)
    assert outcome == ev.TopicDeletionStopReplicaResponse(3, (("t", 0),), (("t", 1),))
    failed = stop_replica_outcome(stop_replica(3), StopReplicaResponse(error_code=11))
    assert failed.deleted == () and len(failed.failed) == 2
    assert stop_replica_outcome(stop_replica(3), None).failed == (("t", 0), ("t", 1))


class CountedName(str):
    """A topic name that counts the comparisons made with it."""

    compared = 0

    def __eq__(self, other):
        CountedName.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_stop_replica_outcome_is_linear_in_the_partitions():
    """A deletion's StopReplica names 10,000 partitions: the outcome compares each a few
    times, not with every other (quadratic, it took seconds of the event loop)."""
    n = 400
    parts = tuple(StopReplicaPartition(CountedName("t"), p, -2, True) for p in range(n))
    request = StopReplicaRequest(3, 1, 1, 0, parts)
    CountedName.compared = 0
    outcome = stop_replica_outcome(request, StopReplicaResponse(partition_errors=[
        StopReplicaPartitionError("t", p, ErrorCode.NONE) for p in range(n)]))
    assert len(outcome.deleted) == n and outcome.failed == ()
    assert CountedName.compared < 10 * n


def test_in_process_delivery_to_this_broker():
    broker = FakeBroker(1)
    broker.responses[ApiKey.LEADER_AND_ISR] = lambda ctx, body: LeaderAndIsrResponse()
    events = []

    async def scenario():
        channel = ControllerChannelManager(broker, on_event=events.append)
        channel.start(asyncio.get_running_loop())
        channel.update_brokers({1: LiveBroker(1, 5, info(1))})
        first = channel.send(leader_and_isr(1))
        second = channel.send(stop_replica(1))
        response = await asyncio.wrap_future(first)
        assert isinstance(response, LeaderAndIsrResponse)
        await asyncio.wrap_future(second)
        channel.shutdown()

    asyncio.run(scenario())
    (ctx, body), (ctx2, body2) = broker.dispatched
    assert ctx.api_key == ApiKey.LEADER_AND_ISR and ctx.broker is broker
    assert ctx.api_version == 7 and ctx.connection.listener_name == "PLAINTEXT"
    (topic,) = body.topic_states
    assert topic.topic_name == "t" and topic.topic_id == TOPIC_ID
    assert topic.partition_states[0].partition_epoch == 4
    assert body.broker_epoch == 77
    assert ctx2.api_key == ApiKey.STOP_REPLICA
    # the handler returned None: the whole request counts as failed for deletion
    assert events == [ev.TopicDeletionStopReplicaResponse(1, (), (("t", 0), ("t", 1)))]


def test_remote_sends_in_order_at_negotiated_versions():
    events = []

    async def scenario():
        server = FakeKafkaServer(RANGES, answers)
        port = await server.start()
        broker = FakeBroker(1)
        channel = ControllerChannelManager(broker, on_event=events.append)
        channel.start(asyncio.get_running_loop())
        channel.update_brokers({2: LiveBroker(2, 9, info(2, port))})
        futures = [
            channel.send(leader_and_isr(2)),
            channel.send(UpdateMetadataRequest(2, 1, 1, 9, (), (LiveBroker(2, 9, info(2, port)),))),
            channel.send(stop_replica(2)),
        ]
        for f in futures:
            await asyncio.wrap_future(f)
        channel.shutdown()
        await server.close()
        return server

    server = asyncio.run(scenario())
    assert [(k, v) for k, v, _ in server.received] == [
        (ApiKey.LEADER_AND_ISR, 5), (ApiKey.UPDATE_METADATA, 7), (ApiKey.STOP_REPLICA, 3)]
    lai_body = server.received[0][2]
    assert lai_body.topic_states[0].partition_states[0].leader_epoch == 3
    assert lai_body.live_leaders[0].broker_id == 1
    assert events == [ev.TopicDeletionStopReplicaResponse(2, (("t", 0),), (("t", 1),))]


def test_update_metadata_to_several_brokers_each_with_its_broker_epoch():
    """The body is encoded once for both (`UpdateMetadataBodies`) and each broker decodes
    the same partition states with its own broker epoch."""
    states = (UpdateMetadataPartition("t", 0, 1, 2, 3, (2, 3), 4, (2, 3), ()),)

    async def scenario():
        servers = [FakeKafkaServer(RANGES, answers) for _ in (2, 3)]
        ports = [await s.start() for s in servers]
        channel = ControllerChannelManager(FakeBroker(1))
        channel.start(asyncio.get_running_loop())
        live = {b: LiveBroker(b, 10 * b, info(b, port)) for b, port in zip((2, 3), ports)}
        channel.update_brokers(live)
        futures = [channel.send(UpdateMetadataRequest(b, 1, 1, 10 * b, states, tuple(live.values())))
                   for b in (2, 3)]
        for f in futures:
            await asyncio.wrap_future(f)
        channel.shutdown()
        for s in servers:
            await s.close()
        return servers

    for broker, server in zip((2, 3), asyncio.run(scenario())):
        [(key, version, body)] = server.received
        assert (key, version, body.broker_epoch) == (ApiKey.UPDATE_METADATA, 7, 10 * broker)
        assert [(t.topic_name, p.leader, p.isr) for t in body.topic_states for p in t.partition_states] == [
            ("t", 2, [2, 3])]


def sending_to_broker_2(port: int) -> ControllerChannelManager:
    """A channel on the running loop whose one target, broker 2, listens at ``port``; its
    liveness monitor stopped, so that only the sender's connections are counted."""
    channel = ControllerChannelManager(FakeBroker(1), retry_backoff=0.01)
    channel.liveness.shutdown()
    channel.start(asyncio.get_running_loop())
    channel.update_brokers({2: LiveBroker(2, 9, info(2, port))})
    return channel


def test_dropped_connection_is_retried():
    drops = []

    def flaky(key, version, body):
        if not drops:
            drops.append(1)
            return None  # close without answering
        return answers(key, version, body)

    async def scenario():
        server = FakeKafkaServer(RANGES, flaky)
        port = await server.start()
        channel = sending_to_broker_2(port)
        response = await asyncio.wait_for(asyncio.wrap_future(channel.send(leader_and_isr(2))), 10)
        assert isinstance(response, LeaderAndIsrResponse)
        channel.shutdown()
        await server.close()
        return server

    server = asyncio.run(scenario())
    assert server.connections == 2
    assert [k for k, _, _ in server.received] == [ApiKey.LEADER_AND_ISR] * 2


def test_a_live_broker_is_connected_to_before_its_first_request():
    """A new controller's first requests follow its failover's writes: its senders connect
    meanwhile, so those requests do not wait for a connection (and its version handshake)."""
    async def scenario():
        server = FakeKafkaServer(RANGES, answers)
        port = await server.start()
        channel = sending_to_broker_2(port)
        await async_wait_until(lambda: server.connections == 1)
        assert server.received == []  # connected, nothing sent yet
        response = await asyncio.wait_for(asyncio.wrap_future(channel.send(leader_and_isr(2))), 10)
        assert isinstance(response, LeaderAndIsrResponse) and server.connections == 1
        channel.shutdown()
        await server.close()

    asyncio.run(scenario())


def test_requests_to_a_broker_that_left_are_cancelled():
    async def scenario():
        channel = ControllerChannelManager(FakeBroker(1), retry_backoff=0.01)
        channel.start(asyncio.get_running_loop())
        # nobody listens there: the sender keeps retrying
        channel.update_brokers({2: LiveBroker(2, 9, info(2, 1))})
        pending = [channel.send(leader_and_isr(2)), channel.send(leader_and_isr(2, 1))]
        await asyncio.sleep(0.05)
        channel.update_brokers({})
        await async_wait_until(lambda: all(f.cancelled() for f in pending))
        assert channel.live_targets() == []
        unknown = channel.send(leader_and_isr(3))
        await async_wait_until(unknown.cancelled)
        channel.shutdown()

    asyncio.run(scenario())


def test_reregistered_broker_gets_a_new_sender():
    async def scenario():
        server = FakeKafkaServer(RANGES, answers)
        port = await server.start()
        channel = ControllerChannelManager(FakeBroker(1), retry_backoff=0.01)
        channel.start(asyncio.get_running_loop())
        channel.update_brokers({2: LiveBroker(2, 9, info(2, 1))})  # old, dead endpoint
        stuck = channel.send(leader_and_isr(2))
        await asyncio.sleep(0.05)
        channel.update_brokers({2: LiveBroker(2, 10, info(2, port))})  # bounced, new port
        await async_wait_until(stuck.cancelled)
        fresh = await asyncio.wrap_future(channel.send(leader_and_isr(2)))
        assert isinstance(fresh, LeaderAndIsrResponse)
        channel.shutdown()
        await server.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("version", [0, 2])
def test_old_stop_replica_cannot_mix_delete_and_keep(version):
    from odradek.controller.request_encoding import encode_stop_replica

    mixed = StopReplicaRequest(2, 1, 1, 9, (StopReplicaPartition("t", 0, 1, True),
                                            StopReplicaPartition("t", 1, 1, False)))
    with pytest.raises(ValueError):
        encode_stop_replica(mixed, version)


def test_a_started_in_process_request_runs_to_its_end():
    broker = FakeBroker(1)
    done = []

    async def slow(ctx, body):
        await asyncio.sleep(0.1)
        done.append(body)
        return LeaderAndIsrResponse()

    broker.responses[ApiKey.LEADER_AND_ISR] = slow

    async def scenario():
        channel = ControllerChannelManager(broker)
        channel.start(asyncio.get_running_loop())
        channel.update_brokers({1: LiveBroker(1, 5, info(1))})
        future = channel.send(leader_and_isr(1))
        await asyncio.sleep(0.03)
        channel.update_brokers({})  # resigned while the handler runs
        await async_wait_until(future.cancelled)
        await async_wait_until(lambda: done, what="the handler finished")
        channel.shutdown()

    asyncio.run(scenario())


def test_leader_and_isr_storage_errors_by_name_and_by_topic_id():
    from odradek.controller.channel_manager import leader_and_isr_storage_errors
    from odradek.protocol.generated.leader_and_isr_response import (
        LeaderAndIsrPartitionError,
        LeaderAndIsrTopicError,
    )

    request = LeaderAndIsrRequest(1, 0, 1, 0, topic_ids=(("a", uuid.UUID(int=1)), ("b", uuid.UUID(int=2))))
    storage, ok = ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NONE
    v4 = LeaderAndIsrResponse(partition_errors=[
        LeaderAndIsrPartitionError("a", 0, storage), LeaderAndIsrPartitionError("a", 1, ok)])
    assert leader_and_isr_storage_errors(request, v4) == (("a", 0),)
    v5 = LeaderAndIsrResponse(topics=[
        LeaderAndIsrTopicError(uuid.UUID(int=2), [LeaderAndIsrPartitionError("", 3, storage)]),
        LeaderAndIsrTopicError(uuid.UUID(int=1), [LeaderAndIsrPartitionError("", 0, ok)]),
        LeaderAndIsrTopicError(uuid.UUID(int=9), [LeaderAndIsrPartitionError("", 0, storage)]),
    ])
    assert leader_and_isr_storage_errors(request, v5) == (("b", 3),)


def test_a_stopped_sender_never_retries_even_when_its_cancellation_was_swallowed():
    """Python 3.11's ``wait_for`` can swallow the cancellation of a connection attempt that
    failed at the same moment: the sender, stopped, must end rather than retry for ever (a
    test's event loop once waited 300 s for it)."""
    async def scenario():
        channel = ControllerChannelManager(FakeBroker(1), retry_backoff=0.01)
        channel.start(asyncio.get_running_loop())
        channel.update_brokers({2: LiveBroker(2, 9, info(2, 1))})
        await async_wait_until(lambda: channel.live_targets() == [2])
        sender = channel._senders[2]
        attempts = []

        async def deliver(request):
            attempts.append(request)
            sender.stopped = True  # stop() happened; its cancel was lost in wait_for
            raise OSError("connection refused")

        sender._deliver = deliver
        channel.send(leader_and_isr(2))
        done, _ = await asyncio.wait([sender.task], timeout=5)
        assert done and sender.task.cancelled() and len(attempts) == 1
        channel.shutdown()

    asyncio.run(scenario())
