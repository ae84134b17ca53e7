"""`await_elected_leaders`: an elected partition is answered once the broker's metadata shows
its new leader; one that does not show it in time is REQUEST_TIMED_OUT; failures pass through."""

from __future__ import annotations

import asyncio

from odradek.controller.commands import ElectionOutcome
from odradek.metadata.layout import PartitionState
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server.delayed_elect_leader import await_elected_leaders


class Image:
    def __init__(self, leaders):
        self.leaders = leaders

    def partition_state(self, topic, partition):
        leader = self.leaders.get((topic, partition))
        return None if leader is None else PartitionState(leader, 1, (leader,), 1, 0)


class Broker:
    def __init__(self, leaders):
        self.image = Image(leaders)

    def metadata_image(self):
        return self.image


def test_waits_for_the_elected_leader_then_times_out_the_rest():
    broker = Broker({("t", 0): 2, ("t", 1): 2})
    outcomes = [ElectionOutcome("t", 0, ErrorCode.NONE, None, 1),
                ElectionOutcome("t", 1, ErrorCode.NONE, None, 3),
                ElectionOutcome("t", 2, ErrorCode.ELECTION_NOT_NEEDED)]

    async def main():
        async def leader_moves():
            await asyncio.sleep(0.01)
            broker.image = Image({("t", 0): 1, ("t", 1): 2})

        mover = asyncio.create_task(leader_moves())
        out = await await_elected_leaders(broker, outcomes, 200)
        await mover
        return out

    out = asyncio.run(main())
    assert [(o.partition, o.error) for o in out] == [
        (0, ErrorCode.NONE), (1, ErrorCode.REQUEST_TIMED_OUT), (2, ErrorCode.ELECTION_NOT_NEEDED)]
    assert out[0].leader == 1


def test_nothing_elected_does_not_wait():
    outcomes = [ElectionOutcome("t", 0, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, "dead")]
    assert asyncio.run(await_elected_leaders(Broker({}), outcomes, 60_000)) == outcomes
