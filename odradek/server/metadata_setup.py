"""Opening the broker's metadata: the store, the cluster facade, the producer id blocks.

With ``zookeeper.connect`` set the store is ZooKeeper (a cluster); otherwise an embedded,
file-backed store in ``<first log dir>/__metadata`` (one broker, no ZooKeeper), with the same
znode layout either way.
"""

from __future__ import annotations

import os

from odradek.coordinator.producer_ids import DEFAULT_BLOCK_SIZE, ProducerIdManager, next_block_start
from odradek.metadata import layout
from odradek.metadata.cluster_metadata import ClusterMetadata
from odradek.metadata.errors import BadVersionError, NodeExistsError, NoNodeError

EMBEDDED_DIR = "__metadata"


def open_metadata(config) -> ClusterMetadata:
    connect = config["zookeeper.connect"]
    if connect:
        from odradek.metadata.zookeeper_store import ZooKeeperStore

        hosts, _, chroot = connect.partition("/")
        session_ms = config["zookeeper.session.timeout.ms"]
        connect_ms = config["zookeeper.connection.timeout.ms"] or session_ms
        store = ZooKeeperStore(hosts, chroot="/" + chroot if chroot else None,
                               connect_timeout=connect_ms / 1000, session_timeout=session_ms / 1000)
        # partition states from the controller's requests, not from 3 ZooKeeper messages a
        # change for every broker (``metadata/controller_states.py``)
        return ClusterMetadata(store, states_from_controller=True)
    from odradek.metadata.embedded_store import EmbeddedStore

    return ClusterMetadata(EmbeddedStore(os.path.join(config.log_dirs[0], EMBEDDED_DIR)))


def open_producer_ids(metadata: ClusterMetadata, broker_id: int) -> ProducerIdManager:
    """Producer ids reserved in blocks under ``/latest_producer_id_block`` (Kafka's znode).

    A block is taken by a compare-and-set of the znode at the version it was read at: a
    broker that lost the race to another reads again and takes the block after that one.
    """
    store = metadata.store

    def reserve(block_size: int) -> int:
        while True:
            try:
                data, version = store.get(layout.LATEST_PRODUCER_ID_BLOCK)
            except NoNodeError:
                data, version = None, None
            end = None if data is None else layout.decode_producer_id_block(data)[2]
            start = next_block_start(end, block_size)
            block = layout.encode_producer_id_block(broker_id, start, start + block_size - 1)
            try:
                if version is None:
                    store.create(layout.LATEST_PRODUCER_ID_BLOCK, block)
                else:
                    store.set(layout.LATEST_PRODUCER_ID_BLOCK, block, version)
                return start
            except (BadVersionError, NodeExistsError):
                continue  # another broker took a block since the read

    return ProducerIdManager(reserve, DEFAULT_BLOCK_SIZE)
