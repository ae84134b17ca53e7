"""A cluster broker's partition states come from the controller's requests: each partition's
state is read once when its topic is learned, no watch is set on it, and a controller's state
is taken only where newer (a greater znode version) for the same topic (id)."""

from __future__ import annotations

import uuid

from odradek.metadata import layout
from odradek.metadata.controller_states import ControllerState, with_controller_states
from odradek.metadata.embedded_store import EmbeddedStore
from odradek.metadata.layout import PartitionState, TopicAssignment
from odradek.metadata.metadata_cache import MetadataCache
from tests.metadata.store_contract import wait_for

TOPIC_ID = uuid.UUID(int=7)


class WatchCountingStore(EmbeddedStore):
    """Counts the data watches set on partition state znodes."""

    def __init__(self) -> None:
        super().__init__()
        self.state_watches = 0

    def watch_data(self, path, callback):
        if path.endswith("/state"):
            self.state_watches += 1
        return super().watch_data(path, callback)


class DeafStore(EmbeddedStore):
    """Its watches on the topic list and on topics' assignments never fire: like a broker
    whose ZooKeeper watch events come late, it learns of topics only by reading."""

    def watch_data(self, path, callback):
        if path.startswith(layout.BROKER_TOPICS + "/") and path.count("/") == 3:
            callback = lambda _: None  # noqa: E731
        return super().watch_data(path, callback)

    def watch_children(self, path, callback):
        if path == layout.BROKER_TOPICS:
            callback = lambda _: None  # noqa: E731
        return super().watch_children(path, callback)


def write_topic(store, name: str = "t", partitions: int = 2, topic_id: uuid.UUID = TOPIC_ID) -> None:
    store.create(layout.topic_path(name),
                 TopicAssignment(name, topic_id, {p: (1, 2) for p in range(partitions)}).to_json(),
                 make_parents=True)
    for p in range(partitions):
        store.create(layout.partition_state_path(name, p), PartitionState(1, 1, (1, 2), 1).to_json(),
                     make_parents=True)


def state(leader: int, epoch: int, version: int) -> PartitionState:
    return PartitionState(leader, epoch, (leader,), 1, version)


def empty() -> tuple[EmbeddedStore, MetadataCache]:
    """A cluster broker's cache of a store that has no topic yet."""
    store = EmbeddedStore()
    cache = MetadataCache(store, states_from_controller=True)
    cache.start()
    return store, cache


def started(states_from_controller: bool) -> tuple[WatchCountingStore, MetadataCache]:
    store = WatchCountingStore()
    write_topic(store)
    cache = MetadataCache(store, states_from_controller=states_from_controller)
    cache.start()
    return store, cache


def test_states_are_read_once_and_not_watched():
    store, cache = started(states_from_controller=True)
    assert cache.image.partition_state("t", 1).leader == 1  # read when the topic was learned
    assert store.state_watches == 0
    store.set(layout.partition_state_path("t", 1), PartitionState(2, 2, (2,), 1).to_json())
    assert cache.image.partition_state("t", 1).leader == 1  # a write alone does not reach it
    cache.take_controller_states([ControllerState("t", TOPIC_ID, 1, state(2, 2, 1))])
    assert cache.image.partition_state("t", 1).leader == 2
    cache.close()


def test_a_watching_cache_still_follows_the_znodes():
    store, cache = started(states_from_controller=False)
    assert store.state_watches == 2
    store.set(layout.partition_state_path("t", 1), PartitionState(2, 2, (2,), 1).to_json())
    assert cache.image.partition_state("t", 1).leader == 2
    cache.close()


def test_only_newer_versions_are_taken():
    _, cache = started(states_from_controller=True)
    cache.take_controller_states([ControllerState("t", TOPIC_ID, 0, state(2, 5, 3))])
    cache.take_controller_states([ControllerState("t", TOPIC_ID, 0, state(1, 4, 2)),  # late
                                  ControllerState("t", TOPIC_ID, 0, state(1, 6, 3))])  # same version
    assert cache.image.partition_state("t", 0) == state(2, 5, 3)
    cache.close()


def test_the_newest_of_one_request_wins_whatever_its_place():
    _, cache = started(states_from_controller=True)
    cache.take_controller_states([ControllerState("t", TOPIC_ID, 0, state(2, 5, 3)),
                                  ControllerState("t", None, 0, state(1, 4, 2))])
    assert cache.image.partition_state("t", 0).leader == 2
    cache.close()


def test_states_of_another_incarnation_or_unknown_partitions_are_left_out_of_the_image():
    _, cache = started(states_from_controller=True)
    before = cache.image
    cache.take_controller_states([
        ControllerState("t", uuid.UUID(int=8), 0, state(2, 5, 9)),  # the topic of that name before
        ControllerState("t", TOPIC_ID, 2, state(2, 5, 9)),  # no such partition (yet)
        ControllerState("u", None, 0, state(2, 5, 9)),  # a topic not learned yet
    ])
    assert cache.image is before
    cache.close()


def test_the_merge_copies_only_the_topics_it_changes():
    store = EmbeddedStore()
    write_topic(store, "a")
    write_topic(store, "b", topic_id=uuid.UUID(int=9))
    cache = MetadataCache(store, states_from_controller=True)
    cache.start()
    image = cache.image
    merged = with_controller_states(image, [ControllerState("a", None, 0, state(2, 2, 4))])
    assert merged.partition_states["b"] is image.partition_states["b"]
    assert merged.partition_state("a", 0).leader == 2
    assert merged.partition_state("a", 1) == image.partition_state("a", 1)
    assert with_controller_states(image, []) is None
    cache.close()


def test_a_topic_created_again_starts_from_its_own_states():
    store, cache = started(states_from_controller=True)
    cache.take_controller_states([ControllerState("t", TOPIC_ID, 0, state(2, 9, 9))])
    store.delete(layout.topic_path("t"), recursive=True)
    write_topic(store, topic_id=uuid.UUID(int=8))
    assert cache.image.topics["t"].topic_id == uuid.UUID(int=8)
    # learned with its assignment, before its states were written: none, and no older one kept
    assert cache.image.partition_state("t", 0) is None
    cache.take_controller_states([ControllerState("t", uuid.UUID(int=8), 0, state(2, 2, 0))])
    assert cache.image.partition_state("t", 0).leader == 2
    cache.close()


def test_states_that_come_before_their_topic_are_kept_until_it_is_learned():
    store, cache = empty()
    cache.take_controller_states([ControllerState("t", TOPIC_ID, 0, state(3, 4, 5)),
                                  ControllerState("t", uuid.UUID(int=8), 1, state(3, 4, 5))])
    assert cache.image.topic("t") is None
    # the broker's store lags: the topic is there, its states not yet
    store.create(layout.topic_path("t"),
                 TopicAssignment("t", TOPIC_ID, {0: (1, 2), 1: (1, 2)}).to_json(), make_parents=True)
    assert cache.image.partition_state("t", 0) == state(3, 4, 5)
    assert cache.image.partition_state("t", 1) is None  # another incarnation's
    cache.close()


def test_a_topic_never_learned_keeps_one_state_per_partition():
    _, cache = empty()
    for version in range(50):
        cache.take_controller_states([ControllerState("gone", TOPIC_ID, 0, state(1, version, version))])
    cache.take_controller_states([ControllerState("gone", TOPIC_ID, 0, state(1, 7, 7))])  # late
    assert [s.state.zk_version for s in cache._early_states["gone"].values()] == [49]
    cache.close()


def test_states_of_partitions_added_later_are_kept_until_the_assignment_is_read():
    store, cache = started(states_from_controller=True)
    cache.take_controller_states([ControllerState("t", TOPIC_ID, 2, state(3, 4, 5))])
    assert cache.image.partition_state("t", 2) is None
    # the broker's store lags: the new assignment is there, the new partition's state not yet
    store.set(layout.topic_path("t"),
              TopicAssignment("t", TOPIC_ID, {p: (1, 2) for p in range(3)}).to_json())
    assert cache.image.partition_state("t", 2) == state(3, 4, 5)
    cache.close()


def test_states_of_a_topic_created_again_can_come_before_its_new_assignment():
    store, cache = started(states_from_controller=True)
    new_id = uuid.UUID(int=8)
    cache.take_controller_states([ControllerState("t", new_id, 0, state(2, 0, 0))])
    assert cache.image.partition_state("t", 0).leader == 1  # still the old topic's
    store.delete(layout.topic_path("t"), recursive=True)
    store.create(layout.topic_path("t"), TopicAssignment("t", new_id, {0: (1, 2), 1: (1, 2)}).to_json(),
                 make_parents=True)
    assert cache.image.partition_state("t", 0) == state(2, 0, 0)
    cache.close()


def test_early_states_of_an_assignment_newer_than_the_one_read_are_kept_for_it():
    store, cache = empty()
    # states of partitions 0 and 2 before the topic is learned, and then with 2 partitions only
    cache.take_controller_states([ControllerState("t", TOPIC_ID, 0, state(3, 4, 5)),
                                  ControllerState("t", TOPIC_ID, 2, state(3, 4, 5))])
    write_topic(store, partitions=2)
    assert cache.image.partition_state("t", 0) == state(3, 4, 5)
    store.set(layout.topic_path("t"), TopicAssignment("t", TOPIC_ID, {p: (1, 2) for p in range(3)}).to_json())
    assert cache.image.partition_state("t", 2) == state(3, 4, 5)
    cache.close()


def deaf() -> tuple[DeafStore, MetadataCache]:
    store = DeafStore()
    cache = MetadataCache(store, states_from_controller=True)
    cache.start()
    return store, cache


def test_a_topic_the_controller_names_is_learned_without_its_watch():
    store, cache = deaf()
    write_topic(store, "new")
    assert cache.image.topic("new") is None  # its watch says nothing
    cache.take_controller_states([ControllerState("new", TOPIC_ID, 0, state(3, 4, 5))])
    wait_for(lambda: cache.image.partition_state("new", 0) == state(3, 4, 5), "the topic learned")
    assert cache.image.partition_state("new", 1).leader == 1  # read with it
    cache.close()


def test_partitions_the_controller_names_are_learned_without_their_watch():
    store, cache = deaf()
    write_topic(store, "t", partitions=1)
    cache.take_controller_states([ControllerState("t", TOPIC_ID, 0, state(3, 4, 5))])
    wait_for(lambda: cache.image.topic("t") is not None, "the topic learned")
    store.set(layout.topic_path("t"), TopicAssignment("t", TOPIC_ID, {p: (1, 2) for p in range(2)}).to_json())
    cache.take_controller_states([ControllerState("t", TOPIC_ID, 1, state(3, 4, 5))])
    wait_for(lambda: cache.image.partition_state("t", 1) == state(3, 4, 5), "the new partition learned")
    cache.close()
