"""The broker's cluster glue: the start and stop order of the cluster parts (stand-ins for
the controller service, the channel to the controller, the fetchers and the AlterPartition
sender, put in place of the classes the broker module makes them from), the broker epoch,
controlled shutdown's retries, and the waits of topic operations for the controller."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from odradek.metadata import layout
from odradek.metadata.layout import BrokerInfo, PartitionState, TopicAssignment
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.generated.controlled_shutdown_response import ControlledShutdownResponse, RemainingPartition
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server import broker as broker_module
from odradek.server.controlled_shutdown import controlled_shutdown
from odradek.server.delayed_topic_operations import await_deletion, await_leaders
from odradek.testing.broker import InProcessBroker
from tests.server.clients import wait_until


def cluster_parts(monkeypatch, events: list, answers: list):
    """Stand-ins for the parts of helpers A and C, recording what the broker does with them."""

    class ControllerService:
        def __init__(self, broker):
            self.broker = broker
            events.append("controller made")

        async def start(self):
            b = self.broker
            events.append(("controller start", b.broker_epoch >= 0, bool(b.bound), b.replica_fetchers is not None))

        def shutdown(self):
            events.append("controller shutdown")

    class BrokerToControllerChannel:
        def __init__(self, broker):
            events.append("channel made")

        async def send(self, api_key, body):
            events.append(("send", api_key, body.broker_id, body.broker_epoch))
            return answers.pop(0)

    class ReplicaFetcherManager:
        def __init__(self, broker):
            events.append("fetchers made")

        async def shutdown(self):
            events.append("fetchers shutdown")

    class AlterPartitionManager:
        def __init__(self, broker):
            events.append("alter made")

    for part in (ControllerService, BrokerToControllerChannel, ReplicaFetcherManager, AlterPartitionManager):
        monkeypatch.setattr(broker_module, part.__name__, part)


def remaining(*partitions):
    return ControlledShutdownResponse(error_code=0, remaining_partitions=[
        RemainingPartition(topic_name=t, partition_index=p) for t, p in partitions])


def test_cluster_parts_start_after_registration_and_stop_after_a_controlled_shutdown(tmp_path, monkeypatch):
    events, answers = [], [remaining(("t", 0)), remaining()]
    cluster_parts(monkeypatch, events, answers)
    b = InProcessBroker(tmp_path / "data", controlled_shutdown_retry_backoff_ms=1)
    with b:
        epoch = b.call(lambda: b.broker.broker_epoch)
        stored = b.call(lambda: b.broker.metadata.store.creation_id(layout.broker_path(1)))
        assert epoch == stored >= 0
        other_broker(b)
    assert events == [
        "channel made", "fetchers made", "alter made", "controller made", ("controller start", True, True, True),
        ("send", ApiKey.CONTROLLED_SHUTDOWN, 1, epoch), ("send", ApiKey.CONTROLLED_SHUTDOWN, 1, epoch),
        "controller shutdown", "fetchers shutdown",
    ]


def other_broker(b: InProcessBroker) -> None:
    """Register broker 2 next to ``b``'s (a controlled shutdown is for a broker not alone)."""
    store = b.call(lambda: b.broker.metadata.store)
    store.create(layout.broker_path(2), BrokerInfo(2, (), None).to_json(0), ephemeral=True)
    wait_until(lambda: 2 in b.call(lambda: b.broker.metadata_image().brokers), what="broker 2 registered")


@pytest.mark.parametrize("alone", [False, True])
def test_no_controlled_shutdown_when_disabled_or_alone(tmp_path, monkeypatch, alone):
    events = []
    cluster_parts(monkeypatch, events, [])
    with InProcessBroker(tmp_path / "data", controlled_shutdown_enable="true" if alone else "false") as b:
        if not alone:
            other_broker(b)
    assert not [e for e in events if e[0] == "send"]
    assert events[-2:] == ["controller shutdown", "fetchers shutdown"]


def test_the_single_broker_is_its_own_controller(broker):
    b = broker.broker
    assert broker.call(lambda: (b.controller_service.active, b.controller_id(),
                                b.metadata_image().controller_id)) == (True, 1, 1)


# --- controlled shutdown's retries -----------------------------------------------------------

class Channel:
    def __init__(self, answers):
        self.answers = answers
        self.sent = 0

    async def send(self, api_key, body):
        self.sent += 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        if answer == "hang":
            await asyncio.sleep(10)
        return answer


def shutting_down(answers, retries=3):
    config = {"controlled.shutdown.max.retries": retries, "controlled.shutdown.retry.backoff.ms": 1,
              "controller.socket.timeout.ms": 50}
    return SimpleNamespace(config=config, broker_id=7, broker_epoch=42, broker_to_controller=Channel(answers))


@pytest.mark.parametrize("answers, outcome, sent", [
    ([remaining()], True, 1),
    ([ConnectionError("no controller"), remaining(("t", 1)), remaining()], True, 3),
    (["hang", ControlledShutdownResponse(error_code=ErrorCode.NOT_CONTROLLER), remaining()], True, 3),
    ([remaining(("t", 1))] * 3, False, 3),
])
def test_controlled_shutdown_retries_until_nothing_remains(answers, outcome, sent):
    broker = shutting_down(list(answers))
    assert asyncio.run(controlled_shutdown(broker)) is outcome
    assert broker.broker_to_controller.sent == sent


def test_no_retries_means_no_controlled_shutdown():
    broker = shutting_down([], retries=0)
    assert asyncio.run(controlled_shutdown(broker)) is False
    assert broker.broker_to_controller.sent == 0


# --- waiting for the controller ----------------------------------------------------------------

class Part:
    def __init__(self, leader, epoch):
        self.leader, self.leader_epoch = leader, epoch

    def is_leader(self, broker_id):
        return self.leader == broker_id


class Image:
    def __init__(self):
        self.brokers = {1: BrokerInfo(1, ()), 2: BrokerInfo(2, ())}
        self.states = {}
        self.topics = {}

    def partition_state(self, topic, p):
        return self.states.get((topic, p))

    def topic(self, name):
        return self.topics.get(name)


def waiting_broker():
    image = Image()
    parts = {}
    replica_manager = SimpleNamespace(get=lambda t, p: parts.get((t, p)), unhosted_roles={})
    return SimpleNamespace(broker_id=1, metadata_image=lambda: image, replica_manager=replica_manager), image, parts


def test_created_partitions_are_done_when_led_and_those_here_led_here():
    broker, image, parts = waiting_broker()

    async def scenario():
        waiting = asyncio.ensure_future(await_leaders(broker, "t", [0, 1], 2000))
        await asyncio.sleep(0.01)
        image.states[("t", 0)] = PartitionState(2, 0, (2,), 1)  # led by broker 2: done
        image.states[("t", 1)] = PartitionState(1, 3, (1,), 1)  # led here: not until this broker leads it
        await asyncio.sleep(0.05)
        assert not waiting.done()
        parts[("t", 1)] = Part(1, 2)  # an older epoch is not enough
        await asyncio.sleep(0.05)
        assert not waiting.done()
        parts[("t", 1)] = Part(1, 3)
        return await waiting

    assert asyncio.run(scenario()) is True


def test_a_leader_that_is_not_alive_or_the_time_running_out():
    broker, image, parts = waiting_broker()
    image.states[("t", 0)] = PartitionState(3, 0, (3,), 1)  # broker 3 is not registered
    assert asyncio.run(await_leaders(broker, "t", [0], 50)) is False


def test_a_role_whose_log_could_not_be_created_is_not_waited_for():
    broker, image, _ = waiting_broker()
    image.states[("t", 0)] = PartitionState(1, 4, (1,), 1)  # led here, at epoch 4
    unhosted = broker.replica_manager.unhosted_roles
    unhosted[("t", 0)] = SimpleNamespace(leader_epoch=3)  # an older LeaderAndIsr's role: wait
    assert asyncio.run(await_leaders(broker, "t", [0], 50)) is False
    unhosted[("t", 0)] = SimpleNamespace(leader_epoch=4)  # this one's, its log not creatable
    assert asyncio.run(await_leaders(broker, "t", [0], 50)) is True


def test_a_deletion_is_done_when_the_topic_is_gone_or_another_of_its_name():
    broker, image, _ = waiting_broker()
    old = TopicAssignment("t", layout.new_kafka_uuid(), {0: (1,)})
    image.topics["t"] = old
    assert asyncio.run(await_deletion(broker, "t", old.topic_id, 30)) is False

    async def scenario():
        waiting = asyncio.ensure_future(await_deletion(broker, "t", old.topic_id, 2000))
        await asyncio.sleep(0.01)
        image.topics["t"] = TopicAssignment("t", layout.new_kafka_uuid(), {0: (1,)})
        return await waiting

    assert asyncio.run(scenario()) is True


# --- topic operations wait for the controller ----------------------------------------------------

def test_topic_operations_answer_request_timed_out_when_no_controller_acts(tmp_path, monkeypatch):
    """A controller that does nothing: the creation stands but its leaders never come, the
    deletion stays marked; each request is answered REQUEST_TIMED_OUT after its timeout (a
    timeout of 0 does not wait, as Kafka)."""
    from odradek.protocol import codec
    from tests.server.wire import WireClient

    cluster_parts(monkeypatch, [], [remaining()])
    ct, cp, dt = (codec.module(n) for n in ("CreateTopicsRequest", "CreatePartitionsRequest", "DeleteTopicsRequest"))
    with InProcessBroker(tmp_path / "data") as b:
        c = WireClient(b.bootstrap)

        def create(name, timeout_ms):
            topic = ct.CreatableTopic(name=name, num_partitions=2, replication_factor=1)
            _, resp = c.request("CreateTopics", 5, ct.MESSAGE(topics=[topic], timeout_ms=timeout_ms))
            return resp.topics[0].error_code

        assert create("waits", 100) == ErrorCode.REQUEST_TIMED_OUT
        assert create("waits", 100) == ErrorCode.TOPIC_ALREADY_EXISTS
        assert create("at-once", 0) == ErrorCode.NONE
        grow = cp.MESSAGE(topics=[cp.CreatePartitionsTopic(name="waits", count=3)], timeout_ms=100)
        assert c.request("CreatePartitions", 2, grow)[1].results[0].error_code == ErrorCode.REQUEST_TIMED_OUT
        assert b.call(lambda: len(b.broker.metadata_image().topic("waits").partitions)) == 3
        _, resp = c.request("DeleteTopics", 4, dt.MESSAGE(topic_names=["waits"], timeout_ms=100))
        assert resp.responses[0].error_code == ErrorCode.REQUEST_TIMED_OUT
        assert b.call(lambda: b.broker.metadata_image().topics_being_deleted) == {"waits"}
        c.close()
