import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.coordinator.producer_ids import (
    MAX_PRODUCER_ID,
    ProducerIdAndEpoch,
    ProducerIdManager,
    ProducerIdsExhaustedError,
)


class Store:
    """A durable counter as the broker would keep it in a file."""

    def __init__(self, value=0):
        self.value = value
        self.writes = []

    def persist(self, next_block_start):
        self.value = next_block_start
        self.writes.append(next_block_start)


def test_ids_come_in_order_from_persisted_blocks():
    store = Store()
    manager = ProducerIdManager(store.value, store.persist, block_size=3)
    assert store.writes == []  # building a manager writes nothing
    ids = [manager.next_producer_id() for _ in range(7)]
    assert ids == list(range(7))
    assert store.writes == [3, 6, 9]
    assert manager.next_block_start == 9


def test_every_id_is_below_the_value_recorded_before_it_was_handed_out():
    store = Store(100)
    manager = ProducerIdManager(store.value, store.persist, block_size=4)
    for _ in range(10):
        producer_id = manager.next_producer_id()
        assert 100 <= producer_id < store.value


def test_a_restart_never_repeats_an_id():
    store = Store()
    first = ProducerIdManager(store.value, store.persist, block_size=10)
    seen = {first.next_producer_id() for _ in range(4)}
    second = ProducerIdManager(store.value, store.persist, block_size=10)
    assert second.next_producer_id() == 10  # the rest of the first block is skipped
    assert 10 not in seen


def test_init_producer_id_gives_a_new_id_with_epoch_zero_each_call():
    manager = ProducerIdManager(0, Store().persist)
    assert manager.init_producer_id() == ProducerIdAndEpoch(0, 0)
    assert manager.init_producer_id() == ProducerIdAndEpoch(1, 0)


def test_a_failed_persist_hands_out_nothing_and_the_next_call_retries():
    store = Store()
    failures = [OSError("disk full")]

    def persist(value):
        if failures:
            raise failures.pop()
        store.persist(value)

    manager = ProducerIdManager(0, persist, block_size=5)
    with pytest.raises(OSError):
        manager.next_producer_id()
    assert manager.next_block_start == 0
    assert manager.next_producer_id() == 0
    assert store.writes == [5]


def test_exhaustion_is_a_clear_error():
    manager = ProducerIdManager(MAX_PRODUCER_ID - 1, Store().persist, block_size=2)
    assert manager.next_producer_id() == MAX_PRODUCER_ID - 1
    assert manager.next_producer_id() == MAX_PRODUCER_ID
    with pytest.raises(ProducerIdsExhaustedError):
        manager.next_producer_id()


@pytest.mark.parametrize("start, block_size", [(-1, 10), (MAX_PRODUCER_ID + 2, 10), (0, 0)])
def test_invalid_arguments_are_refused(start, block_size):
    with pytest.raises(ValueError):
        ProducerIdManager(start, Store().persist, block_size=block_size)


@given(
    block_size=st.integers(1, 5),
    runs=st.lists(st.integers(0, 12), min_size=1, max_size=6),
)
def test_ids_are_unique_across_any_sequence_of_restarts(block_size, runs):
    store = Store()
    seen = []
    for taken in runs:
        manager = ProducerIdManager(store.value, store.persist, block_size=block_size)
        seen.extend(manager.next_producer_id() for _ in range(taken))
    assert len(seen) == len(set(seen))
    assert all(producer_id < store.value for producer_id in seen)
