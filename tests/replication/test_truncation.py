"""Follower truncation by leader epoch (``replication/truncation.py``).

Unit cases after Kafka's ``AbstractFetcherThreadTest`` and KIP-101/KIP-279's scenarios, and a
model of three replicas (elections, appends, fetches, ISR changes, truncations) in which
hypothesis checks that a follower that truncated by the rule holds a prefix of its leader's
log, that replicas agree below their high watermarks, and that with clean elections no record
below a high watermark is ever lost.
"""

from __future__ import annotations

import os
import tempfile

from hypothesis import example, given, settings
from hypothesis import strategies as st

from odradek.replication.truncation import (
    EpochEndOffset,
    OffsetTruncationState,
    epoch_to_ask,
    offset_to_truncate_to,
    truncate_to_high_watermark,
)
from odradek.records import batch as rb
from odradek.records.reader import iter_batches
from odradek.storage.append_info import LogAppendInfo
from odradek.storage.clock import FakeClock
from odradek.storage.config import LogConfig
from odradek.storage.file_handle_cache import FileHandleCache
from odradek.storage.log import Log
from odradek.storage.leader_epoch_cache import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    LeaderEpochFileCache,
)
from tests.storage.helpers import T0, make_batch


def _cache(*entries):
    return LeaderEpochFileCache(None, entries)


def test_same_epoch_truncates_to_the_lesser_end():
    follower = _cache((0, 0), (1, 5))
    # The leader's epoch 1 ends at 8 (it moved on to epoch 2); the follower holds 1 up to 10.
    assert offset_to_truncate_to(EpochEndOffset(1, 8), follower, 10, 3) == OffsetTruncationState(8, True)
    # The follower's epoch 1 ends first: nothing to cut.
    assert offset_to_truncate_to(EpochEndOffset(1, 12), follower, 10, 3) == OffsetTruncationState(10, True)


def test_kip_279_fast_leader_change():
    # A and B hold epoch 1 to offset 5. B led epoch 2 (offsets 5, 6) and died unreplicated;
    # A led epoch 3 (5, 6, 7). B asks about its epoch 2; A answers with its epoch 1.
    a = _cache((1, 0), (3, 5))
    b = _cache((1, 0), (2, 5))
    assert epoch_to_ask(b) == 2
    answer = EpochEndOffset(*a.end_offset_for(2, 8))
    assert answer == EpochEndOffset(1, 5)
    assert offset_to_truncate_to(answer, b, 7, 5) == OffsetTruncationState(5, True)


def test_an_epoch_unknown_to_the_follower_truncates_part_way_and_asks_again():
    # The follower has epochs 1 and 4; the leader answers with its epoch 3 (it never had 4).
    follower = _cache((1, 0), (4, 10))
    state = offset_to_truncate_to(EpochEndOffset(3, 12), follower, 15, 2)
    assert state == OffsetTruncationState(10, False)  # where the follower's epoch 1 ends
    follower.truncate_from_end(state.offset)
    assert epoch_to_ask(follower) == 1


def test_the_leader_has_no_such_epoch():
    # UNDEFINED_EPOCH_OFFSET (an empty leader cache): the follower's high watermark.
    follower = _cache((1, 0), (2, 5))
    state = offset_to_truncate_to(EpochEndOffset(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET), follower, 9, 4)
    assert state == OffsetTruncationState(4, True)


def test_an_answer_without_an_epoch_uses_the_leader_offset():
    follower = _cache((1, 0))
    assert offset_to_truncate_to(EpochEndOffset(UNDEFINED_EPOCH, 6), follower, 9, 4) == OffsetTruncationState(6, True)
    assert offset_to_truncate_to(EpochEndOffset(UNDEFINED_EPOCH, 12), follower, 9, 4) == OffsetTruncationState(9, True)


def test_follower_epochs_all_above_the_answer():
    # The follower's earliest epoch is 5, from offset 20 (older data deleted); the leader
    # answers with its epoch 3 ending at 25.
    follower = _cache((5, 20), (6, 30))
    assert offset_to_truncate_to(EpochEndOffset(3, 25), follower, 40, 20) == OffsetTruncationState(20, True)


def test_a_follower_without_epochs():
    follower = _cache()
    assert epoch_to_ask(follower) is None
    assert truncate_to_high_watermark(7) == OffsetTruncationState(7, True)
    assert offset_to_truncate_to(EpochEndOffset(2, 6), follower, 9, 4) == OffsetTruncationState(6, True)


def test_never_beyond_the_follower_log_end():
    follower = _cache((1, 0))
    assert offset_to_truncate_to(EpochEndOffset(1, 50), follower, 9, 4).offset == 9


# --- the model ---------------------------------------------------------------------------

N = 3


class Replica:
    """A replica's log as a list of records ``(epoch, serial)``, its epoch cache (fed by
    appends as ``Log.append`` feeds it) and its high watermark."""

    def __init__(self) -> None:
        self.log: list[tuple[int, int]] = []
        self.cache = LeaderEpochFileCache()
        self.hw = 0
        self.truncating = False

    @property
    def leo(self) -> int:
        return len(self.log)

    def append(self, records) -> None:
        for record in records:
            self.cache.assign(record[0], len(self.log))
            self.log.append(record)

    def truncate(self, offset: int) -> None:
        assert 0 <= offset <= self.leo
        del self.log[offset:]
        self.cache.truncate_from_end(offset)
        self.hw = min(self.hw, offset)


class LogReplica(Replica):
    """The same replica on a real ``Log`` (small segments): each record a batch of its own
    carrying its epoch, so the log's own hooks keep ``cache`` (its ``leader_epoch_cache``,
    the file included); ``log`` mirrors what the Log holds."""

    def __init__(self, directory: str) -> None:
        super().__init__()
        self.directory = directory
        self.real = Log.open(directory, "topic", 0, LogConfig(segment_bytes=400), FakeClock(T0), FileHandleCache(16))
        self.cache = self.real.leader_epoch_cache

    def append(self, records) -> None:
        for epoch, serial in records:
            data = bytearray(make_batch(len(self.log), 1, values=[b"%d" % serial]))
            rb.set_partition_leader_epoch(data, 0, epoch)
            self.real.append(data, LogAppendInfo.from_batches(data))
            self.log.append((epoch, serial))

    def truncate(self, offset: int) -> None:
        assert 0 <= offset <= self.leo
        cut = offset < self.leo
        del self.log[offset:]
        self.hw = min(self.hw, offset)
        self.real.truncate_to(offset)  # which cuts the cache
        if cut:
            assert all(start < offset for _, start in self.cache.entries)

    def verify(self) -> None:
        """The Log holds the mirror's records, its cache is the one its records imply, and
        reopening it (the checkpoint file) gives the same."""
        held, offset = [], 0
        while offset < self.real.log_end_offset:
            for batch in iter_batches(self.real.read(offset, 1 << 20).read()):
                held += [(batch.header.partition_leader_epoch, int(r.value)) for r in batch.records()]
                offset = batch.next_offset
        assert held == self.log
        implied = LeaderEpochFileCache()
        for offset, (epoch, _) in enumerate(self.log):
            implied.assign(epoch, offset)
        entries = self.cache.entries
        assert entries[: len(implied.entries)] == implied.entries  # (+ an epoch begun, not written)
        self.real.close()
        again = Log.open(self.directory, "topic", 0, LogConfig(segment_bytes=400), FakeClock(T0),
                         FileHandleCache(16), clean_shutdown=True)
        # An epoch begun at the log end with nothing written in it is cut when the log is
        # opened (as Kafka's loading does); becoming leader begins it again.
        assert again.leader_epoch_cache.entries == implied.entries
        again.close()


class Cluster:
    def __init__(self, n: int = N, make_replica=Replica) -> None:
        self.n = n
        self.replicas = [make_replica(i) if make_replica is not Replica else Replica() for i in range(n)]
        self.leader = 0
        self.epoch = 0
        self.isr = set(range(n))
        self.known_leo = {i: 0 for i in range(n)}  # the leader's view of its followers
        self.epoch_start = 0
        self.serial = 0
        self.committed: list[tuple[int, int]] = []  # the records below the highest HW yet
        self.unclean = False
        self.replicas[0].cache.assign(0, 0)

    @property
    def lead(self) -> Replica:
        return self.replicas[self.leader]

    def append(self, n: int) -> None:
        records = [(self.epoch, self.serial + i) for i in range(n)]
        self.serial += n
        self.lead.append(records)
        self.advance_hw()

    def elect(self, r: int, allow_unclean: bool) -> None:
        if r not in self.isr:
            if not allow_unclean:
                return
            self.unclean = True
            self.isr = {r}
        self.epoch += 1
        self.leader = r
        new = self.replicas[r]
        new.truncating = False
        new.cache.assign(self.epoch, new.leo)  # Log.assign_leader_epoch
        self.epoch_start = new.leo
        self.known_leo = {i: -1 for i in range(self.n)}  # unknown until each fetches
        for i, rep in enumerate(self.replicas):
            if i != r:
                rep.truncating = True

    def truncate(self, f: int) -> None:
        follower = self.replicas[f]
        if f == self.leader or not follower.truncating:
            return
        for _ in range(100):
            asked = epoch_to_ask(follower.cache)
            if asked is None:
                state = truncate_to_high_watermark(follower.hw)
            else:
                answer = EpochEndOffset(*self.lead.cache.end_offset_for(asked, self.lead.leo))
                state = offset_to_truncate_to(answer, follower.cache, follower.leo, follower.hw)
            follower.truncate(state.offset)
            if state.completed:
                break
        else:
            raise AssertionError("truncation never completed")
        follower.truncating = False
        assert follower.log == self.lead.log[: follower.leo], "truncated follower is not a prefix of its leader"

    def fetch(self, f: int, n: int, lost: bool = False) -> None:
        """One Fetch round as Kafka runs it: the leader learns the follower's log end offset
        from the fetch offset (ISR, high watermark), then answers with records from there and
        its high watermark, so a follower's high watermark trails by a round; ``lost``: the
        answer never arrives (the follower restarts meanwhile: KIP-101's first scenario)."""
        follower = self.replicas[f]
        if f == self.leader or follower.truncating:
            return
        assert follower.log == self.lead.log[: follower.leo]
        self.known_leo[f] = follower.leo
        if f not in self.isr and follower.leo >= self.lead.hw and follower.leo >= self.epoch_start:
            self.isr.add(f)  # Partition.maybe_expand_isr's rule
        self.advance_hw()
        if lost:
            return
        follower.append(self.lead.log[follower.leo : follower.leo + n])
        follower.hw = min(self.lead.hw, follower.leo)

    def restart(self, f: int) -> None:
        """A follower restarts: it truncates again before fetching."""
        if f != self.leader:
            self.replicas[f].truncating = True

    def shrink(self, f: int) -> None:
        if f != self.leader:
            self.isr.discard(f)
            self.advance_hw()

    def advance_hw(self) -> None:
        lead = self.lead
        hw = min([lead.leo] + [self.known_leo[i] for i in self.isr if i != self.leader])
        if hw > lead.hw:
            lead.hw = hw
        if lead.hw > len(self.committed):
            self.committed = lead.log[: lead.hw]

    def check(self) -> None:
        if self.unclean:
            return
        # No acknowledged (below a high watermark) record lost, and replicas agree below
        # their high watermarks.
        assert self.lead.log[: len(self.committed)] == self.committed
        for a in self.replicas:
            for b in self.replicas:
                upto = min(a.hw, b.hw)
                assert a.log[:upto] == b.log[:upto]


_ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 4)),
        st.tuples(st.just("elect"), st.integers(0, N - 1)),
        st.tuples(st.just("truncate"), st.integers(0, N - 1)),
        st.tuples(st.just("fetch"), st.integers(0, N - 1), st.integers(1, 5), st.booleans()),
        st.tuples(st.just("shrink"), st.integers(0, N - 1)),
        st.tuples(st.just("restart"), st.integers(0, N - 1)),
    ),
    max_size=60,
)


def _run(ops, allow_unclean: bool, n: int = N, make_replica=Replica) -> Cluster:
    cluster = Cluster(n, make_replica)
    for op in ops:
        name, who, *more = op
        who %= n
        if name == "append":
            cluster.append(op[1])
        elif name == "elect":
            cluster.elect(who, allow_unclean)
        elif name == "truncate":
            cluster.truncate(who)
        elif name == "fetch":
            cluster.fetch(who, *more)
        elif name == "restart":
            cluster.restart(who)
        else:
            cluster.shrink(who)
        cluster.check()
    # In the end every follower truncates and catches up: all logs are the leader's.
    for f in range(n):
        cluster.truncate(f)
        cluster.fetch(f, 10**6)
        cluster.fetch(f, 1)  # the high watermark it brings
    for rep in cluster.replicas:
        assert rep.log == cluster.lead.log
    return cluster


def test_kip_101_first_scenario():
    # B fetched m0 and m1 but the answer carrying the high watermark 2 never reached it;
    # it restarts and truncates. By its high watermark (before KIP-101) it would drop them,
    # then lead, and lose two acknowledged records; by epoch it keeps them.
    ops = [("shrink", 2), ("append", 2), ("fetch", 1, 5, False), ("fetch", 1, 5, True),
           ("restart", 1), ("truncate", 1), ("elect", 1)]
    cluster = _run(ops, allow_unclean=False)
    assert cluster.committed == [(0, 0), (0, 1)]


@settings(max_examples=500, deadline=None)
@given(_ops, st.integers(2, 3))
def test_clean_elections_keep_replicas_identical_below_the_high_watermark(ops, n):
    _run(ops, allow_unclean=False, n=n)


@settings(max_examples=500, deadline=None)
@given(_ops, st.integers(2, 3))
def test_truncated_followers_hold_a_prefix_of_the_leader_even_after_unclean_elections(ops, n):
    _run(ops, allow_unclean=True, n=n)


@settings(max_examples=150, deadline=None)
@given(_ops)
# A leader deposed before it wrote in its epoch: truncating its log to its end must still cut
# that epoch from its cache (Kafka's truncateTo), else it asks the new leader about it for ever.
@example([("elect", 1), ("append", 1), ("elect", 0), ("append", 1), ("elect", 1), ("elect", 0)])
def test_the_model_on_real_logs(ops):
    with tempfile.TemporaryDirectory() as root:
        cluster = _run(ops, allow_unclean=True, make_replica=lambda i: LogReplica(os.path.join(root, f"r{i}", "topic-0")))
        for replica in cluster.replicas:
            replica.verify()
