"""FindCoordinator names this broker only once its own replica manager leads the coordinator
partition (``server/handlers/find_coordinator.py``), not as soon as the metadata image says so:
in between, the client's next group request would be answered NOT_COORDINATOR (librdkafka's
0130_store_offsets failed so on a fresh broker: its OffsetFetch right after the creation of
``__consumer_offsets``). Fakes stand for the broker: the image and the replica manager are
separate, as they are between the controller's decision and the broker's LeaderAndIsr."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from odradek.coordinator.group.group_config import OFFSETS_TOPIC
from odradek.coordinator.partitioner import partition_for
from odradek.protocol.generated.error_codes import ErrorCode as E
from odradek.server.handlers import find_coordinator

SELF, OTHER = 1, 2
KEY = "group-a"
PARTITIONS = 3
P = partition_for(KEY, PARTITIONS)


class Image:
    def __init__(self, leader: int) -> None:
        self.leader_id = leader

    def topic(self, name):
        return SimpleNamespace(partitions=dict.fromkeys(range(PARTITIONS))) if name == OFFSETS_TOPIC else None

    def leader(self, topic, partition):
        return self.leader_id

    def broker(self, broker_id):
        if broker_id not in (SELF, OTHER):
            return None
        endpoint = SimpleNamespace(listener="PLAINTEXT", host="127.0.0.1", port=9000 + broker_id)
        return SimpleNamespace(endpoints=[endpoint])


class ReplicaManager:
    """Leads the partition from its ``leads_after``-th look on (None: never)."""

    def __init__(self, leads_after: int | None) -> None:
        self.leads_after = leads_after
        self.looks = 0

    def leads(self) -> bool:
        return self.leads_after is not None and self.looks >= self.leads_after

    def get(self, topic, partition):
        self.looks += 1
        return SimpleNamespace(is_leader=lambda broker_id: broker_id == SELF and self.leads())


class Broker:
    def __init__(self, image: Image, replica_manager: ReplicaManager, on_look=None) -> None:
        self.broker_id = SELF
        self.image = image
        self.replica_manager = replica_manager
        self.prepared: list[tuple[int, bool]] = []  # (partition, led when prepared)
        self.group_coordinator = SimpleNamespace(prepare=lambda p: self.prepared.append((p, replica_manager.leads())))
        self.on_look = on_look

    def metadata_image(self):
        if self.on_look is not None:
            self.on_look(self)
        return self.image


def find(broker):
    ctx = SimpleNamespace(broker=broker, api_version=4, api_key=10,
                          connection=SimpleNamespace(listener_name="PLAINTEXT"))
    return asyncio.run(find_coordinator._find(ctx, find_coordinator.GROUP, KEY))


@pytest.fixture(autouse=True)
def short_wait(monkeypatch):
    monkeypatch.setattr(find_coordinator, "INTERNAL_TOPIC_WAIT_S", 0.2)
    monkeypatch.setattr(find_coordinator, "LOCAL_LEADERSHIP_POLL_S", 0.001, raising=False)


def test_a_leader_already_in_place_is_named_at_once():
    broker = Broker(Image(SELF), ReplicaManager(leads_after=0))
    c = find(broker)
    assert (c.error_code, c.node_id, c.port) == (E.NONE, SELF, 9001)
    assert broker.prepared == [(P, True)]


def test_this_broker_is_named_only_once_its_leader_and_isr_made_it_the_leader():
    broker = Broker(Image(SELF), ReplicaManager(leads_after=5))
    c = find(broker)
    assert (c.error_code, c.node_id) == (E.NONE, SELF)
    assert broker.replica_manager.leads()
    assert broker.prepared == [(P, True)]


def test_a_leadership_that_never_comes_answers_coordinator_not_available():
    broker = Broker(Image(SELF), ReplicaManager(leads_after=None))
    c = find(broker)
    assert (c.error_code, c.node_id) == (E.COORDINATOR_NOT_AVAILABLE, -1)
    assert broker.prepared == []


def test_leadership_moving_elsewhere_meanwhile_names_the_new_leader():
    def move_after_a_few_looks(broker):
        if broker.replica_manager.looks >= 3:
            broker.image.leader_id = OTHER

    broker = Broker(Image(SELF), ReplicaManager(leads_after=None), on_look=move_after_a_few_looks)
    c = find(broker)
    assert (c.error_code, c.node_id, c.port) == (E.NONE, OTHER, 9002)
    assert broker.prepared == []


def test_another_broker_named_by_the_image_is_named_without_waiting():
    broker = Broker(Image(OTHER), ReplicaManager(leads_after=None))
    c = find(broker)
    assert (c.error_code, c.node_id) == (E.NONE, OTHER)
    assert broker.replica_manager.looks == 0
