"""`ControllerService` on an embedded store with a recording channel: election, watches turned
into events, replies to brokers' requests, conflicts, resignation, re-election."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from odradek.controller import events as ev
from odradek.controller.commands import (
    AlterPartitionReply,
    ControlledShutdownReply,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from odradek.controller.controller_service import ControllerService
from odradek.controller.leader_imbalance import imbalanced_partitions
from odradek.metadata import layout
from odradek.metadata.embedded_store import EmbeddedStore
from odradek.protocol.generated.error_codes import ErrorCode
from tests.controller.harness import Cluster
from tests.controller.service_fakes import (
    FakeBroker,
    FakeChannel,
    async_wait_until,
    info,
    state,
    wait_until,
    write_topic,
)


def make_service(broker) -> tuple[ControllerService, FakeChannel]:
    channel = FakeChannel()
    service = ControllerService(broker, channel_manager=channel)
    channel.on_event = service.submit
    return service, channel


def register(store, broker_id: int) -> int:
    store.create(layout.broker_path(broker_id), info(broker_id).to_json(0), ephemeral=True)
    return store.creation_id(layout.broker_path(broker_id))


def run(coro):
    return asyncio.run(coro)


def test_single_broker_elects_itself_and_leads_existing_topics():
    broker = FakeBroker(1)
    write_topic(broker.metadata.store, "t", {0: (1,), 1: (1,)})

    async def scenario():
        service, channel = make_service(broker)
        await service.start()
        try:
            assert service.active
            assert broker.metadata.store.get(layout.CONTROLLER)[0]
            assert layout.decode_controller(broker.metadata.store.get(layout.CONTROLLER)[0]) == 1
            for p in (0, 1):
                s = state(broker.metadata.store, "t", p)
                assert (s.leader, s.isr, s.leader_epoch) == (1, (1,), 0)
            told = {
                (p.topic, p.partition): p
                for r in channel.of(LeaderAndIsrRequest, 1) for p in r.partition_states
            }
            assert set(told) == {("t", 0), ("t", 1)}
            assert all(r.broker_epoch == broker.broker_epoch for r in channel.of(LeaderAndIsrRequest))
            assert set(channel.live) == {1}
        finally:
            service.shutdown()
        assert broker.metadata.store.exists(layout.CONTROLLER) is None

    run(scenario())


def test_watches_create_topics_partitions_and_brokers():
    broker = FakeBroker(1)
    store = broker.metadata.store

    async def scenario():
        service, channel = make_service(broker)
        await service.start()
        try:
            write_topic(store, "new", {0: (1,)})
            await async_wait_until(lambda: state(store, "new", 0), what="state of new-0")
            assert state(store, "new", 0).leader == 1
            # partitions added: the topic znode grows (AdminZkClient.addPartitions)
            data, version = store.get(layout.topic_path("new"))
            topic = layout.TopicAssignment.from_json("new", data, version)
            grown = layout.TopicAssignment(topic.name, topic.topic_id, {0: (1,), 1: (1,)})
            store.set(layout.topic_path("new"), grown.to_json(), version)
            await async_wait_until(lambda: state(store, "new", 1), what="state of new-1")
            # a second broker registers: it hears UpdateMetadata, gets a sender
            epoch2 = register(store, 2)
            await async_wait_until(lambda: 2 in channel.live, what="broker 2 live")
            await async_wait_until(lambda: channel.of(UpdateMetadataRequest, 2))
            assert channel.live[2].epoch == epoch2
        finally:
            service.shutdown()

    run(scenario())


def test_controlled_shutdown_and_alter_partition_replies():
    broker = FakeBroker(1)
    store = broker.metadata.store
    epoch2 = register(store, 2)
    write_topic(store, "t", {0: (1, 2), 1: (2, 1)})

    async def scenario():
        service, channel = make_service(broker)
        await service.start()
        try:
            s0 = state(store, "t", 0)
            assert (s0.leader, s0.isr) == (1, (1, 2))
            # leader 1 shrinks the ISR of t-0 to itself
            shrink = ev.AlterPartition(1, broker.broker_epoch, ((("t", 0), 0, (1,), s0.zk_version),))
            reply = await asyncio.wrap_future(service.submit(shrink))
            assert isinstance(reply, AlterPartitionReply) and reply.error is ErrorCode.NONE
            (result,) = reply.partitions
            assert result.error is ErrorCode.NONE and result.isr == (1,)
            assert result.zk_version == state(store, "t", 0).zk_version == s0.zk_version + 1
            # a stale version is refused
            stale = ev.AlterPartition(1, broker.broker_epoch, ((("t", 0), 0, (1, 2), s0.zk_version),))
            reply = await asyncio.wrap_future(service.submit(stale))
            assert reply.partitions[0].error is ErrorCode.INVALID_UPDATE_VERSION
            # broker 2 shuts down: it leads t-1, which moves to 1
            reply = await asyncio.wrap_future(service.submit(ev.ControlledShutdown(2, epoch2)))
            assert isinstance(reply, ControlledShutdownReply)
            assert (reply.error, reply.remaining) == (ErrorCode.NONE, ())
            assert state(store, "t", 1).leader == 1
            reply = await asyncio.wrap_future(service.submit(ev.ControlledShutdown(2, epoch2 + 99)))
            assert reply.error is ErrorCode.STALE_BROKER_EPOCH
        finally:
            service.shutdown()
        # once stopped, requests are answered NOT_CONTROLLER
        reply = service.submit(ev.ControlledShutdown(2, epoch2)).result(1)
        assert reply.error is ErrorCode.NOT_CONTROLLER

    run(scenario())


def test_conflicting_write_is_reread_and_redone():
    broker = FakeBroker(1)
    store = broker.metadata.store
    epoch2 = register(store, 2)
    write_topic(store, "t", {0: (2, 1)})

    async def scenario():
        service, channel = make_service(broker)
        await service.start()
        try:
            before = state(store, "t", 0)
            assert before.leader == 2
            # the leader changed the ISR behind the controller's back (as pre-AlterIsr leaders did)
            changed = layout.PartitionState(2, before.leader_epoch, (2,), before.controller_epoch)
            store.set(layout.partition_state_path("t", 0), changed.to_json(), before.zk_version)
            reply = await asyncio.wrap_future(service.submit(ev.ControlledShutdown(2, epoch2)))
            # no other ISR member: 2 keeps leading, and the reply came after the re-read
            assert reply.error is ErrorCode.NONE
            after = state(store, "t", 0)
            assert after.zk_version >= before.zk_version + 1
            assert service.active
            # the controller now holds the store's version: a later write goes through
            reply = await asyncio.wrap_future(service.submit(ev.AlterPartition(
                2, epoch2, ((("t", 0), after.leader_epoch, (2, 1), after.zk_version),))))
            assert reply.partitions[0].error is ErrorCode.NONE
            assert state(store, "t", 0).isr == (2, 1)
        finally:
            service.shutdown()

    run(scenario())


def test_newer_controller_epoch_makes_it_resign():
    broker = FakeBroker(1)
    store = broker.metadata.store
    register(store, 2)
    write_topic(store, "t", {0: (1, 2)})

    async def scenario():
        service, channel = make_service(broker)
        await service.start()
        try:
            data, version = store.get(layout.CONTROLLER_EPOCH)
            store.set(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(99), version)
            s0 = state(store, "t", 0)
            reply = await asyncio.wrap_future(service.submit(ev.AlterPartition(
                1, broker.broker_epoch, ((("t", 0), 0, (1,), s0.zk_version),))))
            assert reply.error is ErrorCode.NOT_CONTROLLER
            assert not service.active
            assert state(store, "t", 0).isr == (1, 2)  # the guarded write did not happen
            assert channel.live == {}
        finally:
            service.shutdown()

    run(scenario())


def test_other_broker_takes_over_when_controller_resigns():
    store = EmbeddedStore()
    first, second = FakeBroker(1, store), FakeBroker(2, store)
    write_topic(store, "t", {0: (1, 2)})

    async def scenario():
        a, _ = make_service(first)
        b, channel_b = make_service(second)
        await a.start()
        await b.start()
        try:
            assert a.active and not b.active
            epoch = layout.decode_controller_epoch(store.get(layout.CONTROLLER_EPOCH)[0])
            a.shutdown()
            await async_wait_until(lambda: b.active, what="broker 2 elected")
            assert layout.decode_controller(store.get(layout.CONTROLLER)[0]) == 2
            assert layout.decode_controller_epoch(store.get(layout.CONTROLLER_EPOCH)[0]) == epoch + 1
            await async_wait_until(lambda: channel_b.of(LeaderAndIsrRequest, 2))
            assert all(r.controller_epoch == epoch + 1 for r in channel_b.of(LeaderAndIsrRequest))
        finally:
            a.shutdown()
            b.shutdown()

    run(scenario())


def test_topic_deletion_runs_to_the_end():
    broker = FakeBroker(1)
    store = broker.metadata.store
    write_topic(store, "gone", {0: (1,), 1: (1,)})

    async def scenario():
        service, channel = make_service(broker)
        await service.start()
        try:
            store.create(layout.delete_topic_path("gone"), b"")
            await async_wait_until(lambda: store.exists(layout.topic_path("gone")) is None,
                                   what="topic znode removed")
            await async_wait_until(lambda: store.exists(layout.delete_topic_path("gone")) is None)
            deletes = [p for r in channel.of(StopReplicaRequest, 1) for p in r.partitions
                       if p.delete_partition]
            assert {(p.topic, p.partition) for p in deletes} == {("gone", 0), ("gone", 1)}
        finally:
            service.shutdown()

    run(scenario())


def test_writes_are_grouped_into_few_multis():
    broker = FakeBroker(1)
    store = broker.metadata.store
    multis = []
    real_multi = store.multi

    def counting_multi(ops):
        multis.append(len(ops))
        return real_multi(ops)

    async def scenario():
        service, channel = make_service(broker)
        await service.start()
        store.multi = counting_multi
        try:
            multis.clear()
            write_topic(store, "wide", {p: (1,) for p in range(200)})
            await async_wait_until(lambda: state(store, "wide", 199), what="all 200 states")
            assert all(state(store, "wide", p).leader == 1 for p in range(200))
            assert len(multis) < 10, multis
        finally:
            service.shutdown()

    run(scenario())


def test_admin_preferred_replica_election_znode():
    broker = FakeBroker(1)
    store = broker.metadata.store
    epoch2 = register(store, 2)
    write_topic(store, "t", {0: (2, 1)})

    async def scenario():
        service, channel = make_service(broker)
        await service.start()
        try:
            await asyncio.wrap_future(service.submit(ev.ControlledShutdown(2, epoch2)))
            assert state(store, "t", 0).leader == 1
            # broker 2 comes back (new registration), then the admin asks for preferred leaders
            store.delete(layout.broker_path(2))
            register(store, 2)
            await async_wait_until(lambda: 2 in channel.live and channel.live[2].epoch != epoch2)
            # 2 must be back in the ISR for a preferred election: let leader 1 say so
            s = state(store, "t", 0)
            if 2 not in s.isr:
                reply = await asyncio.wrap_future(service.submit(ev.AlterPartition(
                    1, broker.broker_epoch, ((("t", 0), s.leader_epoch, (1, 2), s.zk_version),))))
                assert reply.partitions[0].error is ErrorCode.NONE
            doc = b'{"version":1,"partitions":[{"topic":"t","partition":0}]}'
            store.create("/admin/preferred_replica_election", doc)
            await async_wait_until(lambda: state(store, "t", 0).leader == 2,
                                   what="preferred leader back")
            await async_wait_until(
                lambda: store.exists("/admin/preferred_replica_election") is None)
        finally:
            service.shutdown()

    run(scenario())


def test_imbalance_check_picks_brokers_over_the_threshold():
    cluster = Cluster(brokers=[1000, 1001])
    cluster.create_topic(layout.TopicAssignment("t", uuid.UUID(int=7),
                                                {0: (1000, 1001), 1: (1001, 1000)}))
    assert imbalanced_partitions(cluster.ctx, 10) == []
    cluster.shutdown(1001)  # t-1 moves to 1000, not its preferred replica
    assert imbalanced_partitions(cluster.ctx, 10) == []  # 1001 is shutting down
    cluster.kill(1001)
    cluster.start(1001)
    ctx = cluster.ctx
    assert ctx.leadership[("t", 1)].leader == 1000
    assert imbalanced_partitions(ctx, 10) == [("t", 1)]  # 1 of the 1 it prefers: 100%
    assert imbalanced_partitions(ctx, 100) == []


@pytest.mark.parametrize("enabled", [True])
def test_unclean_election_is_logged(caplog, enabled):
    broker = FakeBroker(1, unclean_leader_election_enable=enabled)
    store = broker.metadata.store
    register(store, 2)
    write_topic(store, "t", {0: (2, 1)})

    async def scenario():
        service, channel = make_service(broker)
        await service.start()
        try:
            s = state(store, "t", 0)
            # the ISR is just 2; then 2 dies: 1 is out of sync and may only lead uncleanly
            shrunk = layout.PartitionState(2, s.leader_epoch, (2,), s.controller_epoch)
            store.set(layout.partition_state_path("t", 0), shrunk.to_json(), s.zk_version)
            service.submit(ev.IsrChangeNotification({("t", 0): state(store, "t", 0)})).result(5)
            store.delete(layout.broker_path(2))
            await async_wait_until(lambda: state(store, "t", 0).leader == 1, what="unclean leader")
        finally:
            service.shutdown()

    with caplog.at_level("ERROR"):
        run(scenario())
    assert any("UNCLEAN" in r.message for r in caplog.records)


def test_wait_until_helper_times_out():
    with pytest.raises(AssertionError):
        wait_until(lambda: False, timeout=0.05)


def test_start_returns_after_this_broker_handled_its_requests():
    """With the real channel manager: the Startup's LeaderAndIsr to this broker itself is
    delivered in-process (to ``broker.dispatch``) before `start` returns."""
    from odradek.protocol.api_keys import ApiKey
    from odradek.protocol.generated.leader_and_isr_response import LeaderAndIsrResponse

    broker = FakeBroker(1)
    write_topic(broker.metadata.store, "t", {0: (1,)})

    async def slow_leader_and_isr(ctx, body):
        await asyncio.sleep(0.2)  # a handler that creates logs off the loop
        broker.handled = body
        return LeaderAndIsrResponse()

    broker.responses[ApiKey.LEADER_AND_ISR] = slow_leader_and_isr
    broker.handled = None

    async def scenario():
        service = ControllerService(broker)
        await service.start()
        try:
            assert broker.handled is not None
            (topic,) = broker.handled.topic_states
            assert topic.topic_name == "t" and topic.partition_states[0].leader == 1
            kinds = [ctx.api_key for ctx, _ in broker.dispatched]
            assert ApiKey.LEADER_AND_ISR in kinds and ApiKey.UPDATE_METADATA in kinds
        finally:
            service.shutdown()

    run(scenario())


def test_auto_leader_rebalance(monkeypatch):
    import odradek.controller.controller_service as module

    monkeypatch.setattr(module, "FIRST_REBALANCE_DELAY_S", 0)  # the checks every interval here
    broker = FakeBroker(1, auto_leader_rebalance_enable=True,
                        leader_imbalance_check_interval_seconds=1)
    store = broker.metadata.store
    epoch2 = register(store, 2)
    write_topic(store, "t", {0: (2, 1)})

    async def scenario():
        service, channel = make_service(broker)
        await service.start()
        try:
            await asyncio.wrap_future(service.submit(ev.ControlledShutdown(2, epoch2)))
            assert state(store, "t", 0).leader == 1
            store.delete(layout.broker_path(2))
            register(store, 2)
            await async_wait_until(lambda: 2 in channel.live and channel.live[2].epoch != epoch2)
            s = state(store, "t", 0)
            reply = await asyncio.wrap_future(service.submit(ev.AlterPartition(
                1, broker.broker_epoch, ((("t", 0), s.leader_epoch, (1, 2), s.zk_version),))))
            assert reply.partitions[0].error is ErrorCode.NONE
            await async_wait_until(lambda: state(store, "t", 0).leader == 2, timeout=5,
                                   what="preferred leader restored by the rebalance")
        finally:
            service.shutdown()

    run(scenario())


def test_first_rebalance_check_comes_soon_after_the_election_not_an_interval_later(monkeypatch):
    """Kafka checks 5 s after becoming controller, then every interval: with the first delay
    made 0 and an interval of an hour, only that first check can move the leader back."""
    import odradek.controller.controller_service as module
    from odradek.metadata.layout import PartitionState

    assert module.FIRST_REBALANCE_DELAY_S == 5
    monkeypatch.setattr(module, "FIRST_REBALANCE_DELAY_S", 0)
    broker = FakeBroker(1, auto_leader_rebalance_enable=True,
                        leader_imbalance_check_interval_seconds=3600)
    store = broker.metadata.store
    register(store, 2)
    write_topic(store, "t", {0: (2, 1)})  # broker 2 preferred, broker 1 leads: 100% off
    store.create(layout.partition_state_path("t", 0), PartitionState(1, 3, (1, 2), 0).to_json(),
                 make_parents=True)

    async def scenario():
        service, _ = make_service(broker)
        await service.start()
        try:
            await async_wait_until(lambda: state(store, "t", 0).leader == 2, timeout=10,
                                   what="preferred leader restored by the first check")
            assert service._next_rebalance - time.monotonic() > 3000  # then every interval
        finally:
            service.shutdown()

    run(scenario())


def test_failed_startup_gives_the_seat_up_and_elects_again(monkeypatch, caplog):
    import odradek.controller.controller_service as module

    real = module.read_snapshot
    calls = []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("boom")
        return real(*args, **kwargs)

    monkeypatch.setattr(module, "read_snapshot", flaky)
    broker = FakeBroker(1)
    write_topic(broker.metadata.store, "t", {0: (1,)})

    async def scenario():
        service, channel = make_service(broker)
        await service.start()
        try:
            await async_wait_until(lambda: service.active, what="second election")
            assert service.elections == 2
            await async_wait_until(lambda: state(broker.metadata.store, "t", 0))
        finally:
            service.shutdown()

    run(scenario())
    assert any("boom" in (r.exc_text or "") or "failed" in r.message for r in caplog.records)


def test_store_unavailable_watch_is_retried(monkeypatch):
    import odradek.controller.controller_service as module
    import odradek.controller.watched_events as watched
    from odradek.metadata.errors import StoreUnavailableError

    monkeypatch.setattr(module, "STORE_RETRY_BACKOFF_S", 0.01)
    broker = FakeBroker(1)
    store = broker.metadata.store

    async def scenario():
        service, channel = make_service(broker)
        await service.start()
        real = watched.read_topics
        failures = []

        def unreachable_once(s):
            if not failures:
                failures.append(1)
                raise StoreUnavailableError("connection lost")
            return real(s)

        monkeypatch.setattr(watched, "read_topics", unreachable_once)
        try:
            write_topic(store, "late", {0: (1,)})
            await async_wait_until(lambda: state(store, "late", 0), what="topic after retry")
            assert failures == [1]
        finally:
            service.shutdown()

    run(scenario())


def test_reassignment_through_the_admin_znode():
    broker = FakeBroker(1)
    store = broker.metadata.store
    register(store, 2)
    write_topic(store, "t", {0: (1,)})

    def assignment():
        data, version = store.get(layout.topic_path("t"))
        return layout.TopicAssignment.from_json("t", data, version)

    async def scenario():
        service, channel = make_service(broker)
        await service.start()
        try:
            store.create("/admin/reassign_partitions",
                         b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2]}]}')
            await async_wait_until(lambda: assignment().adding_replicas.get(0) == (2,),
                                   what="reassignment started")
            s = state(store, "t", 0)
            reply = await asyncio.wrap_future(service.submit(ev.AlterPartition(
                1, broker.broker_epoch, ((("t", 0), s.leader_epoch, (1, 2), s.zk_version),))))
            assert reply.partitions[0].error is ErrorCode.NONE
            await async_wait_until(lambda: dict(assignment().partitions) == {0: (2,)},
                                   what="reassignment completed")
            assert state(store, "t", 0).leader == 2
            assert not assignment().adding_replicas and not assignment().removing_replicas
            deleted = [p for r in channel.of(StopReplicaRequest, 1) for p in r.partitions
                       if p.delete_partition]
            assert [(p.topic, p.partition) for p in deleted] == [("t", 0)]
        finally:
            service.shutdown()

    run(scenario())


def test_new_session_retakes_the_seat_at_a_new_epoch():
    """After a session expiry the controller resigns first (Kafka's ``Expire``), then is
    elected again at a new epoch, whether or not the old ``/controller`` is still there."""
    broker = FakeBroker(1)
    store = broker.metadata.store
    write_topic(store, "t", {0: (1,)})

    async def scenario():
        service, channel = make_service(broker)
        await service.start()
        try:
            epoch = layout.decode_controller_epoch(store.get(layout.CONTROLLER_EPOCH)[0])
            service._on_new_session()
            await async_wait_until(lambda: service.elections == 2 and service.active,
                                   what="re-election")
            store.delete(layout.CONTROLLER)  # what the expiry did to the old ephemeral
            service._on_new_session()
            await async_wait_until(lambda: service.elections == 3 and service.active,
                                   what="re-election")
            assert layout.decode_controller_epoch(store.get(layout.CONTROLLER_EPOCH)[0]) == epoch + 2
        finally:
            service.shutdown()

    run(scenario())


def test_a_write_is_repeated_after_a_connection_blip(monkeypatch):
    """The multi fails as unreachable twice: once before it happened, once after it did (the
    answer was lost); the controller repeats it, meets its own write as a conflict, re-reads
    and answers as if nothing happened."""
    import odradek.controller.znode_writer as module
    from odradek.metadata.errors import StoreUnavailableError

    monkeypatch.setattr(module, "STORE_RETRY_BACKOFF_S", 0.01)
    broker = FakeBroker(1)
    store = broker.metadata.store
    register(store, 2)
    write_topic(store, "t", {0: (1, 2)})
    real_multi = store.multi
    blips = []

    def flaky_multi(ops):
        if len(blips) == 0:
            blips.append("before")
            raise StoreUnavailableError("connection lost")
        if len(blips) == 1:
            blips.append("after")
            real_multi(ops)
            raise StoreUnavailableError("connection lost before the answer")
        return real_multi(ops)

    async def scenario():
        service, channel = make_service(broker)
        await service.start()
        try:
            s = state(store, "t", 0)
            store.multi = flaky_multi
            reply = await asyncio.wrap_future(service.submit(ev.AlterPartition(
                1, broker.broker_epoch, ((("t", 0), s.leader_epoch, (1,), s.zk_version),))))
            assert blips == ["before", "after"]
            assert reply.error is ErrorCode.NONE
            assert state(store, "t", 0).isr == (1,)
            assert service.active
        finally:
            store.multi = real_multi
            service.shutdown()

    run(scenario())
