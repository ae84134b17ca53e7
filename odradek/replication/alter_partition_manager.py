"""``AlterPartitionManager``: a leader's ISR changes, made durable by the controller (Kafka's
``AlterIsrManager``, KIP-497).

A leader never writes an ISR itself: ``Partition.maybe_expand_isr`` / ``maybe_shrink_isr``
only propose one (``pending_isr``), and the high watermark counts the maximal ISR meanwhile
(``replication/isr.py``). This manager sends the proposals to the controller in AlterPartition
requests (key 56) through ``broker.broker_to_controller`` (``await send(api_key, body)``, which
finds the controller and retries NOT_CONTROLLER and lost connections), and applies the answers:

- NONE: the controller's state holds the ISR it answers (usually the one proposed) at the
  state version it answers (``partition_epoch``, the znode version in ZooKeeper mode): the
  partition adopts both (``Partition.commit_isr``, ``zk_version``); a moved high watermark
  wakes its waiters (``ReplicaManager.notify``). An answer for an older leader epoch than
  the partition's is ignored.
- FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST,
  NOT_LEADER_OR_FOLLOWER: the change cannot be made from the state this leader holds:
  ``Partition.abandon_isr_change`` (a LeaderAndIsr with the newer state is on its way; the
  next fetch or shrink check proposes again from it).
- any other error, an error for the whole request (STALE_BROKER_EPOCH while this broker's
  registration is new, NOT_CONTROLLER past the channel's deadline, ...) or no answer: sent
  again after ``RETRY_BACKOFF_MS``.

One request is in flight at a time, carrying every change proposed since the previous one
(so at most one per partition is in flight). A proposal whose partition moved on meanwhile
(not led any more, another pending change, removed) is dropped when its answer comes.
"""

from __future__ import annotations

import asyncio
import logging

from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.alter_partition_request import (
    AlterPartitionRequest,
    BrokerState,
    PartitionData,
    TopicData,
)
from odradek.protocol.generated.error_codes import ErrorCode

log = logging.getLogger("odradek.replication")

# Pause before sending again what the controller refused or did not answer: short, since the
# high watermark may wait on it, and long enough not to hammer a controller that is busy.
RETRY_BACKOFF_MS = 100

ABANDONING = frozenset({
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_UPDATE_VERSION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.INVALID_REQUEST, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.INELIGIBLE_REPLICA,
})


class AlterPartitionManager:
    """The broker's ``alter_partitions``. ``submit(partition)`` (on the broker's loop) after
    a ``Partition.maybe_*_isr`` made a change pending; the sending task starts with the first
    submit (or ``start()``); ``await shutdown()`` stops it."""

    def __init__(self, broker, retry_backoff_ms: int = RETRY_BACKOFF_MS, autostart: bool = True) -> None:
        """``autostart=False``: no task; the caller steps with ``take_unsent`` and
        ``send_once`` (tests)."""
        self.broker = broker
        self.retry_backoff_ms = retry_backoff_ms
        self.autostart = autostart
        # key -> (partition, the pending IsrChange when submitted), in submission order.
        self._unsent: dict[tuple[str, int], tuple[object, object]] = {}
        self._in_flight: dict[tuple[str, int], tuple[object, object]] = {}
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        if self._task is None:
            self._wake = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def submit(self, part) -> bool:
        """Queue ``part``'s pending ISR change; False (nothing queued) when it has none or a
        change of the partition is queued or in flight already."""
        change = part.pending_isr
        key = part.key
        if change is None or key in self._unsent or key in self._in_flight:
            return False
        self._unsent[key] = (part, change)
        if self._task is None and self.autostart:
            self.start()
        if self._wake is not None:
            self._wake.set()
        return True

    def pending(self) -> int:
        """Changes queued or in flight."""
        return len(self._unsent) + len(self._in_flight)

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not self._unsent:
                continue
            self.take_unsent()
            try:
                retry = await self.send_once()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - the controller unreachable: send again
                log.warning("AlterPartition for %d partition(s) failed, retrying: %s", len(self._in_flight), e)
                self._requeue(self._in_flight)
                retry = True
            finally:
                self._in_flight = {}
            if retry:
                await asyncio.sleep(self.retry_backoff_ms / 1000)

    async def send_once(self) -> bool:
        """Send the in-flight changes and apply the answer (the loop's one step; tests call it
        after ``take_unsent``). Whether some were queued again, to be sent after a back-off."""
        items = self._in_flight
        response = await self.broker.broker_to_controller.send(ApiKey.ALTER_PARTITION, self.request(items))
        if response.error_code != ErrorCode.NONE:
            log.warning("AlterPartition refused: %s; retrying", ErrorCode(response.error_code).name)
            self._requeue(items)
            return True
        retry = {k: v for k, v in items.items() if not self._apply(k, v, response)}
        self._requeue(retry)
        self._submit_newer(items)
        return bool(retry)

    def take_unsent(self) -> None:
        """Move the queued changes in flight (what ``_run`` does before ``send_once``)."""
        self._in_flight, self._unsent = self._unsent, {}

    def request(self, items) -> AlterPartitionRequest:
        """The request for ``items`` (key -> (partition, change)), valid at every version:
        topics by name and id, the ISR as ids and (v3) with unknown broker epochs."""
        broker = self.broker
        topics: dict[str, TopicData] = {}
        for (topic, index), (part, change) in items.items():
            data = topics.get(topic)
            if data is None:
                data = topics[topic] = TopicData(topic_name=topic, topic_id=part.topic_id, partitions=[])
            data.partitions.append(PartitionData(
                partition_index=index, leader_epoch=change.leader_epoch, new_isr=list(change.isr),
                new_isr_with_epochs=[BrokerState(broker_id=r, broker_epoch=-1) for r in change.isr],
                partition_epoch=part.zk_version))
        return AlterPartitionRequest(broker_id=broker.broker_id, broker_epoch=getattr(broker, "broker_epoch", -1),
                                     topics=list(topics.values()))

    def _apply(self, key, item, response) -> bool:
        """Apply the answer for ``key``; False when it is to be sent again (an error worth
        retrying, or no answer for it)."""
        part, change = item
        for t in response.topics:
            if t.topic_name != key[0] and t.topic_id != part.topic_id:
                continue
            for p in t.partitions:
                if p.partition_index == key[1]:
                    return self._apply_one(key, part, change, p)
        return False

    def _apply_one(self, key, part, change, answer) -> bool:
        """One partition's answer; False when it is to be sent again."""
        replica_manager = self.broker.replica_manager
        current = replica_manager.partitions.get(key)
        if current is not part or part.pending_isr is not change or not part.is_leader(self.broker.broker_id):
            return True  # the partition moved on: this change is moot
        error = ErrorCode(answer.error_code)
        if error == ErrorCode.NONE:
            if answer.leader_epoch < part.leader_epoch:
                return True  # an answer about an older leadership
            part.zk_version = answer.partition_epoch
            replica_manager.count_isr_change(part.isr, answer.isr)
            if part.commit_isr(answer.isr):
                replica_manager.notify(key)
            log.info("ISR of %s-%d now %s (state version %d)", key[0], key[1], list(part.isr), part.zk_version)
            return True
        if error in ABANDONING:
            log.info("ISR change of %s-%d to %s abandoned: %s", key[0], key[1], list(change.isr), error.name)
            part.abandon_isr_change()
            return True
        log.warning("ISR change of %s-%d failed: %s; retrying", key[0], key[1], error.name)
        return False

    def _submit_newer(self, items) -> None:
        """Queue the changes proposed while an older one of the same partition was in flight
        (the older one was abandoned by a role change meanwhile): ``submit`` refused them."""
        partitions = self.broker.replica_manager.partitions
        for key, (_, change) in items.items():
            part = partitions.get(key)
            if part is not None and part.pending_isr is not None and part.pending_isr is not change:
                self._requeue({key: (part, part.pending_isr)})

    def _requeue(self, items) -> None:
        for key, item in items.items():
            self._unsent[key] = item
        if self._unsent and self._wake is not None:
            self._wake.set()
