"""How the mirror names target topics, and the cycles that naming allows (MirrorMaker 2's
``ReplicationPolicy`` and ``MirrorSourceConnector.isCycle``).

The mirror keeps topic names: source topic ``t`` is copied into target topic ``t``, as
MirrorMaker 2's ``IdentityReplicationPolicy``. MirrorMaker 2's default policy names a remote
topic ``<source alias>.<topic>``, so a name tells where a topic came from and a topic whose
name says it came from the target is left out. A kept name tells nothing, so here:

- **One cluster as source and target.** Every mirrored topic would be its own target: each
  record copied would be read again and copied again, forever. The clusters are compared by
  the cluster id their Metadata answers carry, when the mirror starts; the same id is refused
  (``same_cluster``). Two bootstrap lists naming different brokers of one cluster are caught
  too; a cluster that gives no id (Metadata before v2) cannot be compared.
- **Two clusters mirrored both ways** (A to B and B to A, the same topics). The mirror marks
  the source positions it commits on the target with the source's cluster id
  (``provenance``: the offset metadata of its group's commits). The mirror the other way
  finds that mark on *its* source (``topics_from``: the groups without members, as a
  mirror's group is, and their committed offsets' metadata) and leaves those topics out, as
  MirrorMaker 2 leaves out a topic named after its target, with a warning. It sees the mark
  once the first mirror has committed; a chain of three clusters (A to B to C to A) is not
  recognised, as the mark names only the last hop.
"""

from __future__ import annotations

import logging

from odradek.client.admin import AsyncAdminClient
from odradek.client.errors import BrokerError

__all__ = ["MIRRORED_FROM", "cluster_id", "provenance", "same_cluster", "topics_from"]

_log = logging.getLogger("odradek.mirror")

# The offset metadata of a mirror's commits begins with this, then the source's cluster id.
MIRRORED_FROM = "odradek mirror from cluster "


def provenance(source_cluster_id: str | None) -> str:
    """The metadata the mirror commits its source positions with on the target."""
    return MIRRORED_FROM + source_cluster_id if source_cluster_id else ""


async def cluster_id(admin: AsyncAdminClient) -> str | None:
    """The cluster id a broker of ``admin``'s cluster gives in Metadata (None: it gives none)."""
    return (await admin.cluster.refresh([])).cluster_id


def same_cluster(source_id: str | None, target_id: str | None) -> str | None:
    """Why a mirror between clusters with these ids cannot run, or None when it can."""
    if source_id is None or source_id != target_id:
        return None
    return (f"the source and the target are the same cluster (cluster id {source_id}): the mirror keeps "
            f"topic names, so every mirrored topic would be copied onto itself, again and again")


async def topics_from(admin: AsyncAdminClient, cluster: str | None) -> dict[str, str]:
    """Topics of ``admin``'s cluster that a mirror copies into it from the cluster with id
    ``cluster``: ``{topic: the mirror's group}``. Groups the cluster does not let us list or
    read are passed over (logged at debug)."""
    if cluster is None:
        return {}
    mark = provenance(cluster)
    try:
        groups = [g.group_id for g in await admin.list_groups() if not g.protocol_type]
    except BrokerError as e:
        _log.debug("could not list the groups of the source to look for mirrors from the target: %s", e)
        return {}
    found: dict[str, str] = {}
    for group in groups:
        try:
            offsets = await admin.list_group_offsets(group)
        except BrokerError as e:
            _log.debug("could not read the offsets of group %s on the source: %s", group, e)
            continue
        for tp, committed in offsets.items():
            if committed.metadata == mark:
                found.setdefault(tp.topic, group)
    return found
