"""Talking to a consumer group's coordinator: finding it, and the offset requests.

The same client finds and talks to a transactional id's transaction coordinator
(``key_type=TRANSACTION_KEY``, FindCoordinator v1+), with the same rediscovery rules.

``GroupCoordinatorClient`` is the seam the group consumer plugs into: it finds the group's
coordinator (FindCoordinator), keeps a connection of its own to it (so a JoinGroup that the
broker holds for a rebalance never queues behind fetches), and sends requests there with
the coordinator retry rules: COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR (or a broken
connection) mean "find it again", COORDINATOR_LOAD_IN_PROGRESS means "wait and retry".
JoinGroup, SyncGroup, Heartbeat and LeaveGroup go through ``send`` the same way.

On top of it, the offset calls every group user needs: ``fetch_offsets`` (OffsetFetch),
``commit_offsets`` (OffsetCommit; ``generation`` -1 and an empty member id commit as a
standalone consumer, which a broker accepts for a group with no active members), and
``delete_offsets`` (OffsetDelete).
"""

from __future__ import annotations

from odradek.client.cluster import ClusterClient
from odradek.client.connection import BrokerConnection
from odradek.client.errors import BrokerError, KafkaConnectionError, raise_first
from odradek.client.topic_partition import OffsetAndMetadata, TopicPartition
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.find_coordinator_request import FindCoordinatorRequest
from odradek.protocol.generated.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from odradek.protocol.generated.offset_delete_request import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from odradek.protocol.generated.offset_fetch_request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)

GROUP_KEY = 0  # FindCoordinator key type of a consumer group
TRANSACTION_KEY = 1  # ... and of a transactional id
_BATCHED_FIND_FROM = 4  # FindCoordinator v4+ takes a list of keys
_GROUPS_FETCH_FROM = 8  # OffsetFetch v8+ takes a list of groups
_REDISCOVER = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})


class GroupCoordinatorClient:
    def __init__(self, cluster: ClusterClient, group_id: str, *, dedicated_connection: bool = True,
                 key_type: int = GROUP_KEY) -> None:
        """``dedicated_connection=False`` shares the cluster's connection to the coordinator
        (fine for one-off admin calls, not for a member whose JoinGroup may wait).
        ``key_type=TRANSACTION_KEY``: ``group_id`` is a transactional id."""
        if not group_id:
            raise ValueError("a group id is required")
        self.cluster = cluster
        self.group_id = group_id
        self.key_type = key_type
        self.label = f"group {group_id}" if key_type == GROUP_KEY else f"transactional id {group_id}"
        self.dedicated = dedicated_connection
        self.node_id: int | None = None
        self._conn: BrokerConnection | None = None

    @property
    def current_connection(self) -> BrokerConnection | None:
        """The connection requests go out on now (None before the coordinator is found)."""
        conn = self._conn
        return conn if conn is not None and not conn.closed else None

    async def connection(self) -> BrokerConnection:
        """A connection to the coordinator, finding it first if needed."""
        if self._conn is not None and not self._conn.closed:
            return self._conn
        node_id, host, port = await self._find()
        if not self.dedicated:
            if node_id not in self.cluster.metadata.brokers:
                await self.cluster.refresh([])
            conn = await self.cluster.connection(node_id)
            self.node_id, self._conn = node_id, conn
            return conn
        conn = BrokerConnection(host, port, node_id=node_id, client_id=self.cluster.client_id,
                                request_timeout=self.cluster.request_timeout, sasl=self.cluster.sasl,
                                ssl_context=self.cluster.ssl_context)
        await conn.connect(self.cluster.connect_timeout)
        self.node_id, self._conn = node_id, conn
        return conn

    async def _find(self) -> tuple[int, str, int]:
        def build(version: int) -> FindCoordinatorRequest:
            if version >= _BATCHED_FIND_FROM:
                return FindCoordinatorRequest(key_type=self.key_type, coordinator_keys=[self.group_id])
            return FindCoordinatorRequest(key=self.group_id, key_type=self.key_type)

        response = await self.cluster.send(None, ApiKey.FIND_COORDINATOR, build)
        if response.coordinators:
            found = response.coordinators[0]
            code, message = found.error_code, found.error_message
            node_id, host, port = found.node_id, found.host, found.port
        else:
            code, message = response.error_code, response.error_message
            node_id, host, port = response.node_id, response.host, response.port
        if code:
            raise BrokerError(code, message, self.label)
        return node_id, host, port

    def mark_dead(self) -> None:
        """Forget the coordinator (it moved or its connection broke)."""
        conn, self._conn, self.node_id = self._conn, None, None
        if conn is not None and self.dedicated:
            conn.abort()

    async def send(self, api_key: int, build, error_of=lambda response: 0, *, timeout: float | None = None,
                   deadline: float | None = None):
        """Send to the coordinator until it answers without a coordinator error.

        ``build`` is a body or a callable of the version; ``error_of(response)`` gives the
        response's error code (0 when none). Other error codes are the caller's to read.
        """
        cluster = self.cluster
        if deadline is None:
            deadline = cluster.loop.time() + cluster.request_timeout * 2

        async def attempt():
            try:
                conn = await self.connection()
                version = conn.api_version(api_key)
                body = build(version) if callable(build) else build
                response = await conn.send(api_key, body, version=version, timeout=timeout)
            except KafkaConnectionError:
                self.mark_dead()
                raise
            code = error_of(response)
            if code in _REDISCOVER:
                self.mark_dead()
            if code in _REDISCOVER or code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                raise BrokerError(code, subject=self.label)
            return response

        return await cluster.retry(attempt, deadline)

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and self.dedicated:
            await conn.close()

    # --- offsets -------------------------------------------------------------------------
    async def fetch_offsets(self, partitions=None, *, require_stable: bool = False) -> dict[TopicPartition, OffsetAndMetadata]:
        """Committed offsets of the group (of ``partitions``, or all); partitions without a
        committed offset are left out."""
        by_topic: dict[str, list[int]] | None = None
        if partitions is not None:
            by_topic = {}
            for tp in partitions:
                by_topic.setdefault(tp[0], []).append(tp[1])

        def build(version: int) -> OffsetFetchRequest:
            if version >= _GROUPS_FETCH_FROM:
                topics = None if by_topic is None else [OffsetFetchRequestTopics(t, ps) for t, ps in by_topic.items()]
                return OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id=self.group_id, topics=topics)],
                                          require_stable=require_stable)
            topics = None if by_topic is None else [OffsetFetchRequestTopic(t, ps) for t, ps in by_topic.items()]
            return OffsetFetchRequest(group_id=self.group_id, topics=topics, require_stable=require_stable)

        def error_of(response) -> int:
            if response.groups:
                return response.groups[0].error_code
            return response.error_code

        response = await self.send(ApiKey.OFFSET_FETCH, build, error_of)
        code = error_of(response)
        if code:
            raise BrokerError(code, subject=f"group {self.group_id}")
        topics = response.groups[0].topics if response.groups else response.topics
        out: dict[TopicPartition, OffsetAndMetadata] = {}
        errors = {}
        for topic in topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                if p.error_code:
                    errors[tp] = BrokerError(p.error_code, subject=tp)
                elif p.committed_offset >= 0:
                    out[tp] = OffsetAndMetadata(p.committed_offset, p.metadata or "", p.committed_leader_epoch)
        raise_first(errors)
        return out

    async def commit_offsets(self, offsets: dict, *, generation: int = -1, member_id: str = "",
                             group_instance_id: str | None = None) -> None:
        """Commit ``TopicPartition -> OffsetAndMetadata | int``; raises the first partition's
        error (all of them in ``errors``)."""
        by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
        for tp, value in offsets.items():
            meta = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(int(value))
            by_topic.setdefault(tp[0], []).append(OffsetCommitRequestPartition(
                partition_index=tp[1], committed_offset=meta.offset,
                committed_leader_epoch=meta.leader_epoch, committed_metadata=meta.metadata))
        request = OffsetCommitRequest(
            group_id=self.group_id, generation_id_or_member_epoch=generation, member_id=member_id,
            group_instance_id=group_instance_id, retention_time_ms=-1,
            topics=[OffsetCommitRequestTopic(t, ps) for t, ps in by_topic.items()],
        )

        def error_of(response) -> int:
            # A coordinator error is the same for every partition: look at the first.
            for topic in response.topics:
                for p in topic.partitions:
                    return p.error_code
            return 0

        response = await self.send(ApiKey.OFFSET_COMMIT, request, error_of)
        raise_first({
            TopicPartition(t.name, p.partition_index): BrokerError(p.error_code, subject=TopicPartition(t.name, p.partition_index))
            for t in response.topics for p in t.partitions if p.error_code
        })

    async def delete_offsets(self, partitions) -> None:
        """Remove the committed offsets of ``partitions`` (the group must not be reading them)."""
        by_topic: dict[str, list[OffsetDeleteRequestPartition]] = {}
        for tp in partitions:
            by_topic.setdefault(tp[0], []).append(OffsetDeleteRequestPartition(tp[1]))
        request = OffsetDeleteRequest(group_id=self.group_id,
                                      topics=[OffsetDeleteRequestTopic(t, ps) for t, ps in by_topic.items()])
        response = await self.send(ApiKey.OFFSET_DELETE, request, lambda r: r.error_code)
        if response.error_code:
            raise BrokerError(response.error_code, subject=f"group {self.group_id}")
        raise_first({
            TopicPartition(t.name, p.partition_index): BrokerError(p.error_code, subject=TopicPartition(t.name, p.partition_index))
            for t in response.topics for p in t.partitions if p.error_code
        })

