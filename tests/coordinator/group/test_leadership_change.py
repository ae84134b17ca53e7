"""The group coordinator follows this broker's ``__consumer_offsets`` leadership
(``on_leadership_change``): elected partitions load, resigned ones unload."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from odradek.coordinator.group.group_config import OFFSETS_TOPIC
from odradek.coordinator.group.group_coordinator import GroupCoordinator
from odradek.metadata.layout import TopicAssignment
from odradek.storage.clock import FakeClock
from tests.coordinator.group.harness import CONFIG


class Part:
    def __init__(self, leader: int, epoch: int) -> None:
        self.leader, self.leader_epoch = leader, epoch
        self.log_start_offset = self.log_end_offset = 0  # empty: loaded at once

    def is_leader(self, broker_id: int) -> bool:
        return self.leader == broker_id


def test_elected_partitions_load_and_resigned_ones_unload():
    async def scenario():
        parts = {}
        image = SimpleNamespace(topic=lambda name: TopicAssignment(OFFSETS_TOPIC, None, {p: (1,) for p in range(4)}))
        broker = SimpleNamespace(broker_id=1, clock=FakeClock(), loop=asyncio.get_running_loop(),
                                 track=lambda task: None, metadata_image=lambda: image,
                                 replica_manager=SimpleNamespace(get=lambda t, p: parts.get((t, p))))
        coordinator = GroupCoordinator(broker, CONFIG)
        parts[(OFFSETS_TOPIC, 0)] = Part(1, 0)
        parts[(OFFSETS_TOPIC, 2)] = Part(1, 0)
        coordinator.on_leadership_change(elected=[0, (OFFSETS_TOPIC, 2)])
        assert sorted(coordinator._slots) == [0, 2]
        parts[(OFFSETS_TOPIC, 0)] = Part(2, 1)  # moved to broker 2
        parts[(OFFSETS_TOPIC, 3)] = Part(1, 4)
        coordinator.on_leadership_change(elected=[3], resigned=[0])
        assert sorted(coordinator._slots) == [2, 3]
        assert coordinator._slots[3].leader_epoch == 4 and not coordinator._slots[3].loading
        # Elected where the replica manager does not have it as leader (yet): nothing loads.
        coordinator.on_leadership_change(elected=[1])
        assert sorted(coordinator._slots) == [2, 3]
        coordinator.shutdown()

    asyncio.run(scenario())
