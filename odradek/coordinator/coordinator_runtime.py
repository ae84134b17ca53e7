"""``CoordinatorRuntime``: the per-partition plumbing the group and transaction coordinators share.

Kafka runs both coordinators on one ``CoordinatorRuntime``; here each coordinator subclasses
this one. A coordinator state topic (``__consumer_offsets``, ``__transaction_state``) has a
partition per key (``coordinator.partitioner``); the leader of a partition is the
coordinator of its keys. The runtime keeps one ``CoordinatorSlot`` per partition this broker
leads, holding that partition's shard (the coordinator's in-memory state of its keys):

- **leadership**: ``refresh`` / ``prepare`` / ``on_leadership_change`` follow this broker's
  roles; a request finding this broker leading a partition without a slot of the current
  leader epoch starts one (an older slot is dropped first), and one finding it no longer
  leading drops the slot. Dropping (``_unload``) cancels the slot's tasks.
- **loading**: a new slot's shard is replayed from the partition's log in a worker thread
  (``_load_shard``); until then its keys answer COORDINATOR_LOAD_IN_PROGRESS. A slot with an
  empty log is loaded at once. A load that raises drops the slot; the next request retries.
- **appends**: ``_led_partition`` and ``_append_to`` append a coordinator's batch to the
  partition it still leads at the slot's epoch (``ReplicaManager.append_as_coordinator``:
  acks=all, so refused NOT_ENOUGH_REPLICAS while the ISR is short of
  ``min.insync.replicas``); the subclass waits for ``ReplicaManager.replication_error``.
- **time**: ``_every`` runs an action periodically after a ``refresh``.

A subclass sets ``TOPIC``, ``CONFIG`` and ``log`` and supplies ``_new_slot``, ``_load_shard`` (looked up
at call time, so tests can patch the loader module's function), ``_loaded``, and optionally
``_on_unload``, ``_track`` and ``_periodic``. Everything runs on the broker's event loop but the replay.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from odradek.coordinator.partitioner import partition_for
from odradek.protocol.generated.error_codes import ErrorCode

E = ErrorCode


class CoordinatorError(Exception):
    """This broker cannot serve the key now (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE): ``error`` is the client's answer."""

    def __init__(self, error: ErrorCode) -> None:
        super().__init__(error.name)
        self.error = error


@dataclass(eq=False)
class CoordinatorSlot:
    """One led partition: its shard, the leader epoch it was taken up at, whether it is still
    loading, and the tasks working for it (cancelled when it is dropped)."""

    partition: int
    leader_epoch: int
    shard: object
    loading: bool = True
    tasks: set = field(default_factory=set)


class CoordinatorRuntime:
    TOPIC: str = ""
    log: logging.Logger = logging.getLogger("odradek.coordinator")
    ROLE: str = "coordinator"  # in log lines: "elected as the <ROLE> of <topic>-<p>"
    LEADERSHIP_LOG_LEVEL: int = logging.INFO  # of the elected / resigned lines
    CONFIG: type = object  # the coordinator's config class, with ``from_broker_config``

    def __init__(self, broker, config) -> None:
        self.broker = broker
        self.config = config
        self.clock = broker.clock
        self.loop = broker.loop
        self._slots: dict[int, CoordinatorSlot] = {}
        self._closed = False

    # --- hooks ----------------------------------------------------------------------------------
    def _new_slot(self, p: int, leader_epoch: int) -> CoordinatorSlot:
        """A slot with an empty shard for partition ``p`` led at ``leader_epoch``."""
        raise NotImplementedError

    def _load_shard(self, shard, plog):
        """Replay ``plog`` into ``shard`` (in a worker thread); its ``LoadStats``."""
        raise NotImplementedError

    def _loaded(self, slot: CoordinatorSlot, stats) -> None:
        """``slot`` is loaded (``stats``: the replay's, None when the log was empty): it must
        set ``slot.loading = False`` and may start the slot's work."""
        raise NotImplementedError

    def _on_unload(self, slot: CoordinatorSlot) -> None:
        """``slot`` was dropped (its tasks already cancelled)."""

    def _track(self, task: asyncio.Task) -> None:
        """Keep ``task`` (a coordinator task) so that shutdown can finish it."""

    def _periodic(self) -> list[tuple[int, object]]:
        """``(interval_ms, action)`` pairs: what ``start`` runs periodically (``_every``)."""
        return []

    # --- lifecycle ------------------------------------------------------------------------------
    @classmethod
    def start(cls, broker):
        """The coordinator of ``broker`` (config from its broker config): the partitions it
        leads start loading, the periodic actions run."""
        coordinator = cls(broker, cls.CONFIG.from_broker_config(broker.config))
        coordinator.refresh()
        for interval_ms, action in coordinator._periodic():
            coordinator._spawn(coordinator._every(interval_ms, action))
        return coordinator

    def shutdown(self) -> None:
        """Drop every slot; later requests answer COORDINATOR_NOT_AVAILABLE."""
        self._closed = True
        for p in list(self._slots):
            self._unload(p)

    # --- partitions and slots -------------------------------------------------------------------
    def partition_count(self) -> int | None:
        topic = self.broker.metadata_image().topic(self.TOPIC)
        return len(topic.partitions) if topic is not None else None

    def partition_for(self, key: str) -> int | None:
        """The partition of ``key``; None while the topic does not exist."""
        n = self.partition_count()
        return None if n is None else partition_for(key, n)

    def refresh(self) -> None:
        """Load the partitions this broker now leads; unload those it no longer leads."""
        n = self.partition_count() or 0
        for p in range(n):
            self.prepare(p)
        for p in [p for p in self._slots if p >= n]:
            self._unload(p)

    def prepare(self, p: int) -> None:
        """Start loading partition ``p`` if this broker leads it (FindCoordinator does this)."""
        try:
            self._slot(p)
        except CoordinatorError:
            pass

    def on_leadership_change(self, elected=(), resigned=()) -> None:
        """Follow this broker's roles for ``TOPIC`` (called after LeaderAndIsr or StopReplica
        changed them; Kafka's ``onElection`` / ``onResignation``). ``elected``: partitions
        (numbers, or ``(topic, partition)`` pairs) this broker now leads: each starts loading
        (a slot of an older leader epoch is dropped first). ``resigned``: partitions it no
        longer leads: unloaded, their waiting work cancelled."""
        for p in resigned:
            self._unload(p[1] if isinstance(p, tuple) else p)
        for p in elected:
            self.prepare(p[1] if isinstance(p, tuple) else p)

    def is_loading(self) -> bool:
        return any(slot.loading for slot in self._slots.values())

    def _slot_for(self, key: str) -> CoordinatorSlot:
        """The loaded slot of ``key``'s partition, or CoordinatorError (see ``_slot``)."""
        p = self.partition_for(key)
        if p is None:
            raise CoordinatorError(E.NOT_COORDINATOR)
        return self._slot(p)

    def _slot(self, p: int) -> CoordinatorSlot:
        """The loaded slot of partition ``p``; starts loading it when needed. Raises
        CoordinatorError: COORDINATOR_NOT_AVAILABLE after shutdown, NOT_COORDINATOR when this
        broker does not lead ``p``, COORDINATOR_LOAD_IN_PROGRESS while it loads."""
        if self._closed:
            raise CoordinatorError(E.COORDINATOR_NOT_AVAILABLE)
        part = self.broker.replica_manager.get(self.TOPIC, p)
        slot = self._slots.get(p)
        if part is None or not part.is_leader(self.broker.broker_id):
            if slot is not None:
                self._unload(p)
            raise CoordinatorError(E.NOT_COORDINATOR)
        if slot is None or slot.leader_epoch != part.leader_epoch:
            if slot is not None:
                self._unload(p)
            slot = self._begin_load(p, part)
        if slot.loading:
            raise CoordinatorError(E.COORDINATOR_LOAD_IN_PROGRESS)
        return slot

    def _current(self, slot: CoordinatorSlot) -> bool:
        """``slot`` is still the one serving its partition (not dropped, not shut down)."""
        return not self._closed and self._slots.get(slot.partition) is slot

    def _begin_load(self, p: int, part) -> CoordinatorSlot:
        slot = self._new_slot(p, part.leader_epoch)
        self._slots[p] = slot
        self.log.log(self.LEADERSHIP_LOG_LEVEL, "elected as the %s of %s-%d at epoch %d", self.ROLE, self.TOPIC, p,
                     part.leader_epoch)
        if part.log_end_offset == part.log_start_offset:
            self._loaded(slot, None)  # nothing to replay
        else:
            self._spawn(self._load(slot, part), slot)
        return slot

    async def _load(self, slot: CoordinatorSlot, part) -> None:
        try:
            stats = await self.loop.run_in_executor(None, self._load_shard, slot.shard, part.log)
        except Exception:
            self.log.exception("loading %s-%d failed; it is retried on the next request", self.TOPIC, slot.partition)
            if self._slots.get(slot.partition) is slot:
                del self._slots[slot.partition]
            return
        if self._current(slot):
            self._loaded(slot, stats)

    def _unload(self, p: int) -> None:
        slot = self._slots.pop(p, None)
        if slot is None:
            return
        for task in list(slot.tasks):
            task.cancel()
        self._on_unload(slot)
        self.log.log(self.LEADERSHIP_LOG_LEVEL, "resigned as the %s of %s-%d (epoch %d)", self.ROLE, self.TOPIC, p,
                     slot.leader_epoch)

    def _spawn(self, coro, slot: CoordinatorSlot | None = None) -> asyncio.Task:
        """Run ``coro`` as a task kept by ``_track`` (and by ``slot``, which cancels it when dropped)."""
        task = self.loop.create_task(coro)
        self._track(task)
        if slot is not None:
            slot.tasks.add(task)
            task.add_done_callback(slot.tasks.discard)
        return task

    # --- appends --------------------------------------------------------------------------------
    def _led_partition(self, slot: CoordinatorSlot):
        """The slot's ``Partition`` if this broker still leads it at the slot's epoch, else None."""
        part = self.broker.replica_manager.get(self.TOPIC, slot.partition)
        if part is None or not part.is_leader(self.broker.broker_id) or part.leader_epoch != slot.leader_epoch:
            return None
        return part

    def _append_to(self, slot: CoordinatorSlot, part, batch: bytes, unexpected: ErrorCode) -> tuple[ErrorCode, int]:
        """Append the coordinator's ``batch`` to ``part`` (the slot's, from ``_led_partition``):
        ``(NONE, last offset)``, or
        ``(error, -1)`` with the append's error code (a storage error is reported to the broker),
        or ``unexpected`` for a failure without one (logged)."""
        try:
            appended = self.broker.replica_manager.append_as_coordinator(part, batch)
        except Exception as e:
            error = getattr(e, "error", None)
            if error == E.KAFKA_STORAGE_ERROR:  # the disk refused (log unchanged)
                self.broker.log_storage_error(e)
            elif not isinstance(error, ErrorCode):
                self.log.exception("writing to %s-%d failed", self.TOPIC, slot.partition)
                error = unexpected
            return error, -1
        return E.NONE, appended.last_offset

    # --- time -----------------------------------------------------------------------------------
    async def _every(self, interval_ms: int, action) -> None:
        """Forever: wait ``interval_ms``, ``refresh``, run ``action`` (a failure is logged)."""
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                self.refresh()
                action()
            except Exception:
                self.log.exception("%s failed", getattr(action, "__name__", action))
