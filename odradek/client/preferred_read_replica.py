"""The consumer's side of KIP-392 (fetch from the closest replica): which broker each partition
is fetched from (Kafka's ``SubscriptionState.preferredReadReplica`` /
``updatePreferredReadReplica`` / ``clearPreferredReadReplica`` and
``AbstractFetch.selectReadReplica``).

A consumer with ``client.rack`` (``client_rack``) sends it as the Fetch ``rack_id`` (v11+).
A leader whose ``replica.selector.class`` prefers another replica for that rack answers the
partition with ``preferred_read_replica`` and no records; from then on the partition is
fetched from that broker, until:

- ``metadata.max.age.ms`` has passed since the leader named it (then the leader is asked
  again, and names the same replica, another, or none);
- an answer from it carries an error, or a Fetch to it fails (a lost connection, a timeout):
  the next fetch goes to the leader. OFFSET_OUT_OF_RANGE from a preferred replica is not
  taken as final (the replica may lag, or the leader may have moved on): the position is not
  reset, the leader is asked instead, as Kafka's ``FetchCollector`` does;
- the metadata no longer lists the broker, or lists it among the partition's offline replicas.

Times are the event loop's seconds (``loop.time()``). Pure bookkeeping: no I/O.
"""

from __future__ import annotations

from odradek.protocol.generated.error_codes import ErrorCode


class PreferredReadReplicas:
    """Per partition: the replica to read from and when that choice expires."""

    def __init__(self, metadata_max_age: float) -> None:
        self.metadata_max_age = metadata_max_age
        self._chosen: dict[object, tuple[int, float]] = {}  # tp -> (node id, expiry time)

    def node_for(self, tp, leader: int | None, meta, now: float) -> int | None:
        """The node to fetch ``tp`` from: its preferred replica while that is valid (see the
        module docstring), else ``leader`` (None: unknown, refresh the metadata)."""
        entry = self._chosen.get(tp)
        if entry is None or leader is None:
            return leader
        node, expires = entry
        if now >= expires or not _online(meta, tp, node):
            del self._chosen[tp]
            return leader
        return node

    def on_answer(self, tp, answer, now: float) -> bool:
        """Note a partition's Fetch answer: a named replica is used from now on; any error
        sends the partition back to its leader. True when the answer must not be acted on
        further (OFFSET_OUT_OF_RANGE from a preferred replica: ask the leader first)."""
        code = answer.error_code
        if code == ErrorCode.NONE:
            if answer.preferred_read_replica >= 0:
                self._chosen[tp] = (answer.preferred_read_replica, now + self.metadata_max_age)
            return False
        cleared = self._chosen.pop(tp, None)
        return code == ErrorCode.OFFSET_OUT_OF_RANGE and cleared is not None

    def on_failure(self, tps) -> None:
        """A Fetch carrying ``tps`` failed as a whole: their next fetches go to the leader."""
        for tp in tps:
            self._chosen.pop(tp, None)

    def preferred(self, tp) -> int | None:
        """The replica ``tp`` is read from now, None for its leader (for tests and logs)."""
        entry = self._chosen.get(tp)
        return None if entry is None else entry[0]


def _online(meta, tp, node: int) -> bool:
    """Kafka's ``Cluster.nodeIfOnline``: the broker is listed and not offline for ``tp``."""
    if node not in meta.brokers:
        return False
    info = meta.partition(tp.topic, tp.partition)
    return info is None or node not in info.offline_replicas
