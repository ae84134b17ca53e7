"""`MetadataCache`: new topics are read in bulk (their assignments, configs and partition
states with `MetadataStore.get_many`, never one `get` per znode) and published as one image."""

from __future__ import annotations

import uuid

from odradek.metadata import layout
from odradek.metadata.embedded_store import EmbeddedStore
from odradek.metadata.layout import PartitionState, TopicAssignment
from odradek.metadata.metadata_cache import MetadataCache

TOPICS, PARTITIONS = 3, 4


class CountingStore(EmbeddedStore):
    """Notes the paths of every single `get` and every `get_many`."""

    def __init__(self) -> None:
        super().__init__()
        self.gets: list[str] = []
        self.bulk: list[list[str]] = []

    def get(self, path):
        self.gets.append(path)
        return super().get(path)

    def get_many(self, paths):
        self.bulk.append(list(paths))
        return [self._one(p) for p in paths]

    def _one(self, path):
        try:
            return super().get(path)
        except Exception:  # noqa: BLE001 - no znode
            return None


def add_topic(store, i: int) -> None:
    name = f"t{i}"
    parts = {p: (1, 2) for p in range(PARTITIONS)}
    store.create(layout.topic_path(name),
                 TopicAssignment(name, uuid.UUID(int=i + 1), parts).to_json(), make_parents=True)
    store.create(layout.topic_config_path(name), layout.encode_config({"retention.ms": str(i)}),
                 make_parents=True)
    for p in range(PARTITIONS):
        store.create(layout.partition_state_path(name, p),
                     PartitionState(1, i, (1, 2), 1).to_json(), make_parents=True)


def test_new_topics_are_read_in_bulk_and_published_once():
    store = CountingStore()
    for i in range(TOPICS):
        add_topic(store, i)
    cache = MetadataCache(store)
    images = []
    cache.add_listener(images.append)
    cache.start()
    topic_reads = [p for p in store.gets if p.startswith((layout.BROKER_TOPICS, "/config/topics"))]
    assert topic_reads == []
    assert len(store.bulk) == 2  # assignments and configs, then every partition state
    assert sum(len(paths) for paths in store.bulk) == TOPICS * (2 + PARTITIONS)
    image = cache.image
    assert sorted(image.topics) == [f"t{i}" for i in range(TOPICS)]
    assert image.topic_ids[uuid.UUID(int=2)] == "t1"
    assert dict(image.topic_configs["t2"]) == {"retention.ms": "2"}
    assert image.partition_states["t1"][3].leader_epoch == 1
    assert sum(1 for im in images if im.topics) == 1  # one image for all the new topics
    cache.close()
