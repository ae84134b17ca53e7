"""`ControllerChannelManager`: the controller's requests to brokers (Kafka's
``ControllerChannelManager`` with one ``RequestSendThread`` per broker).

Per live broker one queue and one sender task on the broker's asyncio loop. The controller's
event thread hands requests over with `send` (thread-safe; the hand-over goes through
``loop.call_soon_threadsafe``, so per broker requests keep the order the controller made them
in: LeaderAndIsr, UpdateMetadata, StopReplica). A sender sends one request at a time and waits
for its response before the next, as Kafka's send thread does.

* Remote brokers: a connection to the broker's endpoint on the inter-broker listener
  (``metadata/inter_broker_endpoint.py``),
  with API versions negotiated; the request is encoded (`request_encoding`) at the highest
  version both sides have (LeaderAndIsr and UpdateMetadata to bytes once for all brokers,
  `request_encoding.SharedBodies`). A connection error or timeout closes the connection, and the same
  request is sent again after a back-off, until the broker leaves the live set
  (`update_brokers`), when its queue is dropped (the futures are cancelled).
* This broker: the request is encoded at the highest version we know and handed to the
  broker's own handler (``broker.dispatch``) with a `RequestContext` whose connection is a
  `LocalConnection`, in the same queue order: the single-broker case runs the same code.

Every `send` returns a ``concurrent.futures.Future`` of the decoded response body (cancelled
when the broker is removed first). A StopReplica with delete also produces an
`events.TopicDeletionStopReplicaResponse` through ``on_event``: the partitions the broker
deleted, and those it failed to (the whole request failing fails them all); a LeaderAndIsr
answered KAFKA_STORAGE_ERROR for some partitions an `events.LeaderAndIsrResponseReceived`
(replicas in a failed log directory, `leader_and_isr_storage_errors`).

The senders' live set is also watched for brokers whose process is gone
(`broker_liveness_monitor`): ``on_event`` gets `events.BrokerProcessGone` for them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import threading
from collections.abc import Callable, Mapping

from odradek.controller import events as ev
from odradek.controller.broker_liveness_monitor import BrokerLivenessMonitor
from odradek.controller.commands import (
    BrokerRequest,
    LeaderAndIsrRequest,
    LiveBroker,
    StopReplicaRequest,
    TopicPartition,
    UpdateMetadataRequest,
)
from odradek.controller.request_encoding import (
    SharedBodies, api_key_of, encode, encode_leader_and_isr,
)
from odradek.metadata.inter_broker_endpoint import inter_broker_endpoint
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.request_context import RequestContext

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.3
"""Pause before resending after a connection failure (Kafka's send thread waits 300 ms)."""

CLIENT_ID_PREFIX = "controller-"


def local_version(api_key: int) -> int:
    """The version of in-process requests: the highest this broker both sends and serves."""
    from odradek.client.connection import CLIENT_VERSIONS
    from odradek.protocol.api_keys import supported_range

    high = CLIENT_VERSIONS[api_key][1]
    served = supported_range(api_key)
    return min(high, served[1]) if served else high


class LocalConnection:
    """What a handler may ask of the connection of an in-process request. Its requests come
    from the broker itself (its controller), so the authorizer lets them all through
    (``in_process``), as Kafka's brokers are super users of each other."""

    in_process = True

    def __init__(self, broker, listener_name: str | None) -> None:
        self.broker = broker
        self.listener_name = listener_name
        self.peer = ("in-process", 0)


async def deliver_locally(broker, api_key: int, version: int, body, listener_name: str | None,
                          client_id: str):
    """Run ``body`` through this broker's own handler of ``api_key`` as if it had come in at
    ``version`` on ``listener_name``; return the handler's response body."""
    ctx = RequestContext(LocalConnection(broker, listener_name), api_key, version, 0, client_id,
                         version)
    response = broker.dispatch(ctx, body)
    if inspect.isawaitable(response):
        response = await response
    return response


def stop_replica_outcome(request: StopReplicaRequest, response) -> ev.TopicDeletionStopReplicaResponse:
    """The deletion event of a StopReplica with delete: partitions answered NONE were deleted;
    the others, or all of them when the request failed as a whole (``response`` None or an
    error code), failed."""
    deleting = [(p.topic, p.partition) for p in request.partitions if p.delete_partition]
    if response is None or response.error_code != ErrorCode.NONE:
        return ev.TopicDeletionStopReplicaResponse(request.broker_id, (), tuple(deleting))
    errors = {(e.topic_name, e.partition_index): e.error_code for e in response.partition_errors}
    # one pass, no membership test on a tuple: that was quadratic, 10,000 partitions of a
    # deletion took 5 s of the broker's event loop per answer
    deleted = tuple(tp for tp in deleting if errors.get(tp, ErrorCode.NONE) == ErrorCode.NONE)
    failed = tuple(tp for tp in deleting if errors.get(tp, ErrorCode.NONE) != ErrorCode.NONE)
    return ev.TopicDeletionStopReplicaResponse(request.broker_id, deleted, failed)


def leader_and_isr_storage_errors(request: LeaderAndIsrRequest, response) -> tuple[TopicPartition, ...]:
    """The partitions a LeaderAndIsr response answers KAFKA_STORAGE_ERROR (v0-4 name them,
    v5+ give topic ids, which the request maps back to names)."""
    storage = ErrorCode.KAFKA_STORAGE_ERROR
    found = [(e.topic_name, e.partition_index) for e in response.partition_errors if e.error_code == storage]
    names = {topic_id: name for name, topic_id in request.topic_ids}
    for topic in response.topics:
        name = names.get(topic.topic_id)
        if name is not None:
            found += [(name, e.partition_index) for e in topic.partition_errors if e.error_code == storage]
    return tuple(sorted(found))


class _RequestSender:
    """The queue and sender task of one target broker; lives on the loop."""

    def __init__(self, manager: ControllerChannelManager, target: LiveBroker) -> None:
        self.manager = manager
        self.target = target
        self.queue: asyncio.Queue = asyncio.Queue()
        self.connection = None
        self.current = None  # the future of the request being sent
        self.stopped = False
        self.task = asyncio.get_running_loop().create_task(
            self._run(), name=f"controller-to-broker-{target.broker_id}"
        )

    @property
    def local(self) -> bool:
        return self.target.broker_id == self.manager.broker.broker_id

    async def _run(self) -> None:
        if not self.local:  # connected before the first request: a new controller's first
            try:            # requests follow its failover's writes, which leave time for it
                await self._connect()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the first request connects again and reports
                self._close()
        while True:
            request, future = await self.queue.get()
            if future.cancelled():
                continue
            self.current = future
            response = await self._send_until_answered(request)
            self.current = None
            if not future.done():
                future.set_result(response)
            self.manager._on_response(request, response)

    async def _send_until_answered(self, request: BrokerRequest):
        failures = 0
        while True:
            try:
                return await self._deliver(request)
            except asyncio.CancelledError:
                raise
            except _Undeliverable as e:
                log.error("controller: cannot send %s to broker %d: %s",
                          type(request).__name__, self.target.broker_id, e)
                return None
            except Exception as e:  # noqa: BLE001 - connection errors: retry while live
                if self.stopped:
                    # Python 3.11's wait_for can swallow the cancellation that stopped this
                    # sender when the connection attempt failed at the same moment: never
                    # retry for a sender that was stopped
                    raise asyncio.CancelledError from None
                failures += 1
                log.log(logging.WARNING if failures == 1 else logging.DEBUG,
                        "controller: sending %s to broker %d failed (%r); retrying until it "
                        "answers or leaves", type(request).__name__, self.target.broker_id, e)
                self._close()
                await asyncio.sleep(self.manager.retry_backoff)

    async def _deliver(self, request: BrokerRequest):
        api_key = api_key_of(request)
        manager = self.manager
        if self.local:
            version = local_version(api_key)
            body = _encode(request, version, manager.listener)
            try:
                # shielded: like a request on the wire, a handler that started runs to its
                # end even when this sender is stopped (resignation, shutdown)
                return await asyncio.shield(deliver_locally(
                    manager.broker, api_key, version, body, manager.listener, manager.client_id))
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - our own handler failed: no use retrying
                log.exception("controller: this broker's handler failed on %s",
                              type(request).__name__)
                raise _Undeliverable(repr(e)) from None
        connection = await self._connect()
        from odradek.client.errors import UnsupportedVersionError

        try:
            version = connection.api_version(api_key)
        except UnsupportedVersionError as e:
            raise _Undeliverable(str(e)) from None
        if isinstance(request, StopReplicaRequest) and version < 3:
            if len({p.delete_partition for p in request.partitions}) > 1:
                raise _Undeliverable(f"StopReplica v{version} cannot mix delete and keep")
        if isinstance(request, (LeaderAndIsrRequest, UpdateMetadataRequest)):  # shared bytes
            body = manager.shared_bodies.body(request, version)
        else:
            body = _encode(request, version, manager.listener)
        return await connection.send(api_key, body, version=version)

    async def _connect(self):
        from odradek.client.connection import BrokerConnection

        if self.connection is not None and not self.connection.closed:
            return self.connection
        endpoint = inter_broker_endpoint(self.target.info, self.manager.listener)
        if endpoint is None:
            raise _Undeliverable(f"no endpoint on listener {self.manager.listener!r}")
        self.connection = BrokerConnection(
            endpoint.host, endpoint.port, node_id=self.target.broker_id,
            client_id=self.manager.client_id, request_timeout=self.manager.request_timeout,
            ssl_context=getattr(self.manager.broker, "inter_broker_ssl", None),
            sasl=getattr(self.manager.broker, "inter_broker_sasl", None),
        )
        await self.connection.connect(timeout=self.manager.request_timeout)
        return self.connection

    def _close(self) -> None:
        if self.connection is not None:
            self.connection.abort()
            self.connection = None

    def stop(self) -> None:
        self.stopped = True
        self.task.cancel()
        self._close()
        if self.current is not None:
            self.current.cancel()
        while not self.queue.empty():
            _, future = self.queue.get_nowait()
            future.cancel()


class _Undeliverable(Exception):
    """A request that retrying cannot help (no such listener, no such API version)."""


def _encode(request: BrokerRequest, version: int, listener: str | None):
    if api_key_of(request) == ApiKey.LEADER_AND_ISR:
        return encode_leader_and_isr(request, version, listener)
    return encode(request, version)


class ControllerChannelManager:
    """See the module docstring. ``on_event`` receives the events responses give rise to
    (StopReplica with delete), from the loop's thread."""

    def __init__(
        self,
        broker,
        *,
        on_event: Callable[[ev.ControllerEvent], object] | None = None,
        retry_backoff: float = RETRY_BACKOFF_S,
    ) -> None:
        self.broker = broker
        self.on_event = on_event
        self.retry_backoff = retry_backoff
        self.listener = broker.inter_broker_listener  # the broker resolved it from its config
        self.request_timeout = broker.config["controller.socket.timeout.ms"] / 1000
        self.client_id = f"{CLIENT_ID_PREFIX}{broker.broker_id}"
        self.shared_bodies = SharedBodies(self.listener)  # used on the loop only
        self.loop: asyncio.AbstractEventLoop | None = None
        self._senders: dict[int, _RequestSender] = {}
        self._lock = threading.Lock()
        self._closed = False
        self.liveness = BrokerLivenessMonitor(
            broker.broker_id, lambda b: inter_broker_endpoint(b.info, self.listener),
            lambda: broker.metadata.store, self._on_process_gone)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def _call(self, fn, *args) -> bool:
        """Run ``fn(*args)`` on the loop (from any thread); False if the loop is gone."""
        loop = self.loop
        if loop is None or loop.is_closed() or self._closed:
            return False
        try:
            loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop closed in between
            return False
        return True

    def update_brokers(self, live: Mapping[int, LiveBroker]) -> None:
        """Make the senders match the live set (thread-safe): new brokers get one, gone
        brokers lose theirs with their queued requests, a re-registered broker (new epoch or
        endpoints) gets a fresh one."""
        self._call(self._update_on_loop, dict(live))

    def _update_on_loop(self, live: dict[int, LiveBroker]) -> None:
        if self._closed:
            return
        for broker_id in list(self._senders):
            sender = self._senders[broker_id]
            if live.get(broker_id) != sender.target:
                sender.stop()
                del self._senders[broker_id]
        for broker_id, target in live.items():
            if broker_id not in self._senders:
                self._senders[broker_id] = _RequestSender(self, target)
        self.liveness.update(live)

    def _on_process_gone(self, broker_id: int, epoch: int) -> None:
        if self.on_event is not None:
            self.on_event(ev.BrokerProcessGone(broker_id, epoch))

    def send(self, request: BrokerRequest) -> concurrent.futures.Future:
        """Queue ``request`` for its broker (thread-safe); a future of the response body,
        cancelled if the broker is not live (or leaves before it is answered)."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        if not self._call(self._enqueue_on_loop, request, future):
            future.cancel()
        return future

    def _enqueue_on_loop(self, request: BrokerRequest, future: concurrent.futures.Future) -> None:
        sender = self._senders.get(request.broker_id)
        if sender is None or self._closed:
            future.cancel()
            return
        sender.queue.put_nowait((request, future))

    def _on_response(self, request: BrokerRequest, response) -> None:
        if isinstance(request, StopReplicaRequest) and any(
            p.delete_partition for p in request.partitions
        ):
            if self.on_event is not None:
                self.on_event(stop_replica_outcome(request, response))
        elif isinstance(request, LeaderAndIsrRequest) and response is not None and not response.error_code:
            offline = leader_and_isr_storage_errors(request, response)
            if offline and self.on_event is not None:
                self.on_event(ev.LeaderAndIsrResponseReceived(request.broker_id, offline))
        elif response is not None and getattr(response, "error_code", 0) != ErrorCode.NONE:
            log.warning("controller: broker %d answered %s with %s", request.broker_id,
                        type(request).__name__, ErrorCode(response.error_code).name)

    def live_targets(self) -> list[int]:
        """The brokers with a sender (for tests and diagnostics; read on the loop)."""
        return sorted(self._senders)

    def shutdown(self) -> None:
        """Stop every sender; queued requests are cancelled. Call on the loop's thread (or
        after the loop stopped)."""
        self._closed = True
        self.liveness.shutdown()
        for sender in self._senders.values():
            sender.stop()
        self._senders.clear()
