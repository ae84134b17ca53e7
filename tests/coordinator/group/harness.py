"""A group coordinator shard driven by hand: a fake clock, an in-memory "partition"."""

from __future__ import annotations

from odradek.coordinator.group.group_config import GroupConfig
from odradek.coordinator.group.group_coordinator_shard import GroupCoordinatorShard
from odradek.coordinator.group.group_requests import JoinRequest, SyncRequest
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.storage.clock import FakeClock

CONFIG = GroupConfig(min_session_timeout_ms=100, max_session_timeout_ms=60_000, initial_rebalance_delay_ms=0,
                     offsets_retention_ms=60_000)


class Answer:
    """Collects what a waiting request is answered (exactly once, or it is a bug)."""

    def __init__(self) -> None:
        self.results: list = []

    def __call__(self, result) -> None:
        self.results.append(result)

    @property
    def done(self) -> bool:
        return bool(self.results)

    @property
    def result(self):
        assert len(self.results) == 1, f"answered {len(self.results)} times: {self.results}"
        return self.results[0]


class ShardHarness:
    def __init__(self, config: GroupConfig = CONFIG, partition: int = 0) -> None:
        self.config = config
        self.clock = FakeClock()
        self.shard = GroupCoordinatorShard(partition, config, self.clock)
        self.log: list = []  # every record written, in order (its index: its offset)
        self.write_error = ErrorCode.NONE  # set to make writes fail

    # --- the runtime's job ----------------------------------------------------------------
    def apply(self, result):
        for write in result.writes:
            error = self.write_error
            if error == ErrorCode.NONE:
                first = len(self.log)
                self.log.extend(write.records)
                if write.replay:
                    for i, record in enumerate(write.records):
                        self.shard.replay(record, write.producer_id, first + i)
            if write.on_written is not None:
                follow = write.on_written(error)
                if follow is not None:
                    self.apply(follow)
        return result.response

    def tick(self, ms: int = 0) -> None:
        """Move time on by ``ms`` and run every timer due, in deadline order."""
        target = self.clock.milliseconds() + ms
        while True:
            deadline = self.shard.next_deadline()
            if deadline is None or deadline > target:
                break
            if deadline > self.clock.milliseconds():
                self.clock.set(deadline)
            for result in self.shard.run_due_timers(self.clock.milliseconds()):
                self.apply(result)
        self.clock.set(target)

    # --- requests -------------------------------------------------------------------------
    def join(self, group: str, member_id: str = "", instance_id: str | None = None, protocols=None,
             session_ms: int = 1000, rebalance_ms: int = 2000, require_known: bool = False,
             skip_assignment: bool = False, protocol_type: str = "consumer", client_id: str = "c") -> Answer:
        answer = Answer()
        req = JoinRequest(group, member_id, instance_id, client_id, "/127.0.0.1", session_ms, rebalance_ms,
                          protocol_type, tuple(protocols or (("range", b"r-" + client_id.encode()),)),
                          require_known, skip_assignment)
        self.apply(self.shard.join_group(req, answer))
        return answer

    def sync(self, group: str, member_id: str, generation: int, assignments=(), instance_id=None) -> Answer:
        answer = Answer()
        req = SyncRequest(group, member_id, instance_id, generation, assignments=tuple(assignments))
        self.apply(self.shard.sync_group(req, answer))
        return answer

    def heartbeat(self, group: str, member_id: str, generation: int, instance_id=None) -> ErrorCode:
        return self.apply(self.shard.heartbeat(group, member_id, instance_id, generation))

    def joined_group(self, group: str, n: int = 1, **kw) -> list:
        """``n`` members joined and synced (each assigned ``b"a-<i>"``): their member ids."""
        answers = [self.join(group, client_id=f"c{i}", **kw) for i in range(n)]
        self.tick()
        results = [a.results[-1] for a in answers]
        assert all(r.error == ErrorCode.NONE for r in results), results
        leader = next(r for r in results if r.leader_id == r.member_id)
        assignment = [(r.member_id, f"a-{i}".encode()) for i, r in enumerate(results)]
        syncs = [self.sync(group, r.member_id, r.generation_id, assignment if r is leader else ())
                 for r in results]
        assert all(s.result.error == ErrorCode.NONE for s in syncs)
        return [r.member_id for r in results]

    def state(self, group: str) -> str:
        return self.shard.describe_group(group).state
