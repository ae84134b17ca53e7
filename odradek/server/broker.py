"""The broker: its lifecycle, its parts, and request dispatch.

Start-up order (Kafka 2.8's ``KafkaServer.startup``): metadata store (embedded, or ZooKeeper
when ``zookeeper.connect`` is set) and the cluster id; the logs of every data directory
(recovering after an unclean stop; the logs of deleted topics removed); the replica manager
with the replication parts (channel to the controller, replica fetchers, AlterPartition
sender); the listeners (``broker_listeners``; port 0 binds an ephemeral port, which is then
what is advertised);
registration under ``/brokers/ids`` (its creation id is the broker epoch); the controller
service (it elects; when this broker wins, ``start()`` returns once this broker took the roles
the controller gave it, so a single broker leads its partitions by then); the group
coordinator; background tasks (retention, flush, checkpoints, idle connections).

The broker takes a role for a partition (leader, follower) only from LeaderAndIsr, never on
its own. ``stop()``: controlled shutdown first (``controlled.shutdown.enable``, when another
broker is registered: the controller moves this broker's leaderships away), then the controller service resigns, the fetchers stop,
then the rest in reverse start-up order, leaving a clean-shutdown marker so the next start
skips recovery.

A failed log directory takes only its own partitions offline (``log_dir_failure_handler``:
KAFKA_STORAGE_ERROR for them, the controller told); when every one has failed the broker
halts: ``halt()`` stops it without a controlled shutdown and sets ``halted``.

Everything runs on one asyncio event loop; only fsync runs in a worker thread (flushing one
partition never blocks appends to others).
"""

from __future__ import annotations

import asyncio
import inspect
import logging

from odradek.controller.controller_service import ControllerService
from odradek.coordinator.producer_ids import ProducerIdManager
from odradek.metadata import layout
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.replication.alter_partition_manager import AlterPartitionManager
from odradek.replication.replica_fetcher_manager import ReplicaFetcherManager
from odradek.server.add_partitions_to_txn_manager import AddPartitionsToTxnManager
from odradek.server.broker_listeners import BrokerListeners, BrokerStartError  # noqa: F401 - re-exported
from odradek.server.broker_services import BrokerServices
from odradek.server.broker_to_controller import BrokerToControllerChannel
from odradek.server.dynamic_broker_config import (
    DynamicConfigError, DynamicPasswords, check_listeners, check_names, check_thread_counts,
)
from odradek.server.config import BrokerConfig, ConfigError, Listener
from odradek.server.config_change_listener import ConfigChangeListener
from odradek.server import client_quota_configs, group_configs
from odradek.server.client_quota_manager import ClientQuotaManager, QuotaCache
from odradek.server.client_request_quota import ClientRequestQuotaManager
from odradek.server.connection import Connection
from odradek.server.connection_quotas import ConnectionQuotas, parse_overrides
from odradek.server.handlers import HANDLERS
from odradek.server.internal_topics import INTERNAL_TOPICS
from odradek.server.sasl_authenticator import inter_broker_sasl
from odradek.server.listener_security import (
    inter_broker_listener,
    inter_broker_ssl_context,
)
from odradek.server.log_dir_failure_handler import LogDirFailureHandler
from odradek.server.log_limiter import LogRateLimiter, message_key
from odradek.server.memory_pool import MemoryPool
from odradek.server.metadata_partitions import MetadataPartitionsCache
from odradek.server.metrics.broker_metrics import BrokerMetrics
from odradek.server.replication_quota_manager import ReplicationQuotas
from odradek.server.topics import TopicError, TopicManager
from odradek.storage.clock import SystemClock
from odradek.storage.config import LogConfig
from odradek.storage.log_dir_lock import LogDirError, LogDirLocks

log = logging.getLogger("odradek.broker")


class Broker(BrokerListeners, BrokerServices):
    def __init__(self, config: BrokerConfig, clock=None) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.broker_id = config.broker_id
        self.connections: set[Connection] = set()
        # Called with a connection's id once it closed (server/connection.py), e.g. by the
        # SharePartitionManager to end the share sessions that connection owned.
        self.connection_close_listeners: list = []
        self.memory_pool = MemoryPool(config["queued.max.request.bytes"])
        self.servers: dict[str, tuple[Listener, asyncio.AbstractServer]] = {}  # by listener name
        self.bound: dict[str, tuple[str, int]] = {}  # listener name -> (host, port)
        # server/listener_security.py: each bound listener's protocol and TLS context, and the
        # TLS context of this broker's connections to other brokers (None: not TLS)
        self.listener_security: dict = {}
        self.inter_broker_ssl = None
        self.inter_broker_sasl = None  # server/sasl_authenticator.py: the inter-broker SASL login
        self.inter_broker_listener: str | None = None
        self.stopping = False
        self._stop_begun = False
        self.allow_internal_writes = False
        self._tasks: list[asyncio.Task] = []
        self._handler_tasks: set[asyncio.Future] = set()
        self.log_limiter = LogRateLimiter()
        self.metrics = BrokerMetrics(self)  # server/metrics/: counters; the HTTP listener (http.listeners)
        self.metadata = None
        self.metadata_partitions = MetadataPartitionsCache()  # Metadata answers' partitions
        self.config_changes = None
        self.authorizer = None  # server/acl_authorizer.py, when authorizer.class.name is set
        self.replica_selector = None  # server/replica_selector.py, when replica.selector.class is set
        self.log_manager = None
        self.replica_manager = None
        self.produce_fast_path = None
        self.topics: TopicManager | None = None
        self.group_coordinator = None
        self.txn_coordinator = None
        self.share_coordinator = None  # coordinator/share/: share-partition state on __share_group_state
        self.share_persister = None  # coordinator/share/default_persister.py: what share partitions use
        self.share_partition_manager = None  # server/share/share_partition_manager.py: ShareFetch/ShareAcknowledge
        # The cluster parts (controller edge, replication): None until started.
        self.controller_service: ControllerService | None = None
        self.broker_to_controller: BrokerToControllerChannel | None = None
        self.replica_fetchers: ReplicaFetcherManager | None = None
        self.alter_partitions: AlterPartitionManager | None = None
        self.producer_ids: ProducerIdManager | None = None
        # server/add_partitions_to_txn_manager.py: transaction verification with coordinators elsewhere
        self.add_partitions_to_txn: AddPartitionsToTxnManager | None = None
        self._log_defaults: LogConfig | None = None
        self._min_insync_replicas: int | None = None
        self.log_dir_locks = LogDirLocks(config.log_dirs)
        self._unusable_log_dirs: dict[str, str] = {}  # log.dirs that could not be locked
        self.log_dir_failures = None  # LogDirFailureHandler, once the logs are loaded
        self.halted = asyncio.Event()
        self._effective_config: BrokerConfig | None = None
        self.connection_quotas = ConnectionQuotas(self.effective_config)
        # client byte-rate quotas (server/client_quota_manager.py); empty until loaded at start
        self.client_quotas = QuotaCache()
        # server/group_configs.py: every group's configs (GROUP resources); empty until loaded at start
        self.group_configs = group_configs.GroupConfigs(self)
        samples, window = config["quota.window.num"], config["quota.window.size.seconds"]
        self.produce_quotas = ClientQuotaManager("producer_byte_rate", self.client_quotas, self.clock, samples, window)
        self.fetch_quotas = ClientQuotaManager("consumer_byte_rate", self.client_quotas, self.clock, samples, window)
        self.request_quotas = ClientRequestQuotaManager(self.client_quotas, self.clock, samples, window)

    # --- lifecycle ------------------------------------------------------------------------
    async def start(self) -> None:
        """Start every part (see the module's docstring). Raises BrokerStartError, after undoing
        what was started, when a log directory or a listener cannot be had."""
        try:
            self._unusable_log_dirs = self.log_dir_locks.acquire()
        except LogDirError as e:
            raise BrokerStartError(str(e)) from None
        try:
            await self._start_parts()
        except BaseException:
            await self.stop(quiet=True)
            raise

    async def _start_parts(self) -> None:
        from odradek.replication.replica_manager import ReplicaManager
        from odradek.server.produce_fast_path import ProduceFastPath
        from odradek.server.metadata_setup import open_metadata, open_producer_ids
        from odradek.storage.log_manager import LogManager

        self.loop = asyncio.get_running_loop()
        try:
            self.inter_broker_ssl = inter_broker_ssl_context(self.config)
            self.inter_broker_sasl = inter_broker_sasl(self.config)
            self.inter_broker_listener = inter_broker_listener(self.config)
            self.dynamic_passwords = DynamicPasswords.from_config(self.config)
        except ConfigError as e:
            raise BrokerStartError(str(e)) from None
        await self.metrics.start()  # first: /v1/status/live answers during a long log recovery
        self.metadata = open_metadata(self.config)
        self.metadata.broker_config_codec = self.dynamic_passwords  # passwords encoded on ZooKeeper
        # off the loop (also the registration below): the store may wait for ZooKeeper to
        # come back, and /v1/status/live should answer meanwhile
        self.cluster_id = await self.loop.run_in_executor(None, self.metadata.cluster_id)
        # password.encoder.old.secret: re-encode with the new secret before anything reads them
        await self.loop.run_in_executor(None, self.dynamic_passwords.rotate, self.metadata.store, self.broker_id)
        from odradek.server.acl_authorizer import make_authorizer
        try:
            self.authorizer = make_authorizer(self.config, self.metadata.store, self.loop)
        except ValueError as e:
            raise BrokerStartError(str(e)) from None
        from odradek.server.replica_selector import make_replica_selector
        try:
            self.replica_selector = make_replica_selector(self.config)
        except ValueError as e:
            raise BrokerStartError(str(e)) from None
        self.topics = TopicManager(self)
        self.log_manager = LogManager(self.config.log_dirs, self.log_defaults(), self.clock,
                                      config_for_topic=self.topics.topic_log_config)
        for path, why in self._unusable_log_dirs.items():  # offline from the start, as in Kafka
            self.log_manager.failure_channel.maybe_add_offline_log_dir(path, why)
        await self.loop.run_in_executor(None, self.log_manager.startup)
        await self.loop.run_in_executor(None, self.topics.finish_deletions)
        self.replica_manager = ReplicaManager(self.broker_id, self.log_manager, self.clock,
                                              self.config["replica.lag.time.max.ms"],
                                              min_insync_replicas=self.topics.min_insync_replicas)
        self.produce_fast_path = ProduceFastPath(self)
        self.producer_ids = open_producer_ids(self.metadata, self.broker_id)
        self._make_cluster_parts()
        self.log_dir_failures = LogDirFailureHandler(self)
        self.log_dir_failures.start()
        await self._listen()
        await self.loop.run_in_executor(None, self.metadata.register_broker, self.broker_info())
        await self._start_controller()
        # group configs before the coordinators read them; before the listener (see below)
        self.group_configs.load(await self.loop.run_in_executor(None, group_configs.all_configs, self.metadata.store))
        from odradek.coordinator.group import GroupCoordinator
        self.group_coordinator = GroupCoordinator.start(self)
        from odradek.coordinator.transaction import TransactionCoordinator
        self.txn_coordinator = TransactionCoordinator.start(self)
        from odradek.coordinator.share import start_share_coordinator
        self.share_coordinator, self.share_persister = start_share_coordinator(self)
        from odradek.server.share.share_partition_manager import ShareManagerConfig, SharePartitionManager
        self.share_partition_manager = SharePartitionManager(self, self.share_persister, self.clock,
                                                             ShareManagerConfig.from_broker_config(self.config))
        self._tasks.append(self.loop.create_task(self.share_partition_manager.run()))  # acquisition lock expiry
        self.connection_close_listeners.append(self.share_partition_manager.on_connection_close)
        # Store reads, off the loop. Before the listener starts: it applies at start the
        # entities of the notifications there, so a change made meanwhile is not lost.
        self.client_quotas.load(await self.loop.run_in_executor(
            None, client_quota_configs.all_quotas, self.metadata.store))
        self.config_changes = ConfigChangeListener(self)
        await self.config_changes.start()
        self._start_background()
        self.metrics.mark_serving()
        log.info("broker %d up: cluster %s, listening on %s, data in %s", self.broker_id,
                 self.cluster_id, self.advertised(), ", ".join(self.config.log_dirs))

    def _make_cluster_parts(self) -> None:
        """The parts that LeaderAndIsr and the fetch path use, made before the listeners open
        (a controller may send LeaderAndIsr as soon as this broker is registered)."""
        self.broker_to_controller = BrokerToControllerChannel(self)
        self.replica_fetchers = ReplicaFetcherManager(self)
        self.alter_partitions = AlterPartitionManager(self)
        self.replication_quotas = ReplicationQuotas(self)
        self.add_partitions_to_txn = AddPartitionsToTxnManager(self)

    async def _start_controller(self) -> None:
        self.controller_service = ControllerService(self)
        await self.controller_service.start()

    def _other_brokers_live(self) -> bool:
        """Whether another broker is registered: alone, no leadership can move (the controller
        would answer that nothing is left after a round trip, or, being this broker and busy
        repeating a write a full disk refuses, not in time), so no controlled shutdown."""
        return any(b != self.broker_id for b in self.metadata_image().brokers)

    @property
    def broker_epoch(self) -> int:
        """Kafka's broker epoch: the creation id (czxid) of this broker's registration
        (``/brokers/ids/<id>``), renewed when a new session registers again; -1 before."""
        return self.metadata.broker_epoch if self.metadata is not None else -1

    @broker_epoch.setter
    def broker_epoch(self, epoch: int) -> None:  # for tests that fake a newer registration
        self.metadata.broker_epoch = epoch

    def controller_id(self) -> int:
        """The controller's broker id as the metadata image has it (-1: none right now)."""
        return self.metadata_image().controller_id

    def _start_background(self) -> None:
        from odradek.server.background import background_tasks

        for coro in background_tasks(self):
            self._tasks.append(self.loop.create_task(coro))

    def halt(self, reason: str) -> None:
        """A fatal error (every log directory failed): stop at once, without a controlled
        shutdown (Kafka's ``Exit.halt``); ``halted`` is set once stopped, and the ``odradek
        broker`` process then exits with status 1."""
        log.critical("broker %d: %s", self.broker_id, reason)

        async def halt() -> None:
            try:
                await self.stop(controlled=False)
            finally:
                self.halted.set()

        self.loop.create_task(halt())

    async def stop(self, quiet: bool = False, controlled: bool = True) -> None:
        """Stop every part (see the module's docstring); ``quiet`` after a failed start;
        ``controlled=False`` skips the controlled shutdown."""
        if self._stop_begun:
            return
        self._stop_begun = True
        if (not quiet and controlled and self.controller_service is not None and self.broker_to_controller is not None
                and self.config["controlled.shutdown.enable"] and self._other_brokers_live()):
            from odradek.server.controlled_shutdown import controlled_shutdown

            await controlled_shutdown(self)
        self.stopping = True
        for part in (self.controller_service, self.replica_fetchers,
                     self.alter_partitions, self.broker_to_controller):
            await _shut_down(part)
        if self.add_partitions_to_txn is not None:
            self.add_partitions_to_txn.close()
        for _, server in self.servers.values():
            server.close()
        for conn in list(self.connections):
            conn.close()
        if self.replica_manager is not None:
            self.replica_manager.wake_all()
        tasks = self._tasks + list(self._handler_tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        clean = marked = True
        for part in (self.share_partition_manager, self.share_coordinator, self.txn_coordinator, self.group_coordinator, self.replica_manager,
                     self.log_manager):
            if part is not None:
                try:
                    marked = part.shutdown() is not False and marked
                except Exception:
                    clean = False
                    log.exception("%s failed to shut down", type(part).__name__)
        if self.config_changes is not None:
            self.config_changes.close()
        if self.authorizer is not None:
            self.authorizer.close()
        if self.metadata is not None:
            self.metadata.close()
            self.metadata.store.close()
        self.log_dir_locks.release()
        await self.metrics.stop()
        if quiet:
            return
        if not clean:
            log.info("broker %d stopped with errors", self.broker_id)
        elif not marked:  # LogManager.shutdown said what it could not write
            log.info("broker %d stopped; its logs will be recovered at the next start", self.broker_id)
        else:
            log.info("broker %d stopped cleanly", self.broker_id)

    # --- requests ---------------------------------------------------------------------------
    def dispatch(self, ctx, body):
        if self.client_quotas.requests:  # handler time is measured (server/client_request_quota.py)
            return self.request_quotas.handle(ctx, body, HANDLERS[ctx.api_key])
        return HANDLERS[ctx.api_key](ctx, body)

    def track(self, task: asyncio.Future) -> None:
        """Keep a waiting handler's task so that stop() can finish it."""
        self._handler_tasks.add(task)
        task.add_done_callback(self._handler_tasks.discard)

    def metadata_image(self):
        return self.metadata.snapshot()

    @property
    def controller_epoch(self) -> int:
        """The highest controller epoch seen in a LeaderAndIsr, StopReplica or UpdateMetadata
        (``ReplicaManager.controller_epoch``; 0 before any)."""
        return self.replica_manager.controller_epoch if self.replica_manager is not None else 0

    # --- dynamic broker configs -----------------------------------------------------------
    def dynamic_broker_config(self) -> dict[str, str]:
        """Cluster-wide dynamic defaults overlaid with this broker's own dynamic configs."""
        return {**self.metadata.broker_config(None), **self.metadata.broker_config(self.broker_id)}

    def log_defaults(self) -> LogConfig:
        """Topic config defaults: Kafka's, then server.properties, then dynamic broker configs."""
        if self._log_defaults is None:
            self._log_defaults = self._log_defaults_with(self.dynamic_broker_config())
        return self._log_defaults

    def _log_defaults_with(self, dynamic: dict[str, str]) -> LogConfig:
        return LogConfig.from_properties({**self.config.props, **dynamic})

    def default_min_insync_replicas(self) -> int:
        """``min.insync.replicas`` of topics without their own: the dynamic broker config when
        set (validated when it was), else server.properties'."""
        if self._min_insync_replicas is None:
            self._min_insync_replicas = self._min_insync_replicas_with(self.dynamic_broker_config())
        return self._min_insync_replicas

    def _min_insync_replicas_with(self, dynamic: dict[str, str]) -> int:
        value = dynamic.get("min.insync.replicas")
        try:
            return self.config["min.insync.replicas"] if value is None else int(value)
        except ValueError:  # written to the store by another tool, unchecked
            return self.config["min.insync.replicas"]

    def down_conversion_enabled(self) -> bool:
        """``log.message.downconversion.enable``, dynamic broker configs applied."""
        return self.effective_config()["log.message.downconversion.enable"]

    def validate_dynamic_broker_config(self, broker_id: int | None, new: dict[str, str]) -> None:
        """Check ``new``, the whole set of dynamic configs about to replace this broker's own
        (``broker_id``) or the cluster-wide default (None): names as Kafka's
        DynamicBrokerConfig allows them there, values as ``BrokerConfig`` parses them with
        every level applied. Raises TopicError with Kafka's code (INVALID_REQUEST) and message."""
        current = self.metadata.broker_config(broker_id)
        changed = [k for k, v in new.items() if current.get(k) != v]
        other = self.metadata.broker_config(self.broker_id if broker_id is None else None)
        levels = {**new, **other} if broker_id is None else {**other, **new}
        try:
            check_names(changed, per_broker=broker_id is not None)
            self.dynamic_passwords.check(new, broker_id)
            after = BrokerConfig.from_props({**self.config.props, **levels})
            parse_overrides(after["max.connections.per.ip.overrides"])
            check_thread_counts(self.effective_config().values, after.values)
            if _listener_settings(after) != _listener_settings(self.effective_config()):
                check_listeners(after)
        except DynamicConfigError as e:
            raise TopicError(e.error, str(e)) from None
        except (ConfigError, ValueError) as e:  # ValueError: max.connections.per.ip.overrides
            raise TopicError(ErrorCode.INVALID_REQUEST, str(e)) from None

    def effective_config(self) -> BrokerConfig:
        """``server.properties`` overlaid with the dynamic configs (cluster-wide default, then
        this broker's own): what run-time features read."""
        if self._effective_config is None:
            self._effective_config = self._effective_config_with(self.dynamic_broker_config())
        return self._effective_config

    def _effective_config_with(self, dynamic: dict[str, str]) -> BrokerConfig:
        try:
            return BrokerConfig.from_props({**self.config.props, **dynamic})
        except ConfigError:  # written to the store by another tool, unchecked
            return self.config

    def set_dynamic_broker_config(self, broker_id: int | None, new: dict[str, str]) -> None:
        """Store and apply: topic defaults reach every topic without a value of its own, and
        changed listeners are bound (in a task: the answer does not wait for it)."""
        self.metadata.set_broker_config(broker_id, new)
        self.reload_dynamic_broker_config()
        self.config_changes.notify("brokers/" + layout.broker_config_entity(broker_id))

    def reload_dynamic_broker_config(self) -> None:
        """Apply the dynamic broker configs as stored now (this broker's own change)."""
        self.apply_dynamic_broker_config(self.dynamic_broker_config())

    def apply_dynamic_broker_config(self, dynamic: dict[str, str]) -> None:
        """Apply ``dynamic``, the dynamic broker configs as ``dynamic_broker_config()`` read
        them (another broker's change announced under ``/config/changes`` is read off the
        loop), on the loop and reading no store: the cached effective config, topic defaults
        and ``min.insync.replicas`` are all made from ``dynamic`` here (when one cannot be,
        none changes)."""
        before = self.effective_config()
        derived = (self._log_defaults_with(dynamic), self._min_insync_replicas_with(dynamic),
                   self._effective_config_with(dynamic))
        self._log_defaults, self._min_insync_replicas, self._effective_config = derived
        for name in self.metadata_image().topics:
            self.replica_manager.update_config(name, self.topics.topic_log_config(name))
        after = self.effective_config()
        if (after.listeners, after.advertised_listeners) != (before.listeners, before.advertised_listeners):
            self.track(self.loop.create_task(self.update_listeners()))

    def leader_partition(self, topic: str, index: int):
        """``(partition, error)``: the partition this broker leads, or None and the error code
        clients expect (UNKNOWN_TOPIC_OR_PARTITION for a topic or partition number that does
        not exist, KAFKA_STORAGE_ERROR when its log directory failed here,
        NOT_LEADER_OR_FOLLOWER when another broker leads it)."""
        part = self.replica_manager.get(topic, index)
        if part is not None and part.is_leader(self.broker_id):
            return part, ErrorCode.NONE
        if self.log_dir_failures is not None and self.log_dir_failures.is_offline((topic, index)):
            return None, ErrorCode.KAFKA_STORAGE_ERROR  # its log directory failed
        assignment = self.metadata_image().topic(topic)
        if assignment is None or index not in assignment.partitions:
            return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return None, ErrorCode.NOT_LEADER_OR_FOLLOWER

    def is_internal_topic(self, topic: str) -> bool:
        return topic in INTERNAL_TOPICS

    def loop_time(self) -> float:
        return self.loop.time()

    def log_bad_input(self, message: str) -> None:
        """A line for a bad request, at most one per kind of message and interval
        (``LogRateLimiter``), so a flood of bad requests cannot flood the log."""
        self.log_limiter.warning(log, message_key(message), "%s", message)

    def log_storage_error(self, error: object) -> None:
        """A write the disk refused (its partition was answered KAFKA_STORAGE_ERROR): a full
        disk refuses every produce until space returns, so the line is rate-limited per
        partition and cause (``LogRateLimiter``)."""
        self.log_limiter.error(log, ("storage", str(error)), "%s (answered KAFKA_STORAGE_ERROR; retried at each "
                               "produce)", error)


async def _shut_down(part) -> None:
    """``part.shutdown()`` (or ``close()``), awaited when it is a coroutine; a failure is
    logged, so the rest of the broker still stops."""
    stop = getattr(part, "shutdown", None) or getattr(part, "close", None)
    if stop is None:
        return
    try:
        result = stop()
        if inspect.isawaitable(result):
            await result
    except Exception:
        log.exception("%s failed to shut down", type(part).__name__)


def _listener_settings(config: BrokerConfig) -> tuple:
    return config.listeners, config.advertised_listeners, config["listener.security.protocol.map"]
