"""`ControllerService` on a real ZooKeeper: two brokers, each with its own session; the
controller's session ends (a crash), the other broker takes over and moves leadership."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from odradek.controller.commands import LeaderAndIsrRequest
from odradek.controller.controller_service import ControllerService
from odradek.metadata import layout
from odradek.metadata.zookeeper_store import ZooKeeperStore
from tests.controller.service_fakes import FakeBroker, FakeChannel, async_wait_until, state
from tests.controller.service_fakes import write_topic
from odradek.server.local_cluster.zookeeper_server import ZooKeeperServer, zookeeper_installed


@pytest.fixture(scope="module")
def zk_server(tmp_path_factory):
    """A throw-away ZooKeeper (skipped where it is not installed)."""
    if not zookeeper_installed():
        pytest.skip("ZooKeeper is not installed: apt-get install zookeeper")
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    server.start()
    yield server
    server.stop()


def test_failover_on_zookeeper(zk_server):
    chroot = f"/controller-test-{uuid.uuid4().hex[:8]}"
    stores = [ZooKeeperStore(zk_server.hosts, chroot, session_timeout=4.0) for _ in range(2)]
    brokers = [FakeBroker(1, stores[0]), FakeBroker(2, stores[1])]
    write_topic(stores[0], "t", {0: (1, 2), 1: (2, 1)})

    async def scenario():
        services, channels = [], []
        for broker in brokers:
            channel = FakeChannel()
            service = ControllerService(broker, channel_manager=channel)
            channel.on_event = service.submit
            services.append(service)
            channels.append(channel)
        try:
            await services[0].start()
            await services[1].start()
            assert services[0].active and not services[1].active
            view = stores[1]
            await async_wait_until(lambda: state(view, "t", 1), what="states written")
            first = state(view, "t", 0)
            assert (first.leader, first.isr) == (1, (1, 2))
            stores[0].close()  # broker 1's session ends: /controller and its registration go
            await async_wait_until(lambda: services[1].active, timeout=15, what="failover")
            await async_wait_until(lambda: state(view, "t", 0).leader == 2, timeout=10,
                                   what="t-0 led by 2")
            moved = state(view, "t", 0)
            # epoch bumped twice, as Kafka: replica 1 goes offline (leaves the ISR), then the
            # offline partition elects 2
            assert moved.leader_epoch > first.leader_epoch and moved.isr == (2,)
            assert layout.decode_controller(view.get(layout.CONTROLLER)[0]) == 2
            told = [p for r in channels[1].of(LeaderAndIsrRequest, 2) for p in r.partition_states
                    if (p.topic, p.partition) == ("t", 0)]
            assert told and told[-1].leader == 2
        finally:
            for service in services:
                service.shutdown()
            for store in stores:
                store.close()

    asyncio.run(scenario())
