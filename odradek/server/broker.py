"""The broker: its lifecycle, its parts, and request dispatch.

Start-up order: metadata store (embedded, or ZooKeeper when ``zookeeper.connect`` is set) and
the cluster id; the logs of every data directory (recovering after an unclean stop); the
partitions this broker leads; the listeners (port 0 binds an ephemeral port, which is then
what is advertised); registration under ``/brokers/ids``; background tasks (retention, flush,
checkpoints, idle connections). ``stop()`` undoes it in reverse and leaves a clean-shutdown
marker, so the next start skips recovery.

Everything runs on one asyncio event loop; only fsync runs in a worker thread (flushing one
partition never blocks appends to others).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time

from odradek.coordinator.producer_ids import ProducerIdManager
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server.config import BrokerConfig, ConfigError
from odradek.server.connection import Connection
from odradek.server.handlers import HANDLERS
from odradek.server.memory_pool import MemoryPool
from odradek.server.topics import TopicError, TopicManager
from odradek.storage.clock import SystemClock
from odradek.storage.config import LogConfig

log = logging.getLogger("odradek.broker")

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


class Broker:
    def __init__(self, config: BrokerConfig, clock=None) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.broker_id = config.broker_id
        self.connections: set[Connection] = set()
        self.memory_pool = MemoryPool(config["queued.max.request.bytes"])
        self.servers: list[asyncio.AbstractServer] = []
        self.bound: dict[str, tuple[str, int]] = {}  # listener name -> (host, port)
        self.stopping = False
        self.allow_internal_writes = False
        self._tasks: list[asyncio.Task] = []
        self._handler_tasks: set[asyncio.Future] = set()
        self._last_bad_input_log = 0.0
        self.metadata = None
        self.log_manager = None
        self.replica_manager = None
        self.produce_fast_path = None
        self.topics: TopicManager | None = None
        self.group_coordinator = None
        self.producer_ids: ProducerIdManager | None = None
        self._log_defaults: LogConfig | None = None
        self._min_insync_replicas: int | None = None

    # --- lifecycle ------------------------------------------------------------------------
    async def start(self) -> None:
        from odradek.replication.replica_manager import ReplicaManager
        from odradek.server.produce_fast_path import ProduceFastPath
        from odradek.server.metadata_setup import open_metadata, open_producer_ids
        from odradek.storage.log_manager import LogManager

        self.loop = asyncio.get_running_loop()
        self.metadata = open_metadata(self.config)
        self.cluster_id = self.metadata.cluster_id()
        self.topics = TopicManager(self)
        self.log_manager = LogManager(self.config.log_dirs, self.log_defaults(), self.clock,
                                      config_for_topic=self.topics.topic_log_config)
        await self.loop.run_in_executor(None, self.log_manager.startup)
        self.replica_manager = ReplicaManager(self.broker_id, self.log_manager, self.clock)
        self.produce_fast_path = ProduceFastPath(self)
        self.producer_ids = open_producer_ids(self.metadata, self.broker_id)
        await self._listen()
        self.metadata.register_broker(self.broker_info())
        self.topics.become_leader_of_assigned()
        from odradek.coordinator.group import GroupCoordinator
        self.group_coordinator = GroupCoordinator.start(self)
        self._start_background()
        log.info("broker %d up: cluster %s, listening on %s, data in %s", self.broker_id,
                 self.cluster_id, self.advertised(), ", ".join(self.config.log_dirs))

    async def _listen(self) -> None:
        for listener in self.config.listeners:
            host = listener.host or None
            server = await self.loop.create_server(
                lambda name=listener.name: Connection(self, name), host, listener.port,
                reuse_address=True, backlog=1024,
            )
            sock = server.sockets[0]
            set_buffer_sizes(sock, self.config)
            self.bound[listener.name] = (listener.host or socket.gethostname(), sock.getsockname()[1])
            self.servers.append(server)

    def advertised(self) -> list[tuple[str, str, int]]:
        """``(listener, host, port)`` that clients are told, with bound ports filled in."""
        out = []
        for listener in self.config.advertised_listeners:
            host, port = listener.host, listener.port
            bound = self.bound.get(listener.name)
            if port == 0 and bound:
                port = bound[1]
            if not host or host == "0.0.0.0":
                host = bound[0] if bound and bound[0] != "0.0.0.0" else socket.gethostname()
            out.append((listener.name, host, port))
        return out

    def broker_info(self):
        from odradek.metadata.layout import BrokerInfo, Endpoint

        endpoints = tuple(Endpoint(name, host, port, "PLAINTEXT") for name, host, port in self.advertised())
        return BrokerInfo(self.broker_id, endpoints, self.config["broker.rack"])

    @property
    def port(self) -> int:
        """The first listener's bound port (tests bind port 0)."""
        return next(iter(self.bound.values()))[1]

    def _start_background(self) -> None:
        from odradek.server.background import background_tasks

        for coro in background_tasks(self):
            self._tasks.append(self.loop.create_task(coro))

    async def stop(self) -> None:
        if self.stopping:
            return
        self.stopping = True
        for server in self.servers:
            server.close()
        for conn in list(self.connections):
            conn.close()
        if self.replica_manager is not None:
            self.replica_manager.wake_all()
        tasks = self._tasks + list(self._handler_tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        clean = True
        for part in (self.group_coordinator, self.replica_manager, self.log_manager):
            if part is not None:
                try:
                    part.shutdown()
                except Exception:
                    clean = False
                    log.exception("%s failed to shut down", type(part).__name__)
        if self.metadata is not None:
            self.metadata.close()
            self.metadata.store.close()
        log.info("broker %d stopped%s", self.broker_id, " cleanly" if clean else " with errors")

    # --- requests ---------------------------------------------------------------------------
    def dispatch(self, ctx, body):
        return HANDLERS[ctx.api_key](ctx, body)

    def track(self, task: asyncio.Future) -> None:
        """Keep a waiting handler's task so that stop() can finish it."""
        self._handler_tasks.add(task)
        task.add_done_callback(self._handler_tasks.discard)

    def metadata_image(self):
        return self.metadata.snapshot()

    # --- dynamic broker configs -----------------------------------------------------------
    def dynamic_broker_config(self) -> dict[str, str]:
        """Cluster-wide dynamic defaults overlaid with this broker's own dynamic configs."""
        return {**self.metadata.broker_config(None), **self.metadata.broker_config(self.broker_id)}

    def log_defaults(self) -> LogConfig:
        """Topic config defaults: Kafka's, then server.properties, then dynamic broker configs."""
        if self._log_defaults is None:
            props = {**self.config.props, **self.dynamic_broker_config()}
            self._log_defaults = LogConfig.from_properties(props)
        return self._log_defaults

    def default_min_insync_replicas(self) -> int:
        """``min.insync.replicas`` of topics without their own: the dynamic broker config when
        set (validated when it was), else server.properties'."""
        if self._min_insync_replicas is None:
            value = self.dynamic_broker_config().get("min.insync.replicas")
            try:
                self._min_insync_replicas = self.config["min.insync.replicas"] if value is None else int(value)
            except ValueError:  # written to the store by another tool, unchecked
                self._min_insync_replicas = self.config["min.insync.replicas"]
        return self._min_insync_replicas

    def validate_dynamic_broker_config(self, new: dict[str, str]) -> None:
        try:
            BrokerConfig.from_props({**self.config.props, **new})
        except ConfigError as e:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(e)) from None

    def set_dynamic_broker_config(self, broker_id: int | None, new: dict[str, str]) -> None:
        self.metadata.set_broker_config(broker_id, new)
        self._log_defaults = self._min_insync_replicas = None
        for name in self.metadata_image().topics:
            self.replica_manager.update_config(name, self.topics.topic_log_config(name))

    def leader_partition(self, topic: str, index: int):
        """``(partition, error)``: the partition this broker leads, or None and the error code
        clients expect (UNKNOWN_TOPIC_OR_PARTITION for a topic or partition number that does
        not exist, NOT_LEADER_OR_FOLLOWER when another broker leads it)."""
        part = self.replica_manager.get(topic, index)
        if part is not None and part.is_leader(self.broker_id):
            return part, ErrorCode.NONE
        assignment = self.metadata_image().topic(topic)
        if assignment is None or index not in assignment.partitions:
            return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return None, ErrorCode.NOT_LEADER_OR_FOLLOWER

    def is_internal_topic(self, topic: str) -> bool:
        return topic in INTERNAL_TOPICS

    def loop_time(self) -> float:
        return self.loop.time()

    def log_bad_input(self, message: str) -> None:
        """One line per bad request, rate-limited so a flood cannot flood the log."""
        now = time.monotonic()
        if now - self._last_bad_input_log >= 0.1:
            self._last_bad_input_log = now
            log.warning("%s", message)


def set_buffer_sizes(sock: socket.socket, config) -> None:
    """Kafka's ``socket.send.buffer.bytes`` and ``socket.receive.buffer.bytes`` (SO_SNDBUF,
    SO_RCVBUF; -1 leaves the OS's own, which Linux grows with the traffic), set on the
    listening socket: connections it accepts inherit them, and a receive buffer is in place
    before the handshake announces the window."""
    for key, option in (("socket.send.buffer.bytes", socket.SO_SNDBUF),
                        ("socket.receive.buffer.bytes", socket.SO_RCVBUF)):
        size = config[key]
        if size != -1:
            sock.setsockopt(socket.SOL_SOCKET, option, size)
