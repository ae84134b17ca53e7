"""``AlterPartitionManager`` against a fake controller channel: what it sends, and how each
answer changes the partition."""

import asyncio
import uuid
from types import SimpleNamespace

import pytest

from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.alter_partition_response import (
    AlterPartitionResponse,
    PartitionData,
    TopicData,
)
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.replication.alter_partition_manager import AlterPartitionManager
from odradek.replication.replica_manager import ReplicaManager
from odradek.storage.clock import FakeClock
from odradek.storage.config import LogConfig
from odradek.storage.log_manager import LogManager
from tests.storage.helpers import T0, make_batch


class FakeChannel:
    """``BrokerToControllerChannel``'s interface: ``await send(api_key, body)``; answers
    with ``answer(request)``, records every request."""

    def __init__(self, answer) -> None:
        self.answer = answer
        self.sent = []

    async def send(self, api_key, body):
        assert api_key == ApiKey.ALTER_PARTITION
        self.sent.append(body)
        result = self.answer(body)
        if isinstance(result, Exception):
            raise result
        return result


def accept(request) -> AlterPartitionResponse:
    """The controller writing every proposed ISR: the state version moves by one."""
    return AlterPartitionResponse(topics=[TopicData(topic_name=t.topic_name, partitions=[
        PartitionData(partition_index=p.partition_index, leader_id=request.broker_id, leader_epoch=p.leader_epoch,
                      isr=list(p.new_isr), partition_epoch=p.partition_epoch + 1)
        for p in t.partitions]) for t in request.topics])


def refuse(code: ErrorCode):
    def answer(request):
        return AlterPartitionResponse(topics=[TopicData(topic_name=t.topic_name, partitions=[
            PartitionData(partition_index=p.partition_index, error_code=code) for p in t.partitions])
            for t in request.topics])
    return answer


@pytest.fixture
def setup(tmp_path):
    clock = FakeClock(T0)
    manager = LogManager([str(tmp_path)], LogConfig(), clock)
    manager.startup()
    rm = ReplicaManager(1, manager, clock)
    part = rm.make_leader("t", 0, uuid.uuid4(), (1, 2), (1,), 5, LogConfig())
    part.zk_version = 7
    rm.append(part, memoryview(bytearray(make_batch(0, 3))))
    broker = SimpleNamespace(broker_id=1, broker_epoch=42, replica_manager=rm, broker_to_controller=None)
    yield broker, rm, part
    manager.shutdown()


def _expand(part):
    """Follower 2 caught up: the leader proposes ISR [1, 2]."""
    update = part.update_follower_fetch_state(2, part.log_end_offset, 0, T0)
    assert update.isr_change is not None and part.pending_isr is update.isr_change


def _send(manager):
    manager.take_unsent()
    try:
        return asyncio.run(manager.send_once())
    finally:
        manager._in_flight = {}


def test_an_accepted_expansion_is_committed_with_the_new_state_version(setup):
    broker, rm, part = setup
    broker.broker_to_controller = channel = FakeChannel(accept)
    manager = AlterPartitionManager(broker, autostart=False)
    _expand(part)
    assert manager.submit(part) and not manager.submit(part)  # one per partition
    assert _send(manager) is False
    (request,) = channel.sent
    assert (request.broker_id, request.broker_epoch) == (1, 42)
    p = request.topics[0].partitions[0]
    assert (request.topics[0].topic_name, p.partition_index, p.leader_epoch, p.new_isr, p.partition_epoch) == \
        ("t", 0, 5, [1, 2], 7)
    assert [s.broker_id for s in p.new_isr_with_epochs] == [1, 2]
    assert part.isr == (1, 2) and part.pending_isr is None and part.zk_version == 8
    assert manager.pending() == 0
    assert (rm.isr_expands, rm.isr_shrinks) == (1, 0)  # the broker's IsrExpandsPerSec count


def test_a_committed_shrink_that_moves_the_high_watermark_wakes_waiters(tmp_path):
    """ISR [1, 2] with follower 2 stuck at offset 1 of 3: once the controller holds ISR [1],
    the high watermark moves to 3 and the acks=all produces waiting on it are woken."""
    clock = FakeClock(T0)
    log_manager = LogManager([str(tmp_path)], LogConfig(), clock)
    log_manager.startup()
    rm = ReplicaManager(1, log_manager, clock, replica_lag_time_max_ms=10_000)
    part = rm.make_leader("t", 0, uuid.uuid4(), (1, 2), (1, 2), 5, LogConfig())
    rm.append(part, memoryview(bytearray(make_batch(0, 3))))
    part.update_follower_fetch_state(2, 1, 0, T0)
    assert part.high_watermark == 1
    clock.advance(20_000)
    (shrunk,) = rm.maybe_shrink_isrs(clock.milliseconds())
    assert shrunk is part and part.pending_isr.isr == (1,)
    broker = SimpleNamespace(broker_id=1, broker_epoch=1, replica_manager=rm, broker_to_controller=FakeChannel(accept))
    woken = []
    rm.notify = woken.append
    manager = AlterPartitionManager(broker, autostart=False)
    manager.submit(part)
    _send(manager)
    assert part.isr == (1,) and part.high_watermark == 3 and woken == [("t", 0)]
    assert (rm.isr_expands, rm.isr_shrinks) == (0, 1)
    log_manager.shutdown()


@pytest.mark.parametrize("code", [ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_UPDATE_VERSION,
                                  ErrorCode.UNKNOWN_TOPIC_OR_PARTITION])
def test_a_change_the_controller_cannot_make_is_abandoned(setup, code):
    broker, rm, part = setup
    broker.broker_to_controller = FakeChannel(refuse(code))
    manager = AlterPartitionManager(broker, autostart=False)
    _expand(part)
    manager.submit(part)
    assert _send(manager) is False
    assert part.pending_isr is None and part.isr == (1,) and part.zk_version == 7
    assert manager.pending() == 0
    assert (rm.isr_expands, rm.isr_shrinks) == (0, 0)  # abandoned: not counted


def test_a_retriable_error_sends_the_change_again(setup):
    broker, rm, part = setup
    answers = [refuse(ErrorCode.UNKNOWN_SERVER_ERROR), lambda r: AlterPartitionResponse(
        error_code=ErrorCode.STALE_BROKER_EPOCH), lambda r: ConnectionError("controller gone"), accept]
    broker.broker_to_controller = channel = FakeChannel(lambda r: answers[len(channel.sent) - 1](r))
    manager = AlterPartitionManager(broker, retry_backoff_ms=1)

    async def run():
        manager.start()
        _expand(part)
        manager.submit(part)
        for _ in range(200):
            if part.pending_isr is None:
                break
            await asyncio.sleep(0.005)
        await manager.shutdown()

    asyncio.run(run())
    assert len(channel.sent) == 4
    assert part.isr == (1, 2) and part.zk_version == 8


def test_an_answer_for_a_change_overtaken_by_a_role_change_is_dropped(setup):
    """LeaderAndIsr made this broker leader again meanwhile (pending change cleared): the
    answer to the old proposal must not overwrite the ISR the controller just sent."""
    broker, rm, part = setup
    broker.broker_to_controller = FakeChannel(accept)
    manager = AlterPartitionManager(broker, autostart=False)
    _expand(part)
    manager.submit(part)
    rm.make_leader("t", 0, part.topic_id, (1, 2, 3), (1, 3), 6, LogConfig())
    part.zk_version = 9  # the state version that LeaderAndIsr named
    _send(manager)
    assert part.isr == (1, 3) and part.pending_isr is None and part.zk_version == 9


def test_a_change_proposed_while_an_older_one_was_in_flight_is_sent_next(setup):
    broker, rm, part = setup
    channel = None

    def answer(request):
        if len(channel.sent) == 1:  # while the first is in flight: a role change, a new proposal
            rm.make_leader("t", 0, part.topic_id, (1, 2), (1,), 6, LogConfig())
            _expand(part)
        return accept(request)

    broker.broker_to_controller = channel = FakeChannel(answer)
    manager = AlterPartitionManager(broker, autostart=False)
    _expand(part)
    manager.submit(part)
    _send(manager)
    assert manager.pending() == 1
    _send(manager)
    assert [r.topics[0].partitions[0].leader_epoch for r in channel.sent] == [5, 6]
    assert part.isr == (1, 2) and part.pending_isr is None
