"""Opening the broker's metadata: the store, the cluster facade, the producer id blocks.

With ``zookeeper.connect`` set the store is ZooKeeper (a cluster); otherwise an embedded,
file-backed store in ``<first log dir>/__metadata`` (one broker, no ZooKeeper), with the same
znode layout either way.
"""

from __future__ import annotations

import os

from odradek.coordinator.producer_ids import DEFAULT_BLOCK_SIZE, ProducerIdManager
from odradek.metadata import layout
from odradek.metadata.cluster_metadata import ClusterMetadata
from odradek.metadata.errors import NodeExistsError, NoNodeError

EMBEDDED_DIR = "__metadata"


def open_metadata(config) -> ClusterMetadata:
    connect = config["zookeeper.connect"]
    if connect:
        from odradek.metadata.zookeeper_store import ZooKeeperStore

        hosts, _, chroot = connect.partition("/")
        store = ZooKeeperStore(hosts, chroot="/" + chroot if chroot else None)
    else:
        from odradek.metadata.embedded_store import EmbeddedStore

        store = EmbeddedStore(os.path.join(config.log_dirs[0], EMBEDDED_DIR))
    return ClusterMetadata(store)


def open_producer_ids(metadata: ClusterMetadata, broker_id: int) -> ProducerIdManager:
    """Producer ids reserved in blocks under ``/latest_producer_id_block`` (Kafka's znode)."""
    store = metadata.store
    try:
        data, _ = store.get(layout.LATEST_PRODUCER_ID_BLOCK)
        _, _, block_end = layout.decode_producer_id_block(data)
        next_start = block_end + 1
    except NoNodeError:
        next_start = 0

    def persist(end: int) -> None:
        data = layout.encode_producer_id_block(broker_id, end - DEFAULT_BLOCK_SIZE, end - 1)
        try:
            store.set(layout.LATEST_PRODUCER_ID_BLOCK, data)
        except NoNodeError:
            try:
                store.create(layout.LATEST_PRODUCER_ID_BLOCK, data)
            except NodeExistsError:
                store.set(layout.LATEST_PRODUCER_ID_BLOCK, data)

    return ProducerIdManager(next_start, persist)
