"""Mirroring topics between clusters (``odradek mirror``), exactly once.

- ``mirror_maker``: ``MirrorMaker``, the copy loop: a source consumer, a transactional target
  producer, the source positions committed on the target in the same transactions.
- ``topic_sync``: ``TopicSync``, target topics created and grown as the source's, with its
  configs.
- ``replication_policy``: target topics keep their names; the cycles that allows (one
  cluster as source and target: refused; topics mirrored from the target: left out).
- ``mirror_lag``: ``MirrorProgress``, records copied and lag per partition and topic.
- ``mirror_config``: ``MirrorConfig``, the settings (MirrorMaker 2's names where it has them).

Built on ``odradek.client`` only, so either cluster may be any Kafka-compatible one.
"""

from odradek.mirror.mirror_config import MirrorConfig
from odradek.mirror.mirror_lag import MirrorProgress, TopicProgress
from odradek.mirror.mirror_maker import MirrorError, MirrorMaker

__all__ = ["MirrorConfig", "MirrorError", "MirrorMaker", "MirrorProgress", "TopicProgress"]
