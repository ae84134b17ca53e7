"""TEMPORARY until the controller edge is merged: the broker's stand-in for the controller.

A broker takes its roles only from LeaderAndIsr, and topic administration writes only what
Kafka's ``AdminZkClient`` writes (``ClusterMetadata``). While
``odradek.controller.controller_service`` does not exist, nobody would write partition states
or send LeaderAndIsr, so a broker would lead nothing. This stand-in does in-process, for this
broker alone, what the controller and LeaderAndIsr would do, the way odradek did before:

- ``start()`` (where ``ControllerService.start()`` goes): claims ``/controller`` (so Metadata
  names a controller), finishes the deletions marked under ``/admin/delete_topics`` (their
  logs here went at start-up, ``TopicManager.finish_deletions``), gives each partition
  without a state one, and leads the partitions whose state names this broker;
- ``topic_changed(name)`` after a creation or new partitions: the same for that topic;
- ``delete_topic(name, partitions)`` after the deletion mark: the partitions here leave
  service and their logs are deleted (StopReplica with delete), then the topic's znodes and
  the mark are removed, as the controller's topic-deletion manager does.

A new state is Kafka's first election of a NewPartition: the first live replica of the
assignment leads, the live replicas are the ISR, leader epoch 0, the current controller
epoch; a partition none of whose replicas is alive gets none yet. Writes are grouped into
``multi``s of at most ``MAX_OPS_PER_MULTI`` ops (far below ZooKeeper's 1 MiB request limit).

To remove when ControllerService is merged: this module, ``Broker.solo_controller`` and the
branches marked ``# TEMPORARY until the controller edge is merged``, the ``leadership retry``
background task, and ``tests/server/test_solo_controller.py``.
"""

from __future__ import annotations

import asyncio
import logging

from odradek.coordinator.group.group_config import OFFSETS_TOPIC
from odradek.metadata import layout
from odradek.metadata.errors import NodeExistsError, NoNodeError
from odradek.metadata.layout import PartitionState
from odradek.metadata.store import CreateOp
from odradek.storage.errors import StorageError

log = logging.getLogger("odradek.solo_controller")

MAX_OPS_PER_MULTI = 2000


class SoloController:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.metadata = broker.metadata
        # Topics with a partition this broker should lead but whose log could not be created
        # (a full disk), and topics whose partition states could not be written (a full
        # metadata disk); ``retry_leadership`` tries them again.
        self.unled: set[str] = set()
        self.unwritten: set[str] = set()

    async def start(self) -> None:
        broker = self.broker
        await _off_loop(self.metadata.try_become_controller, broker.broker_id)
        for name in await _off_loop(self.metadata.store.children, layout.DELETE_TOPICS):
            await _off_loop(self.remove_topic_znodes, name)
        for name in list(broker.metadata_image().topics):
            await _off_loop(self.write_missing_states, name)
        await self.become_leader_of_assigned()

    def shutdown(self) -> None:
        self.metadata.resign_controller(self.broker.broker_id)

    async def topic_changed(self, name: str) -> None:
        """Elect and lead the new partitions of ``name``; an OSError of the store propagates
        (the topic is then retried by ``retry_leadership``, as a controller retries)."""
        try:
            await _off_loop(self.write_missing_states, name)
        except OSError:
            self.unwritten.add(name)
            raise
        await self.become_leader_of_assigned(name)

    async def delete_topic(self, name: str, partitions: list[int]) -> None:
        """After the mark: stop and delete the replicas here, then remove the znodes (an
        OSError of the store propagates; the mark stays, and start-up finishes it)."""
        await self.broker.topics.remove_partitions(name, partitions)
        await _off_loop(self.remove_topic_znodes, name)

    # --- the controller's znode writes --------------------------------------------------------
    def write_missing_states(self, name: str) -> None:
        image = self.broker.metadata_image()
        topic = image.topic(name)
        if topic is None or name in image.topics_being_deleted:
            return
        store = self.metadata.store
        parent = layout.partitions_path(name)
        existing = set(store.children(parent)) if store.exists(parent) is not None else None
        ops = [CreateOp(parent)] if existing is None else []
        live = set(image.brokers)
        epoch = self.metadata.controller_epoch()[0]
        for partition, replicas in topic.partitions.items():
            isr = tuple(b for b in replicas if b in live)
            if image.partition_state(name, partition) is not None or not isr:
                continue
            if str(partition) not in (existing or ()):
                ops.append(CreateOp(layout.partition_path(name, partition)))
            state = PartitionState(isr[0], 0, isr, epoch)
            ops.append(CreateOp(layout.partition_state_path(name, partition), state.to_json()))
        try:
            with self.metadata.cache.batch():
                for start in range(0, len(ops), MAX_OPS_PER_MULTI):
                    store.multi(ops[start : start + MAX_OPS_PER_MULTI])
        except (NodeExistsError, NoNodeError) as e:  # written (or deleted) meanwhile by another
            log.info("partition states of %s changed meanwhile: %s", name, e)

    def remove_topic_znodes(self, name: str) -> None:
        store = self.metadata.store
        for path in (layout.topic_path(name), layout.topic_config_path(name), layout.delete_topic_path(name)):
            try:
                store.delete(path, recursive=True)
            except NoNodeError:
                pass
        self.metadata.cache.refresh_topics()
        self.metadata.cache.refresh_deletions()

    # --- LeaderAndIsr, in-process -------------------------------------------------------------
    def _leadership(self, only_topic: str | None) -> list[tuple]:
        """``make_leader`` arguments of every partition whose state names this broker."""
        broker = self.broker
        image = broker.metadata_image()
        me = broker.broker_id
        todo = []
        for name, assignment in image.topics.items():
            if (only_topic is not None and name != only_topic) or name in image.topics_being_deleted:
                continue
            config = None
            for index, replicas in assignment.partitions.items():
                state = image.partition_state(name, index)
                if state is None or state.leader != me:
                    continue
                part = broker.replica_manager.get(name, index)
                if part is not None and part.is_leader(me):
                    continue
                if config is None:
                    config = broker.topics.topic_log_config(name)
                todo.append((name, index, assignment.topic_id, replicas, state.isr, state.leader_epoch, config))
        return todo

    async def become_leader_of_assigned(self, only_topic: str | None = None) -> None:
        """Lead the partitions whose state names this broker; their logs (a directory and an
        fsync each) are created in a worker thread, so a topic of thousands of partitions
        does not stall every other client."""
        todo = self._leadership(only_topic)
        log_manager = self.broker.log_manager

        def create_logs() -> list[tuple]:
            created = []
            for args in todo:
                if self.broker.stopping:
                    break
                name, index, topic_id, _, _, leader_epoch, config = args
                try:
                    # With its leader epoch begun here too: that writes the log's
                    # leader-epoch-checkpoint (two fsyncs), which make_leader then finds done.
                    log_manager.get_or_create_log(name, index, config, topic_id).assign_leader_epoch(leader_epoch)
                except (OSError, StorageError) as e:
                    if name not in self.unled:
                        log.error("could not create the log of %s-%d (retried): %s", name, index, e)
                    self.unled.add(name)
                    continue
                created.append(args)
            return created

        led = await _off_loop(create_logs)
        for args in led:
            self.broker.replica_manager.make_leader(*args)
        coordinator = self.broker.group_coordinator
        offsets = [args[1] for args in led if args[0] == OFFSETS_TOPIC]
        if coordinator is not None and offsets:
            coordinator.on_leadership_change(elected=offsets)

    async def retry_leadership(self) -> None:
        """Write the states not written before (``unwritten``) and lead the partitions whose
        log could not be created before (``unled``), now that the disk may have room again."""
        for name in list(self.unwritten):
            try:
                await _off_loop(self.write_missing_states, name)
            except OSError as e:
                log.error("could not write the partition states of %s (retried): %s", name, e)
                continue
            self.unwritten.discard(name)
            self.unled.add(name)
        names, self.unled = self.unled, set()
        for name in names:
            await self.become_leader_of_assigned(name)
        for name in names - self.unled:
            log.info("now leading every partition of %s", name)


async def _off_loop(fn, *args):
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)
