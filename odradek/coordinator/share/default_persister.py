"""``DefaultStatePersister``: the broker's Persister (Kafka's DefaultStatePersister).

For each call it finds the share coordinator of the key ``"group_id:topic_id:partition"`` (the
leader of its ``__share_group_state`` partition, as FindCoordinator key type 2 answers) and

- calls this broker's ``ShareCoordinator`` directly when that leader is this broker;
- otherwise sends the state RPC (InitializeShareGroupState 83, ReadShareGroupState 84,
  WriteShareGroupState 85, DeleteShareGroupState 86, ReadShareGroupStateSummary 87) over the
  inter-broker connections (``broker.inter_broker_connections``, ``coordinator/inter_broker.py``).

An answer of NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE or COORDINATOR_LOAD_IN_PROGRESS, or a
lost connection, is retried after ``RETRY_BACKOFF_MS`` (doubling up to ``MAX_BACKOFF_MS``)
with the coordinator looked up again, up to ``MAX_ATTEMPTS`` (Kafka's PersisterStateManager
retries these with backoff); then the last error is the answer. The state topic is created
(as FindCoordinator does, ``broker.ensure_internal_topic``) on the first call that needs it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from uuid import UUID

from odradek.client.errors import KafkaError
from odradek.coordinator.share.persister import PersisterStateBatch, ShareGroupState, ShareStateSummary
from odradek.coordinator.share.share_partition_key import SHARE_GROUP_STATE_TOPIC, state_partition
from odradek.coordinator.share import state_rpc
from odradek.protocol.generated.error_codes import ErrorCode

log = logging.getLogger("odradek.coordinator.share")
E = ErrorCode
RETRIABLE = frozenset({E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_LOAD_IN_PROGRESS,
                       E.NETWORK_EXCEPTION, E.REQUEST_TIMED_OUT})
MAX_ATTEMPTS = 20
RETRY_BACKOFF_MS = 50
MAX_BACKOFF_MS = 1000
REQUEST_TIMEOUT_S = 30.0


class DefaultStatePersister:
    def __init__(self, broker, coordinator) -> None:
        self.broker = broker
        self.coordinator = coordinator
        self._connections = None

    def close(self) -> None:
        if self._connections is not None:
            self._connections.close()

    # --- the Persister --------------------------------------------------------------------------
    async def initialize_state(self, group_id: str, topic_id: UUID, partition: int,
                               state_epoch: int, start_offset: int) -> ErrorCode:
        return await self._call(group_id, topic_id, partition, "initialize_state",
                                (state_epoch, start_offset), lambda e: e)

    async def read_state(self, group_id: str, topic_id: UUID, partition: int, leader_epoch: int) -> ShareGroupState:
        return await self._call(group_id, topic_id, partition, "read_state", (leader_epoch,),
                                lambda e: ShareGroupState(e, 0, -1, ()))

    async def write_state(self, group_id: str, topic_id: UUID, partition: int, state_epoch: int,
                          leader_epoch: int, start_offset: int,
                          batches: Sequence[PersisterStateBatch],
                          delivery_complete_count: int = -1) -> ErrorCode:
        return await self._call(group_id, topic_id, partition, "write_state",
                                (state_epoch, leader_epoch, start_offset, tuple(batches),
                                 delivery_complete_count), lambda e: e)

    async def delete_state(self, group_id: str, topic_id: UUID, partition: int) -> ErrorCode:
        return await self._call(group_id, topic_id, partition, "delete_state", (), lambda e: e)

    async def read_summary(self, group_id: str, topic_id: UUID, partition: int,
                           leader_epoch: int) -> ShareStateSummary:
        return await self._call(group_id, topic_id, partition, "read_summary", (leader_epoch,),
                                lambda e: ShareStateSummary(e, 0, -1))

    # --- routing --------------------------------------------------------------------------------
    async def _call(self, group_id, topic_id, partition, operation: str, args: tuple, failed):
        """Run ``operation`` at the key's coordinator, retrying the retriable errors."""
        backoff = RETRY_BACKOFF_MS
        answer = failed(E.COORDINATOR_NOT_AVAILABLE)
        for _ in range(MAX_ATTEMPTS):
            leader = await self._coordinator_of(group_id, topic_id, partition)
            if leader is None:
                answer = failed(E.COORDINATOR_NOT_AVAILABLE)
            elif leader == self.broker.broker_id:
                answer = await getattr(self.coordinator, operation)(group_id, topic_id, partition, *args)
            else:
                answer = await self._remote(leader, operation, (group_id, topic_id, partition, *args), failed)
            if _error_of(answer) not in RETRIABLE:
                return answer
            await asyncio.sleep(backoff / 1000)
            backoff = min(backoff * 2, MAX_BACKOFF_MS)
        return answer

    async def _coordinator_of(self, group_id: str, topic_id: UUID, partition: int) -> int | None:
        """The broker leading the key's state partition (None: no topic or no leader yet)."""
        image, _ = await self.broker.ensure_internal_topic(SHARE_GROUP_STATE_TOPIC)
        topic = image.topic(SHARE_GROUP_STATE_TOPIC)
        if topic is None:
            return None
        p = state_partition(group_id, topic_id, partition, len(topic.partitions))
        leader = image.leader(SHARE_GROUP_STATE_TOPIC, p)
        return leader if leader is not None and leader >= 0 else None

    async def _remote(self, node: int, operation: str, args: tuple, failed):
        if self._connections is None:
            self._connections = self.broker.inter_broker_connections("share-state", REQUEST_TIMEOUT_S)
        api_key, request, parse = state_rpc.REQUESTS[operation](*args)
        try:
            conn = await self._connections.get(node)
            version = state_rpc.version_for(conn, api_key)
            if version is None:
                return failed(E.UNSUPPORTED_VERSION)
            response = await conn.send(api_key, request, version=version, timeout=REQUEST_TIMEOUT_S)
        except (KafkaError, OSError, TimeoutError) as e:
            log.debug("%s to broker %d failed: %s", operation, node, e)
            self._connections.drop(node)
            return failed(E.NETWORK_EXCEPTION)
        return parse(response)


def _error_of(answer) -> ErrorCode:
    if isinstance(answer, ErrorCode):
        return answer
    if isinstance(answer, (ShareGroupState, ShareStateSummary)):
        return answer.error
    return answer[0]
