"""Replica fetchers against a real leader: an odradek broker (in-process, its own thread and
loop) leading a partition with replicas [1, 2]; broker 2 is a bare follower (a replica manager
on its own log directory) whose fetchers run on the test's event loop."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from types import SimpleNamespace

import pytest

from odradek.metadata.layout import BrokerInfo, Endpoint
from odradek.records import batch as rb
from odradek.replication import replica_fetcher
from odradek.replication.replica_fetcher import FENCED, FETCHING, InitialFetchState
from odradek.replication.replica_fetcher_manager import ReplicaFetcherManager
from odradek.replication.replica_manager import ReplicaManager
from odradek.server.config import BrokerConfig
from odradek.storage.clock import SystemClock
from odradek.storage.config import LogConfig
from odradek.storage.leader_epoch_checkpoint import LeaderEpochCheckpointFile
from odradek.storage.log_manager import LogManager
from odradek.testing.broker import InProcessBroker
from odradek.testing.broker import test_config as broker_props
from tests.replication.test_alter_partition_manager import FakeChannel, accept
from tests.server.clients import unique_topic
from tests.server.test_bad_input import create_topic
from tests.server.wire import WireClient, produce_body
from tests.storage.helpers import make_batch


@pytest.fixture(scope="module")
def leader(tmp_path_factory):
    with InProcessBroker(tmp_path_factory.mktemp("leader")) as b:
        def fake_controller():
            b.broker.broker_to_controller = FakeChannel(accept)
        b.call(fake_controller)
        yield b


class Follower:
    """Broker 2: what a fetcher reads of its broker (config, id, replica manager, the image's
    registration of broker 1)."""

    def __init__(self, path, leader: InProcessBroker) -> None:
        self.config = BrokerConfig.from_props(broker_props(path, node_id=2, replica_fetch_backoff_ms=50,
                                                          replica_fetch_wait_max_ms=50))
        self.broker_id = 2
        self.inter_broker_listener = "PLAINTEXT"
        self.log_manager = LogManager([str(path)], LogConfig(), SystemClock())
        self.log_manager.startup()
        self.replica_manager = ReplicaManager(2, self.log_manager, SystemClock())
        endpoint = Endpoint("PLAINTEXT", "127.0.0.1", leader.port)
        self._image = SimpleNamespace(broker=lambda i: BrokerInfo(1, (endpoint,)) if i == 1 else None)

    def metadata_image(self):
        return self._image

    def follow(self, topic: str, topic_id, leader_epoch: int = 1):
        part = self.replica_manager.hosted_partition(topic, 0, topic_id, LogConfig())
        part.leader_id, part.leader_epoch = 1, leader_epoch
        return part


@pytest.fixture
def follower(tmp_path, leader):
    f = Follower(tmp_path / "follower", leader)
    yield f
    f.log_manager.shutdown()


def _leading(leader: InProcessBroker, isr=(1, 2), produce=(3, 2)):
    """A topic broker 1 leads at epoch 1 with replicas [1, 2]: ``produce[0]`` records written
    in epoch 0 (before), ``produce[1]`` from an idempotent producer in epoch 1."""
    topic = unique_topic("fetcher")
    wire = WireClient(leader.bootstrap)
    create_topic(wire, topic)
    rm = leader.broker.replica_manager
    wire.request("Produce", 9, produce_body(topic, 0, make_batch(0, produce[0])))

    def lead():
        part = rm.get(topic, 0)
        rm.make_leader(topic, 0, part.topic_id, (1, 2), isr, 1, part.log.config)
        part.zk_version = 0
        return part
    part = leader.call(lead)
    wire.request("Produce", 9, produce_body(topic, 0, make_batch(0, produce[1], producer_id=11, base_sequence=0)))
    wire.close()
    return topic, part


def _bytes(part, start: int = 0) -> bytes:
    region = part.log.read(start, 1 << 24)
    return bytes(region.read()) if len(region) else b""


async def _until(predicate, what: str, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def test_a_follower_copies_the_leader_and_joins_the_isr(leader, follower):
    topic, lpart = _leading(leader, isr=(1,))
    fpart = follower.follow(topic, lpart.topic_id)

    async def run():
        manager = ReplicaFetcherManager(follower)
        manager.add_partitions({(topic, 0): InitialFetchState(lpart.topic_id, 1, 1, 0)})
        assert manager.fetched() == {(topic, 0): 1}
        await _until(lambda: fpart.high_watermark == 5, "the follower's high watermark")
        await _until(lambda: leader.call(lambda: lpart.isr) == (1, 2), "the ISR expansion")
        await manager.shutdown()
    asyncio.run(run())
    assert leader.call(lambda: lpart.log_end_offset) == fpart.log_end_offset == 5
    assert _bytes(fpart) == leader.call(_bytes, lpart)
    assert fpart.log.leader_epoch_cache.entries == leader.call(lambda: lpart.log.leader_epoch_cache.entries)
    assert fpart.log.leader_epoch_cache.entries == ((0, 0), (1, 3))
    assert fpart.producer_state.entries()[11].last_seq == 1
    assert leader.call(lambda: lpart.followers[2].log_end_offset) == 5


def _diverged(leader, follower, epoch: int):
    """A topic led by broker 1 (``_leading``) whose follower holds the leader's offsets 0-2, then
    offsets 3-6 of its own written in ``epoch``: (topic, leader's partition, follower's)."""
    topic, lpart = _leading(leader)
    fpart = follower.follow(topic, lpart.topic_id)
    copied = leader.call(_bytes, lpart)
    fpart.append_records_as_follower(memoryview(copied)[:rb.batch_size_at(copied, 0)])  # offsets 0-2
    diverged = bytearray(make_batch(3, 4))
    rb.set_partition_leader_epoch(diverged, 0, epoch)
    fpart.append_records_as_follower(memoryview(diverged))
    return topic, lpart, fpart


class SyncRecorder:
    """Notes, in order, the writes of one partition's leader-epoch checkpoint, the fsyncs of
    the file and its directory (each slowed down: a sync the fetcher did not wait for ends
    after its next request) and the fetcher's requests (Fetch, OffsetForLeaderEpoch), each with
    its thread; only once ``recording`` is set."""

    def __init__(self, monkeypatch, part) -> None:
        self.directory = os.path.realpath(part.log.directory)
        self.checkpoint = os.path.join(self.directory, "leader-epoch-checkpoint")
        self.events = []  # (what, path or entries, thread)
        self.recording = False
        real_fsync, real_write = os.fsync, LeaderEpochCheckpointFile.write
        real_fetch, real_epoch = replica_fetcher.fetch_request, replica_fetcher.epoch_request

        def fsync(fd):
            path = os.path.realpath(f"/proc/self/fd/{fd}")
            if self.recording and path in (self.checkpoint, self.checkpoint + ".tmp", self.directory):
                time.sleep(0.2)
                self.events.append(("fsync", path, threading.get_ident()))
            return real_fsync(fd)

        def write(checkpoint, entries):
            if self.recording and os.path.realpath(checkpoint.path) == self.checkpoint:
                self.events.append(("write", tuple(entries), threading.get_ident()))
            return real_write(checkpoint, entries)

        def request(build):
            def noted(*args):
                if self.recording:
                    self.events.append(("request", build.__name__, threading.get_ident()))
                return build(*args)
            return noted
        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(LeaderEpochCheckpointFile, "write", write)
        monkeypatch.setattr(replica_fetcher, "fetch_request", request(real_fetch))
        monkeypatch.setattr(replica_fetcher, "epoch_request", request(real_epoch))

    def requests(self) -> int:
        return sum(e[0] == "request" for e in self.events)

    def assert_synced_off_the_loop_before_the_next_request(self, loop_thread: int) -> list:
        """Every checkpoint written was fsynced (file and directory) on another thread than
        the loop's, before the fetcher's next request; the entries written, in order."""
        events = self.events
        writes = [i for i, e in enumerate(events) if e[0] == "write"]
        assert [e for e in events if e[0] == "fsync" and e[2] == loop_thread] == []
        for i in writes:
            following = [e for e in events[i:] if e[0] != "write"]
            before_request = {e[1] for e in following[:next(j for j, e in enumerate(following)
                                                             if e[0] == "request")]}
            assert {self.checkpoint, self.directory} <= before_request, events
        return [events[i][1] for i in writes]


def test_a_new_epochs_checkpoint_is_made_durable_off_the_loop_before_the_next_fetch(leader, follower, monkeypatch):
    """The follower's first batches of epochs 0 and 1 write its leader-epoch checkpoint. Its
    fsyncs (the file's and its directory's) run on another thread than the event loop's, where
    they stalled every connection of the broker, and are done before the fetcher's next Fetch,
    which tells the leader that this replica has the batches."""
    topic, lpart = _leading(leader, isr=(1,))
    fpart = follower.follow(topic, lpart.topic_id)
    recorder = SyncRecorder(monkeypatch, fpart)

    async def run():
        recorder.recording = True
        manager = ReplicaFetcherManager(follower)
        manager.add_partitions({(topic, 0): InitialFetchState(lpart.topic_id, 1, 1, 0)})
        await _until(lambda: fpart.high_watermark == 5, "the follower's high watermark")
        await _until(lambda: recorder.requests() >= 3, "later fetches")
        await manager.shutdown()
        return threading.get_ident()
    loop_thread = asyncio.run(run())
    assert fpart.log.leader_epoch_cache.entries == ((0, 0), (1, 3))
    assert recorder.assert_synced_off_the_loop_before_the_next_request(loop_thread)


def test_a_truncations_checkpoint_is_made_durable_off_the_loop_before_the_next_request(leader, follower,
                                                                                        monkeypatch):
    """The follower's offsets 3-6 were written in an epoch (2) the leader never had: the
    leader has no end for it, the follower truncates to its high watermark (0) and cuts the
    epoch from its checkpoint. That rewrite is fsynced off the loop too (a former leader that
    rejoins may truncate thousands of partitions at once), before the fetcher's next request."""
    topic, lpart, fpart = _diverged(leader, follower, epoch=2)
    assert fpart.log.leader_epoch_cache.entries == ((0, 0), (2, 3))
    recorder = SyncRecorder(monkeypatch, fpart)

    async def run():
        recorder.recording = True
        manager = ReplicaFetcherManager(follower)
        manager.add_partitions({(topic, 0): InitialFetchState(lpart.topic_id, 1, 1, fpart.log_end_offset)})
        await _until(lambda: fpart.high_watermark == 5, "the follower to catch up")
        await _until(lambda: recorder.requests() >= 4, "later fetches")
        await manager.shutdown()
        return threading.get_ident()
    loop_thread = asyncio.run(run())
    assert _bytes(fpart) == leader.call(_bytes, lpart)
    written = recorder.assert_synced_off_the_loop_before_the_next_request(loop_thread)
    assert all(2 not in (e.epoch for e in entries) for entries in written)  # the cut's, then the copy's
    assert written[0] != ((0, 0), (1, 3)), written  # the truncation wrote one


def test_a_failed_sync_of_a_new_epochs_checkpoint_takes_the_log_directory_offline(leader, follower, monkeypatch):
    """The deferred sync of a follower's leader-epoch checkpoint fails (EIO): its log directory
    is reported failed, as a failed fsync of the checkpoint's own write would have."""
    import errno

    from odradek.storage import deferred_sync

    topic, lpart = _leading(leader, isr=(1,))
    fpart = follower.follow(topic, lpart.topic_id)

    def fail(paths):
        raise OSError(errno.EIO, "injected", paths[-1])
    monkeypatch.setattr(deferred_sync, "sync_paths", fail)

    async def run():
        manager = ReplicaFetcherManager(follower)
        manager.add_partitions({(topic, 0): InitialFetchState(lpart.topic_id, 1, 1, 0)})
        await _until(lambda: follower.log_manager.failure_channel.offline_log_dirs, "the directory offline")
        await manager.shutdown()
    asyncio.run(run())
    assert follower.log_manager.failure_channel.offline_log_dirs == [os.path.abspath(follower.log_manager.all_log_dirs[0])]
    assert fpart.log_end_offset > 0


def test_a_diverged_follower_truncates_to_where_its_epoch_ends_on_the_leader(leader, follower):
    """The follower holds offsets 3-6 written in epoch 0 that the leader never had (it wrote
    3-4 in epoch 1): asked where epoch 0 ends, the leader answers 3, and the follower cuts
    its own 3-6 before copying the leader's."""
    topic, lpart, fpart = _diverged(leader, follower, epoch=0)
    assert fpart.log_end_offset == 7

    async def run():
        manager = ReplicaFetcherManager(follower)
        manager.add_partitions({(topic, 0): InitialFetchState(lpart.topic_id, 1, 1, fpart.log_end_offset)})
        await _until(lambda: fpart.high_watermark == 5, "the follower to catch up")
        await manager.shutdown()
    asyncio.run(run())
    assert fpart.log_end_offset == 5
    assert _bytes(fpart) == leader.call(_bytes, lpart)
    assert fpart.log.leader_epoch_cache.entries == ((0, 0), (1, 3))


def test_a_follower_with_an_old_leader_epoch_is_fenced_until_the_next_leader_and_isr(leader, follower):
    topic, lpart = _leading(leader)
    fpart = follower.follow(topic, lpart.topic_id, leader_epoch=0)
    copied = leader.call(_bytes, lpart)
    fpart.append_records_as_follower(memoryview(copied)[:rb.batch_size_at(copied, 0)])  # offsets 0-2

    async def run():
        manager = ReplicaFetcherManager(follower)
        manager.add_partitions({(topic, 0): InitialFetchState(lpart.topic_id, 1, 0, 3)})
        (fetcher,) = manager.fetchers.values()
        await _until(lambda: fetcher.partitions[(topic, 0)].state == FENCED, "fencing")
        assert fpart.log_end_offset == 3
        fpart.leader_epoch = 1  # a newer LeaderAndIsr
        manager.add_partitions({(topic, 0): InitialFetchState(lpart.topic_id, 1, 1, 3)})
        await _until(lambda: fpart.log_end_offset == 5, "fetching at the new epoch")
        assert fetcher.partitions[(topic, 0)].state == FETCHING
        manager.remove_partitions([(topic, 0)])
        assert manager.fetchers == {} and manager.fetched() == {}
        await manager.shutdown()
    asyncio.run(run())


def test_a_removed_partition_is_not_appended_to_any_more(leader, follower):
    topic, lpart = _leading(leader)
    fpart = follower.follow(topic, lpart.topic_id)

    async def run():
        manager = ReplicaFetcherManager(follower)
        manager.add_partitions({(topic, 0): InitialFetchState(lpart.topic_id, 1, 1, 0)})
        await _until(lambda: fpart.log_end_offset == 5, "the copy")
        manager.remove_partitions([(topic, 0)])
        wire = WireClient(leader.bootstrap)
        wire.request("Produce", 9, produce_body(topic, 0, make_batch(0, 2)))
        wire.close()
        await asyncio.sleep(0.3)  # several fetch rounds' worth
        assert fpart.log_end_offset == 5
        await manager.shutdown()
    asyncio.run(run())


def test_a_follower_behind_the_leaders_log_start_starts_over_there(leader, follower):
    topic, lpart = _leading(leader, isr=(1,))
    leader.call(lambda: lpart.log.delete_records(3))  # DeleteRecords (or retention) on the leader
    fpart = follower.follow(topic, lpart.topic_id)

    async def run():
        manager = ReplicaFetcherManager(follower)
        manager.add_partitions({(topic, 0): InitialFetchState(lpart.topic_id, 1, 1, 0)})
        await _until(lambda: fpart.log_end_offset == 5, "the copy from the leader's log start")
        await manager.shutdown()
    asyncio.run(run())
    assert fpart.log_start_offset == 3
    assert _bytes(fpart, 3) == leader.call(_bytes, lpart, 3)
    assert fpart.log.leader_epoch_cache.entries == ((1, 3),)
