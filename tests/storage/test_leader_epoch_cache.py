"""``LeaderEpochFileCache``: Kafka's ``LeaderEpochFileCacheTest`` cases, and the file."""

import pytest

from odradek.storage.leader_epoch_cache import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    LeaderEpochFileCache,
)
from odradek.storage.leader_epoch_checkpoint import EpochEntry, LeaderEpochCheckpointFile

UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


@pytest.fixture
def checkpoint(tmp_path):
    return LeaderEpochCheckpointFile.in_directory(str(tmp_path))


@pytest.fixture
def cache(checkpoint):
    return LeaderEpochFileCache(checkpoint)


def _cache(*entries):
    return LeaderEpochFileCache(None, [EpochEntry(*e) for e in entries])


def test_assign_then_latest_epoch_ends_at_the_log_end(cache):
    cache.assign(2, 10)
    assert cache.latest_epoch == 2
    assert cache.entries == (EpochEntry(2, 10),)
    assert cache.end_offset_for(2, 11) == (2, 11)


def test_same_epoch_at_a_later_offset_is_ignored(cache):
    cache.assign(2, 6)
    assert not cache.assign(2, 10)
    assert cache.entries == ((2, 6),)


def test_same_epoch_at_an_earlier_offset_moves_its_start(cache):
    cache.assign(5, 11)
    cache.assign(6, 12)
    cache.assign(7, 13)
    cache.assign(7, 12)  # epoch 7 starts earlier: epoch 6 had nothing
    assert cache.entries == ((5, 11), (7, 12))
    assert cache.end_offset_for(5, 0) == (5, 12)
    assert cache.end_offset_for(6, 0) == (5, 12)


def test_new_epoch_at_the_same_offset_replaces_the_previous(cache):
    cache.assign(2, 9)
    cache.assign(3, 9)
    assert cache.entries == ((3, 9),)


def test_new_epoch_at_an_earlier_offset_wins(cache):
    cache.assign(2, 6)
    cache.assign(3, 5)
    assert cache.entries == ((3, 5),)


def test_lower_epoch_at_a_later_offset_drops_the_higher_epochs(cache):
    # Kafka's shouldEnforceMonotonicallyIncreasingEpochs: the log is already inconsistent,
    # the cache keeps epochs and offsets increasing by dropping the conflicting entries.
    cache.assign(1, 5)
    cache.assign(2, 6)
    cache.assign(1, 7)
    assert cache.latest_epoch == 1
    assert cache.entries == ((1, 7),)
    assert cache.end_offset_for(1, 8) == (1, 8)
    assert cache.end_offset_for(2, 8) == UNDEFINED


def test_negative_values_are_refused(cache):
    with pytest.raises(ValueError):
        cache.assign(-1, 0)
    with pytest.raises(ValueError):
        cache.assign(0, -1)


def test_end_offset_for_cases():
    cache = _cache((0, 10), (2, 13), (4, 17))
    assert cache.end_offset_for(4, 20) == (4, 20)  # the latest epoch: the log end offset
    assert cache.end_offset_for(0, 20) == (0, 13)
    assert cache.end_offset_for(1, 20) == (0, 13)  # no epoch 1: the one below, ending at 2's start
    assert cache.end_offset_for(2, 20) == (2, 17)
    assert cache.end_offset_for(3, 20) == (2, 17)
    assert cache.end_offset_for(5, 20) == UNDEFINED  # above every epoch
    assert cache.end_offset_for(UNDEFINED_EPOCH, 20) == UNDEFINED


def test_end_offset_for_an_epoch_below_the_first():
    # Kafka since 2.0 (KIP-279): the requested epoch with the first entry's start offset.
    cache = _cache((5, 11), (6, 12), (7, 13))
    assert cache.end_offset_for(4, 0) == (4, 11)


def test_end_offset_for_on_an_empty_cache():
    cache = _cache()
    assert cache.end_offset_for(0, 0) == UNDEFINED
    assert cache.end_offset_for(7, 0) == UNDEFINED
    assert cache.end_offset_for(UNDEFINED_EPOCH, 73) == UNDEFINED
    assert cache.latest_epoch is None


def test_epochs_as_leaders_change_many_times():
    cache = _cache()
    cache.assign(0, 0)
    cache.assign(1, 0)
    assert cache.latest_epoch == 1
    assert cache.end_offset_for(1, 0) == (1, 0)
    assert cache.end_offset_for(0, 0) == (0, 0)
    assert cache.end_offset_for(1, 5) == (1, 5)
    cache.assign(2, 5)
    assert cache.end_offset_for(2, 10) == (2, 10)
    assert cache.end_offset_for(1, 10) == (1, 5)
    assert cache.end_offset_for(0, 10) == (0, 0)


def test_follower_receiving_many_batches():
    cache = _cache()
    for offset in range(9):
        cache.assign(offset // 3, offset)
    assert cache.entries == ((0, 0), (1, 3), (2, 6))
    assert cache.end_offset_for(2, 9) == (2, 9)
    assert cache.end_offset_for(0, 9) == (0, 3)
    assert cache.end_offset_for(1, 9) == (1, 6)


@pytest.mark.parametrize("offset, left", [
    (8, [(2, 6)]),  # on an epoch boundary: that epoch goes too
    (9, [(2, 6), (3, 8)]),
    (11, [(2, 6), (3, 8)]),
    (12, [(2, 6), (3, 8), (4, 11)]),
    (6, []),
    (UNDEFINED_EPOCH_OFFSET, [(2, 6), (3, 8), (4, 11)]),
])
def test_truncate_from_end(offset, left):
    cache = _cache((2, 6), (3, 8), (4, 11))
    cache.truncate_from_end(offset)
    assert cache.entries == tuple(left)


@pytest.mark.parametrize("offset, left", [
    (8, [(3, 8), (4, 11)]),  # on a boundary: kept as it is
    (9, [(3, 9), (4, 11)]),  # between: the epoch holding it now starts there
    (1, [(2, 6), (3, 8), (4, 11)]),
    (6, [(2, 6), (3, 8), (4, 11)]),
    (11, [(4, 11)]),
    (15, [(4, 15)]),
    (UNDEFINED_EPOCH_OFFSET, [(2, 6), (3, 8), (4, 11)]),
])
def test_truncate_from_start(offset, left):
    cache = _cache((2, 6), (3, 8), (4, 11))
    cache.truncate_from_start(offset)
    assert cache.entries == tuple(left)


def test_truncations_of_an_empty_cache_change_nothing():
    cache = _cache()
    assert not cache.truncate_from_start(7)
    assert not cache.truncate_from_end(7)


def test_previous_and_next_lookups():
    cache = _cache()
    assert cache.previous_epoch() is None
    cache.assign(2, 10)
    assert cache.previous_epoch() is None and cache.previous_epoch(2) is None
    cache.assign(4, 15)
    cache.assign(10, 20)
    assert cache.previous_epoch() == 4 and cache.previous_epoch(10) == 4 and cache.previous_epoch(4) == 2
    cache.truncate_from_end(18)
    assert cache.previous_epoch() == 2
    assert cache.epoch_entry(4) == (4, 15) and cache.epoch_entry(3) is None
    assert cache.earliest_entry == (2, 10)


def test_epoch_for_offset():
    cache = _cache((0, 10), (1, 20), (5, 30))
    assert [cache.epoch_for_offset(o) for o in (25, 20, 30, 50, 5)] == [1, 1, 5, 5, None]


def test_entries_in_range_changes_nothing():
    cache = _cache((2, 6), (3, 8), (4, 11))
    assert cache.entries_in_range(9, 11) == [(3, 9)]
    assert cache.entries == ((2, 6), (3, 8), (4, 11))


def test_every_change_is_written_and_read_back(checkpoint, cache):
    cache.assign(2, 6)
    cache.assign(3, 8)
    cache.assign(4, 11)
    assert checkpoint.read() == [(2, 6), (3, 8), (4, 11)]
    cache.truncate_from_end(11)
    cache.truncate_from_start(8)
    assert checkpoint.read() == [(3, 8)]
    again = LeaderEpochFileCache(checkpoint, checkpoint.read())
    assert again.entries == ((3, 8),)
    cache.clear()
    assert checkpoint.read() == []


def test_a_failed_write_changes_nothing(tmp_path):
    checkpoint = LeaderEpochCheckpointFile(str(tmp_path / "missing-dir" / "leader-epoch-checkpoint"))
    cache = LeaderEpochFileCache(checkpoint)
    with pytest.raises(OSError):
        cache.assign(1, 0)
    assert cache.entries == ()


def test_a_failed_write_after_a_truncation_keeps_the_cut(tmp_path, caplog):
    checkpoint = LeaderEpochCheckpointFile.in_directory(str(tmp_path))
    cache = LeaderEpochFileCache(checkpoint)
    cache.assign(1, 0)
    cache.assign(2, 5)
    checkpoint.path = str(tmp_path / "gone" / "leader-epoch-checkpoint")  # writes now fail
    assert cache.truncate_from_end(5)  # the log lost those batches already: not raised
    assert cache.entries == ((1, 0),)
    assert "could not write" in caplog.text
