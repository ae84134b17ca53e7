import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.coordinator.producer_ids import (
    MAX_PRODUCER_ID,
    ProducerIdAndEpoch,
    ProducerIdManager,
    ProducerIdsExhaustedError,
    next_block_start,
)


class Store:
    """The last reserved block's end, durable as the broker's znode would keep it."""

    def __init__(self, block_end=None):
        self.block_end = block_end
        self.writes = []

    def reserve(self, block_size):
        start = next_block_start(self.block_end, block_size)
        self.block_end = start + block_size - 1
        self.writes.append(start)
        return start


def test_ids_come_in_order_from_reserved_blocks():
    store = Store()
    manager = ProducerIdManager(store.reserve, block_size=3)
    assert store.writes == []  # building a manager writes nothing
    assert [manager.next_producer_id() for _ in range(7)] == list(range(7))
    assert store.writes == [0, 3, 6]


def test_every_id_lies_in_a_block_reserved_before_it_was_handed_out():
    store = Store(99)
    manager = ProducerIdManager(store.reserve, block_size=4)
    for _ in range(10):
        producer_id = manager.next_producer_id()
        assert 100 <= producer_id <= store.block_end


def test_a_restart_never_repeats_an_id():
    store = Store()
    first = ProducerIdManager(store.reserve, block_size=10)
    seen = {first.next_producer_id() for _ in range(4)}
    second = ProducerIdManager(store.reserve, block_size=10)
    assert second.next_producer_id() == 10  # the rest of the first block is skipped
    assert 10 not in seen


def test_init_producer_id_gives_a_new_id_with_epoch_zero_each_call():
    manager = ProducerIdManager(Store().reserve)
    assert manager.init_producer_id() == ProducerIdAndEpoch(0, 0)
    assert manager.init_producer_id() == ProducerIdAndEpoch(1, 0)


def test_a_failed_reservation_hands_out_nothing_and_the_next_call_retries():
    store = Store()
    failures = [OSError("disk full")]

    def reserve(size):
        if failures:
            raise failures.pop()
        return store.reserve(size)

    manager = ProducerIdManager(reserve, block_size=5)
    with pytest.raises(OSError):
        manager.next_producer_id()
    assert manager.next_producer_id() == 0
    assert store.writes == [0]


def test_exhaustion_is_a_clear_error():
    store = Store(MAX_PRODUCER_ID - 2)
    manager = ProducerIdManager(store.reserve, block_size=2)
    assert manager.next_producer_id() == MAX_PRODUCER_ID - 1
    assert manager.next_producer_id() == MAX_PRODUCER_ID
    with pytest.raises(ProducerIdsExhaustedError):
        manager.next_producer_id()
    with pytest.raises(ProducerIdsExhaustedError):  # a reservation past the limit is refused too
        ProducerIdManager(lambda size: MAX_PRODUCER_ID, block_size=2).next_producer_id()


def test_invalid_block_size_is_refused():
    with pytest.raises(ValueError):
        ProducerIdManager(Store().reserve, block_size=0)


@given(
    block_size=st.integers(1, 5),
    runs=st.lists(st.tuples(st.integers(0, 1), st.integers(0, 12)), min_size=1, max_size=8),
)
def test_ids_are_unique_across_restarts_and_brokers_sharing_the_store(block_size, runs):
    store = Store()
    managers = [ProducerIdManager(store.reserve, block_size=block_size) for _ in range(2)]
    seen = []
    for which, taken in runs:
        if taken == 0:
            managers[which] = ProducerIdManager(store.reserve, block_size=block_size)  # a restart
        seen.extend(managers[which].next_producer_id() for _ in range(taken))
    assert len(seen) == len(set(seen))
    assert all(producer_id <= store.block_end for producer_id in seen)
