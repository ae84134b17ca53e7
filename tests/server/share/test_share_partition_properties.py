"""Random acquisitions, acknowledgements, releases, rejections and lock expiries by several
members against a model (hypothesis). After every step:

- the share partition's invariants hold (``SharePartition.check``);
- no offset is ACQUIRED by two members, and exactly the model's offsets are ACQUIRED, by the
  model's member; each acquisition's delivery count is the model's count plus one;
- a new leader built from what was persisted sees the same window: every record in the same
  state and count, except that ACQUIRED records are AVAILABLE with one delivery fewer
  (acquisitions are not written).

At the end the members leave, the locks expire, and one consumer drains the partition: every
offset of the log ends acknowledged or archived, none acknowledged twice, and the start
offset reaches the end of the log.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server.share.record_state import RecordState
from odradek.server.share.share_types import AcknowledgementBatch
from tests.server.share.harness import LOCK_MS, Batch, Harness

MEMBERS = ("m1", "m2", "m3")
LIMIT = 3
ACCEPT, RELEASE, REJECT, RENEW = 1, 2, 3, 4

ops = st.one_of(
    st.tuples(st.just("acquire"), st.sampled_from(MEMBERS), st.integers(1, 12)),
    st.tuples(st.just("ack"), st.sampled_from(MEMBERS), st.sampled_from([1, 2, 3, 4]),
              st.integers(1, 8), st.booleans()),
    st.tuples(st.just("bad_ack"), st.sampled_from(MEMBERS), st.integers(0, 29)),
    st.tuples(st.just("release"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("tick"), st.integers(0, LOCK_MS * 3 // 2)),
)


class Model:
    def __init__(self, sizes: list[int]) -> None:
        self.h = Harness(delivery_count_limit=LIMIT, max_record_locks=20)
        self.log: list[Batch] = []
        offset = 0
        for size in sizes:
            self.log.append(Batch(offset, offset + size - 1))
            offset += size
        self.log_end = offset
        self.held: dict[int, str] = {}
        self.deliveries: dict[int, int] = {}
        self.done: dict[int, str] = {}

    @property
    def sp(self):
        return self.h.sp

    def read_from(self, offset: int) -> list[Batch]:
        return [b for b in self.log if b.last_offset >= offset]

    def acquire(self, member: str, max_records: int) -> None:
        got = self.sp.acquire(member, self.read_from(self.sp.next_fetch_offset()), max_records)
        for run in got:
            for o in range(run.first_offset, run.last_offset + 1):
                assert o not in self.held, f"{o} acquired by {self.held[o]} and {member}"
                assert o not in self.done, o
                self.deliveries[o] = self.deliveries.get(o, 0) + 1
                assert run.delivery_count == self.deliveries[o]
                self.held[o] = member

    def ack(self, member: str, ack_type: int, count: int, fail: bool) -> None:
        offsets = sorted(o for o, m in self.held.items() if m == member)[:count]
        if not offsets:
            return
        runs: list[list[int]] = []
        for o in offsets:
            if runs and runs[-1][1] + 1 == o:
                runs[-1][1] = o
            else:
                runs.append([o, o])
        acks = [AcknowledgementBatch(lo, hi, (ack_type,)) for lo, hi in runs]
        error = ErrorCode.COORDINATOR_NOT_AVAILABLE if fail else ErrorCode.NONE
        assert self.h.acknowledge(member, *acks, error=error) is error
        if fail or ack_type == RENEW:
            return
        for o in offsets:
            del self.held[o]
            if ack_type == ACCEPT:
                self.done[o] = "acked"
            elif ack_type == REJECT or self.deliveries[o] >= LIMIT:
                self.done[o] = "archived"

    def bad_ack(self, member: str, offset: int) -> None:
        if self.held.get(offset) == member:
            return
        ack = AcknowledgementBatch(offset, offset, (ACCEPT,))
        assert self.h.acknowledge(member, ack) in (ErrorCode.INVALID_RECORD_STATE,)

    def release(self, member: str) -> None:
        assert self.h.write(self.sp.release_acquired_records(member)) is ErrorCode.NONE
        for o in [o for o, m in self.held.items() if m == member]:
            del self.held[o]
            if self.deliveries[o] >= LIMIT:
                self.done[o] = "archived"

    def tick(self, ms: int) -> None:
        for update in self.h.advance(ms):
            for b in update.batches:
                for o in range(b.first_offset, b.last_offset + 1):
                    assert o in self.held, o
                    del self.held[o]
                    if b.delivery_state == RecordState.ARCHIVED:
                        self.done[o] = "archived"

    def check(self) -> None:
        sp = self.sp
        sp.check()
        acquired = {}
        for lo, hi, state, _, member in sp.in_flight():
            if state is RecordState.ACQUIRED:
                acquired.update(dict.fromkeys(range(lo, hi + 1), member))
        assert acquired == {o: m for o, m in self.held.items() if o >= sp.start_offset}
        assert all(o >= sp.start_offset for o in self.held)
        self.check_replay()

    def check_replay(self) -> None:
        sp = self.sp
        replay = self.h.new_partition(high_watermark=0, leader_epoch=1)
        assert replay.start_offset == sp.start_offset
        for o in (o for lo, hi, *_ in sp.in_flight() for o in range(lo, hi + 1)):
            mine = sp.state_at(o)
            theirs = replay.state_at(o)
            seen = (RecordState.AVAILABLE, 0) if theirs is None else (theirs.state,
                                                                     theirs.delivery_count)
            if mine.state is RecordState.ACQUIRED:
                assert seen == (RecordState.AVAILABLE, mine.delivery_count - 1), o
            else:
                assert seen == (mine.state, mine.delivery_count), o
        replay.close()

    def drain(self) -> None:
        for member in MEMBERS:
            self.release(member)
        self.tick(LOCK_MS)
        for _ in range(self.log_end + 1):
            if self.sp.start_offset >= self.log_end:
                break
            self.acquire("drain", 100)
            self.ack("drain", ACCEPT, 100, False)
            self.check()
        assert self.sp.start_offset == self.log_end
        assert sorted(self.done) == list(range(self.log_end))
        assert all(self.deliveries.get(o, 0) <= LIMIT for o in range(self.log_end))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=10), st.lists(ops, max_size=40))
def test_random_operations_keep_the_share_partition_consistent(sizes, steps):
    model = Model(sizes)
    for step in steps:
        getattr(model, step[0])(*step[1:])
        model.check()
    model.drain()
