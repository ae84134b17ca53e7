"""Cluster metadata behind one store interface with ZooKeeper's semantics.

`ClusterMetadata` is the broker's facade; `EmbeddedStore` keeps metadata for a single broker
in a local directory, `odradek.metadata.zookeeper_store.ZooKeeperStore` (imported on demand:
it pulls in kazoo) keeps it in a ZooKeeper ensemble for a cluster.
"""

from odradek.metadata.cluster_metadata import ClusterMetadata
from odradek.metadata.embedded_store import EmbeddedStore
from odradek.metadata.image import MetadataImage
from odradek.metadata.layout import BrokerInfo, Endpoint, PartitionState, TopicAssignment
from odradek.metadata.store import MetadataStore
from odradek.metadata.topic_name import validate_topic_name

__all__ = [
    "BrokerInfo",
    "ClusterMetadata",
    "EmbeddedStore",
    "Endpoint",
    "MetadataImage",
    "MetadataStore",
    "PartitionState",
    "TopicAssignment",
    "validate_topic_name",
]
