"""Carrying out the controller's requests on this broker: LeaderAndIsr, StopReplica,
UpdateMetadata (Kafka's ``ReplicaManager.becomeLeaderOrFollower``, ``stopReplicas`` and
``maybeUpdateMetadataCache``). ``replication/role_change.py`` decides; this module acts.

A broker takes a role only from LeaderAndIsr, never on its own. Requests are carried out
one at a time, in arrival order (``ReplicaManager.state_change_lock``), because creating
logs awaits a worker thread (a directory and fsyncs each: a topic of thousands of
partitions must not stall the event loop).

LeaderAndIsr, once checked:

1. new leaders: their fetchers stop first (``broker.replica_fetchers.remove_partitions``),
   so that no fetched batch lands after the new epoch begins; then ``make_leader``;
2. new followers: ``make_follower`` (produces refused from now on), their old fetchers
   stopped, waiting operations woken, then fetchers started towards the new leaders
   (``add_partitions`` with an ``InitialFetchState``) unless the broker is stopping or the
   partition has no leader (-1);
3. the group coordinator hears which ``__consumer_offsets`` partitions this broker now
   leads and which it no longer leads (``on_leadership_change``), to load or unload them.

Steps 1 and 2 take `ROLES_PER_TURN` partitions at a time and let the event loop serve other
requests in between (a partition not yet reached answers from its old role, as Kafka's handler
threads do meanwhile); each turn's new epochs are on disk before the loop moves on.

A partition whose log directory failed on this broker answers KAFKA_STORAGE_ERROR and is
neither hosted nor created anew until a restart (``server/log_dir_failure_handler.py``; the
controller counts the replica offline). So does one whose log is absent while a log
directory is offline, unless LeaderAndIsr says the replica is new (``is_new``): after a
restart with a directory still failed, its log may be there (``LogManager.get_or_create_log``). A log that cannot be created (a full disk) answers
KAFKA_STORAGE_ERROR for its partition and leaves it unhosted (Kafka's controller counts such a replica offline); the role
is taken later, once the log can be created (``retry_unhosted_roles``), unless a newer
LeaderAndIsr or a StopReplica of the partition came meanwhile.

``broker.replica_fetchers`` and ``group_coordinator.on_leadership_change`` are optional:
without them (a broker built before they exist, tests) those steps are skipped.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from odradek.controller.commands import LeaderAndIsrPartition
from odradek.metadata.controller_states import ControllerState
from odradek.metadata.layout import PartitionState
from odradek.metadata.offline_replicas import ReportedPartition
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.replication.controller_request_check import check_controller_request
from odradek.replication.role_change import (
    ControlHeader,
    HeldReplica,
    StopReplicaPartition,
    TopicPartition,
    decide_roles,
    decide_stops,
    initial_fetch_offset,
)
from odradek.storage import deferred_sync
from odradek.storage.errors import OfflineLogDirsError, StorageError

# Roles taken per turn of the event loop (see the module docstring): a failover's 30,000 in
# one turn kept Metadata, Produce and Fetch of every other partition waiting for seconds.
ROLES_PER_TURN = 500

# Kafka's state.change.logger: every role a broker takes, and every request it refuses.
log = logging.getLogger("odradek.state.change")

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"


async def become_leader_or_follower(broker, header: ControlHeader, states: Sequence[LeaderAndIsrPartition]
                                    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
    """Take the roles a LeaderAndIsr gives: ``(error, per-partition errors)``; a whole-request
    error leaves the partitions' errors empty (the handler answers it for each)."""
    rm = broker.replica_manager
    if broker.stopping:  # after its controlled shutdown a broker takes no new roles (Kafka
        return ErrorCode.BROKER_NOT_AVAILABLE, {}  # stops serving requests before its replicas)
    async with rm.state_change_lock:
        began = time.monotonic()
        error = await check_controller_request(broker, "LeaderAndIsr", header)
        if error != ErrorCode.NONE:
            return error, {}
        broker.metadata.cache.take_controller_states(  # what Metadata answers, at once
            ControllerState(s.topic, s.topic_id, s.partition, PartitionState(
                s.leader, s.leader_epoch, s.isr, s.controller_epoch, s.zk_version)) for s in states)
        decision = decide_roles(broker.broker_id, states, lambda key: _held(rm, key))
        for key, why in decision.errors.items():
            log.debug("ignoring LeaderAndIsr of controller %d (epoch %d) for %s-%d: %s",
                      header.controller_id, header.controller_epoch, key[0], key[1], why.name)
        if rm.unhosted_roles:  # a newer state of a partition replaces one waiting for its log
            for s in states:
                rm.unhosted_roles.pop(s.key, None)
        errors, elected, resigned = await _take_roles(broker, decision, retrying=False)
        log.info("LeaderAndIsr of controller %d (epoch %d): %d newly led, %d followed, %d partition(s) in all, "
                 "in %.2f s", header.controller_id, header.controller_epoch, len(elected), len(resigned), len(errors),
                 time.monotonic() - began)
        return ErrorCode.NONE, errors


async def retry_unhosted_roles(broker) -> int:
    """Take again the roles whose log could not be created (a full disk; kept in
    ``ReplicaManager.unhosted_roles`` until a newer LeaderAndIsr or a StopReplica of the
    partition), now that the disk may have room: Kafka would keep such a replica offline
    until a restart; the controller here (which does not act on these errors) counts on
    this broker to take the role. Returns how many roles were taken; a background task
    calls it every few seconds while any wait."""
    rm = broker.replica_manager
    async with rm.state_change_lock:
        waiting, rm.unhosted_roles = list(rm.unhosted_roles.values()), {}
        if not waiting:
            return 0
        decision = decide_roles(broker.broker_id, waiting, lambda key: _held(rm, key))
        _, elected, resigned = await _take_roles(broker, decision, retrying=True)
    if elected or resigned:
        log.info("took %d role(s) whose log could not be created before", len(elected) + len(resigned))
    return len(elected) + len(resigned)


async def _take_roles(broker, decision, retrying: bool) -> tuple[dict[TopicPartition, ErrorCode], list, list]:
    """Carry out ``decision`` (see the module): the per-partition errors, the partitions
    newly led and those now followed. A role whose log cannot be created waits in
    ``unhosted_roles`` for ``retry_unhosted_roles`` (``retrying``: this is that retry, whose
    failures were logged already)."""
    rm = broker.replica_manager
    errors = dict(decision.errors)
    decision = _without_offline(broker, decision, errors)
    _remove_fetchers(broker, [s.key for s in decision.leaders])
    failed = await _create_logs(broker, decision.leaders + decision.followers, retrying)
    errors.update(failed)
    for s in decision.leaders + decision.followers:
        if failed.get(s.key) == ErrorCode.KAFKA_STORAGE_ERROR and not _is_offline(broker, s.key):
            rm.unhosted_roles[s.key] = s
    elected = await _in_turns([s for s in decision.leaders if s.key not in failed],
                              lambda part: _make_leaders_durably(broker, part, errors))
    resigned = await _in_turns([s for s in decision.followers if s.key not in failed],
                               lambda part: _make_followers(broker, part, errors))
    _on_leadership_change(broker, elected, resigned)
    return errors, elected, resigned


async def _in_turns(states: list, take) -> list:
    """``take(part)`` for `ROLES_PER_TURN` of ``states`` at a time, the loop free to serve other
    requests between two parts; what they returned, concatenated."""
    taken = []
    for start in range(0, len(states), ROLES_PER_TURN):
        if start:
            await asyncio.sleep(0)
        taken += take(states[start:start + ROLES_PER_TURN])
    return taken


async def stop_replicas(broker, header: ControlHeader, partitions: Sequence[StopReplicaPartition]
                        ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
    """Stop replicas as a StopReplica asks: ``(error, per-partition errors)``. Stopped ones
    no longer fetch; with ``delete`` they also leave service (``ReplicaManager.remove``:
    reads and appends of them fail from now on) and their logs are deleted (renamed, then
    erased after ``file.delete.delay.ms``; ``LogManager.delete_logs``, in a worker thread).
    Without ``delete`` the replica stays hosted (the controller sends that to a follower
    going offline, as in a controlled shutdown)."""
    rm = broker.replica_manager
    async with rm.state_change_lock:
        error = await check_controller_request(broker, "StopReplica", header)
        if error != ErrorCode.NONE:
            return error, {}
        decision = decide_stops(partitions, lambda key: _held(rm, key))
        errors = dict(decision.errors)
        _remove_fetchers(broker, list(decision.stop))
        resigned, deleted = [], []
        for key, delete in decision.stop.items():
            errors[key] = ErrorCode.NONE
            rm.unhosted_roles.pop(key, None)
            if not delete:
                rm.notify(key)
                continue
            part = rm.get(*key)
            if part is not None and part.topic in (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, "__share_group_state"):
                resigned.append(part)
            if getattr(broker, "log_dir_failures", None) is not None:
                broker.log_dir_failures.forget(key)  # deleted: its failed log has nothing to serve
            rm.remove(key[0], key[1], delete=False)  # out of service now; wakes its waiters
            deleted.append(key)
        if deleted:
            await asyncio.get_running_loop().run_in_executor(None, broker.log_manager.delete_logs, deleted)
            log.info("stopped and deleted %d replica(s) on request of controller %d (epoch %d)",
                     len(deleted), header.controller_id, header.controller_epoch)
        _on_leadership_change(broker, [], resigned)
        return ErrorCode.NONE, errors


async def update_metadata(broker, header: ControlHeader, deleted_topics: Iterable[str] = (),
                          reported: Iterable[ReportedPartition] = (),
                          alive: Iterable[int] | None = None,
                          states: Iterable[ControllerState] = ()) -> ErrorCode:
    """An UpdateMetadata: checked as the others and its controller epoch remembered. Its
    partition ``states`` go into the broker's metadata image where newer
    (``MetadataCache.take_controller_states``: a cluster broker's only source of them after
    their first read); so do their offline replicas
    (``reported``, kept in ``broker.metadata.offline_replicas``, `OfflineReplicas`): replicas
    in failed log directories are known to the controller only; and its live brokers (``alive``,
    kept in ``broker.metadata.alive_brokers``, `AliveBrokers`): the controller may have failed a
    broker whose registration is still there. Topics the controller is deleting
    (partitions whose leader is -2, ``LeaderDuringDelete``): the group coordinator drops
    their committed offsets (Kafka's ``handleDeletedPartitions``)."""
    async with broker.replica_manager.state_change_lock:
        error = await check_controller_request(broker, "UpdateMetadata", header)
        if error == ErrorCode.NONE:
            broker.metadata.cache.take_controller_states(states)
            broker.metadata.offline_replicas.update(reported)
            if alive is not None and not broker.metadata.alive_brokers.update(alive, broker.broker_id):
                log.warning("UpdateMetadata of controller %d lists live brokers without this one (%d): "
                            "its list is not taken", header.controller_id, broker.broker_id)
    topics = set(deleted_topics)
    coordinator = getattr(broker, "group_coordinator", None)
    if error == ErrorCode.NONE and topics and coordinator is not None:
        coordinator.on_topics_deleted(topics)
    return error


# --- steps ------------------------------------------------------------------------------------
def _without_offline(broker, decision, errors: dict):
    """``decision`` less the partitions whose log directory failed here: KAFKA_STORAGE_ERROR
    for each (Kafka's ``HostedPartition.Offline``)."""
    failures = getattr(broker, "log_dir_failures", None)
    if failures is None or not failures.offline_partitions:
        return decision
    offline = [s.key for s in decision.leaders + decision.followers if failures.is_offline(s.key)]
    if not offline:
        return decision
    for key in offline:
        errors[key] = ErrorCode.KAFKA_STORAGE_ERROR
    log.warning("LeaderAndIsr names %d partition(s) of a failed log directory: answered KAFKA_STORAGE_ERROR",
                len(offline))
    return replace(decision, leaders=[s for s in decision.leaders if not failures.is_offline(s.key)],
                   followers=[s for s in decision.followers if not failures.is_offline(s.key)])


def _is_offline(broker, key: TopicPartition) -> bool:
    failures = getattr(broker, "log_dir_failures", None)
    return failures is not None and failures.is_offline(key)


def _held(rm, key: TopicPartition) -> HeldReplica | None:
    part = rm.partitions.get(key)
    return None if part is None else HeldReplica(part.leader_epoch, part.topic_id)


async def _create_logs(broker, states: list[LeaderAndIsrPartition],
                       retrying: bool = False) -> dict[TopicPartition, ErrorCode]:
    """Host the partitions not hosted yet, their logs opened or created and their producer
    state restored in a worker thread (``ReplicaManager.new_partition``; a new leader's log
    with its leader epoch begun there too: that writes the leader-epoch-checkpoint, two
    fsyncs, which ``make_leader`` then finds done). Those that fail: KAFKA_STORAGE_ERROR
    (BROKER_NOT_AVAILABLE once the broker is stopping: no log is created then). A log
    absent while a log directory is offline, of a replica not new, may be in that
    directory: its partition goes offline here as if it had failed with it (Kafka's
    ``markPartitionOffline``), so that it answers KAFKA_STORAGE_ERROR until a restart."""
    rm = broker.replica_manager
    todo = [s for s in states if s.key not in rm.partitions]
    if not todo:
        return {}
    topic_ids = {s.topic: _topic_id(broker, s) for s in todo}
    me = broker.broker_id

    refused: list[TopicPartition] = []  # absent logs a failed directory may hold

    def create() -> tuple[list, dict[TopicPartition, ErrorCode]]:
        # one fsync per log directory for all the new logs (LogManager.creation_batch)
        with rm.log_manager.creation_batch() as batch:
            made, failed = create_each()
        for key, e in batch.failed.items():
            log.log(logging.DEBUG if retrying else logging.ERROR, "cannot create the log of %s-%d "
                    "(tried again every few seconds): %s", key[0], key[1], e)
            failed[key] = ErrorCode.KAFKA_STORAGE_ERROR
        return [p for p in made if p.key not in batch.failed], failed

    def create_each() -> tuple[list, dict[TopicPartition, ErrorCode]]:
        made, failed, configs = [], {}, {}
        for s in todo:
            if getattr(broker, "stopping", False):  # the log manager is about to close
                failed[s.key] = ErrorCode.BROKER_NOT_AVAILABLE
                continue
            try:
                config = configs.get(s.topic)
                if config is None:
                    config = configs[s.topic] = broker.topics.topic_log_config(s.topic)
                part = rm.new_partition(s.topic, s.partition, topic_ids[s.topic], config, is_new=s.is_new)
                if s.leader == me:
                    part.log.assign_leader_epoch(s.leader_epoch)
                made.append(part)
            except OfflineLogDirsError as e:
                log.error("%s", e)
                refused.append(s.key)
                failed[s.key] = ErrorCode.KAFKA_STORAGE_ERROR
            except (OSError, StorageError) as e:  # logged once, not at every retry
                log.log(logging.DEBUG if retrying else logging.ERROR, "cannot create the log of %s-%d "
                        "(tried again every few seconds): %s", s.topic, s.partition, e)
                failed[s.key] = ErrorCode.KAFKA_STORAGE_ERROR
        return made, failed

    made, failed = await asyncio.get_running_loop().run_in_executor(None, create)
    for part in made:
        rm.host(part)
    failures = getattr(broker, "log_dir_failures", None)
    if refused and failures is not None:
        failures.mark_offline(refused)
    return failed


def _topic_id(broker, state: LeaderAndIsrPartition):
    """The request's topic id, else (LeaderAndIsr v0-4) the metadata image's, else None."""
    if state.topic_id is not None:
        return state.topic_id
    assignment = broker.metadata_image().topic(state.topic)
    return assignment.topic_id if assignment is not None else None


def _make_leaders(broker, states: list[LeaderAndIsrPartition], errors: dict) -> list:
    """Lead each; the partitions this broker did not lead before (Kafka's ``makeLeader``
    answers whether it is a new leader: a new epoch of the same leader elects no one)."""
    rm = broker.replica_manager
    elected = []
    debug = log.isEnabledFor(logging.DEBUG)  # a line per partition: 10,000 in a failover
    for s in states:
        try:
            part = rm.get(*s.key)
            was_leader = part is not None and part.is_leader(broker.broker_id)
            config = part.log.config if part is not None else broker.topics.topic_log_config(s.topic)
            part = rm.make_leader(s.topic, s.partition, _topic_id(broker, s), s.replicas, s.isr, s.leader_epoch,
                                  config, zk_version=s.zk_version)
        except (OSError, StorageError) as e:
            log.error("cannot lead %s-%d: %s", s.topic, s.partition, e)
            errors[s.key] = ErrorCode.KAFKA_STORAGE_ERROR
            continue
        errors[s.key] = ErrorCode.NONE  # make_leader told the partition's watchers (notify)
        if not was_leader:
            elected.append(part)
        if debug:
            log.debug("leading %s-%d at leader epoch %d from offset %d, ISR %s", s.topic, s.partition,
                      s.leader_epoch, part.leader_epoch_start_offset, list(s.isr))
    return elected


def _make_leaders_durably(broker, states: list[LeaderAndIsrPartition], errors: dict) -> list:
    """``_make_leaders`` with the new leader epochs' checkpoints made durable together, one
    sync per log directory (``LogManager.sync_written``) instead of two fsyncs per partition
    (a failover's thousands of new leaders), before anything else runs on the loop: no batch
    of a new epoch is appended before its epoch is on disk, as before. A directory whose sync
    fails answers KAFKA_STORAGE_ERROR for its partitions (and is reported failed)."""
    log_manager = getattr(broker.replica_manager, "log_manager", None)
    if log_manager is None or not states:
        return _make_leaders(broker, states, errors)
    with deferred_sync.deferring() as noted:
        elected = _make_leaders(broker, states, errors)
    failed = log_manager.sync_written(noted)
    if failed:
        for s in states:
            part = broker.replica_manager.get(*s.key)
            if part is not None and os.path.dirname(os.path.abspath(part.log.directory)) in failed:
                errors[s.key] = ErrorCode.KAFKA_STORAGE_ERROR
        elected = [p for p in elected if errors.get(p.key) != ErrorCode.KAFKA_STORAGE_ERROR]
    return elected


def _make_followers(broker, states: list[LeaderAndIsrPartition], errors: dict) -> list:
    """Become follower of each; then fetch from the new leaders (see the module)."""
    rm = broker.replica_manager
    resigned = []
    debug = log.isEnabledFor(logging.DEBUG)
    for s in states:
        try:
            part = rm.get(*s.key)
            config = part.log.config if part is not None else broker.topics.topic_log_config(s.topic)
            part = rm.make_follower(s.topic, s.partition, _topic_id(broker, s), s.replicas, s.isr, s.leader,
                                    s.leader_epoch, config, zk_version=s.zk_version)
        except (OSError, StorageError) as e:
            log.error("cannot follow %s-%d: %s", s.topic, s.partition, e)
            errors[s.key] = ErrorCode.KAFKA_STORAGE_ERROR
            continue
        errors[s.key] = ErrorCode.NONE
        resigned.append(part)
        if debug:
            log.debug("following broker %d for %s-%d at leader epoch %d from offset %d (high watermark %d)",
                      s.leader, s.topic, s.partition, s.leader_epoch, part.log_end_offset, part.high_watermark)
    _remove_fetchers(broker, [p.key for p in resigned])
    if not getattr(broker, "stopping", False):
        _add_fetchers(broker, [p for p in resigned if p.leader_id >= 0])
    return resigned


def _remove_fetchers(broker, keys: list[TopicPartition]) -> None:
    fetchers = getattr(broker, "replica_fetchers", None)
    if keys and fetchers is not None:
        fetchers.remove_partitions(keys)


def _add_fetchers(broker, parts: list) -> None:
    fetchers = getattr(broker, "replica_fetchers", None)
    if not parts or fetchers is None:
        return
    fetch_state = initial_fetch_state_class()
    fetchers.add_partitions({
        p.key: fetch_state(p.topic_id, p.leader_id, p.leader_epoch,
                           initial_fetch_offset(p.log_end_offset, p.high_watermark,
                                                p.log.leader_epoch_cache.latest_epoch))
        for p in parts
    })


@dataclass(frozen=True, slots=True)
class _InitialFetchState:
    """Stands in for the replica fetcher's own class until that module exists (same fields)."""

    topic_id: object
    leader_id: int
    leader_epoch: int
    fetch_offset: int


def initial_fetch_state_class():
    """The replica fetcher's ``InitialFetchState(topic_id, leader_id, leader_epoch,
    fetch_offset)``, wherever the fetcher modules define it."""
    for name in ("odradek.replication.replica_fetcher", "odradek.replication.initial_fetch_state"):
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name != name:
                raise  # the module exists but is broken: say so
            continue
        if hasattr(module, "InitialFetchState"):
            return module.InitialFetchState
    return _InitialFetchState


def _on_leadership_change(broker, elected: list, resigned: list) -> None:
    """Tell the group coordinator which ``__consumer_offsets`` partitions this broker now
    leads and which it no longer leads, and the transaction coordinator the same of
    ``__transaction_state``, as ``(topic, partition)`` keys (Kafka's ``onElection`` /
    ``onResignation``; the leader epoch is the hosted partition's)."""
    for name, topic in (("group_coordinator", OFFSETS_TOPIC), ("txn_coordinator", TRANSACTION_STATE_TOPIC),
                        ("share_coordinator", "__share_group_state")):
        coordinator = getattr(broker, name, None)
        callback = getattr(coordinator, "on_leadership_change", None)
        if callback is None:
            continue
        won = [p.key for p in elected if p.topic == topic]
        lost = [p.key for p in resigned if p.topic == topic]
        if won or lost:
            callback(elected=won, resigned=lost)
    # KIP-932: share-partitions live with their partition's leadership (any topic)
    share_partitions = getattr(broker, "share_partition_manager", None)
    if share_partitions is not None and resigned:
        share_partitions.on_leadership_change([p.key for p in resigned])
