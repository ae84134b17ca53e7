"""The client's view of a cluster: bootstrap, one connection per broker, metadata, retries.

``ClusterClient`` is shared by the producer, consumer and admin client. It

- bootstraps from ``host:port`` addresses (tried in order until one answers) and from then on
  knows brokers by node id from Metadata responses;
- keeps at most one connection per broker, opened on first use (concurrent users wait for
  the same connect) and dropped when it breaks, so the next use reconnects;
- holds the current ``ClusterMetadata`` snapshot and refreshes it: for the *topics of
  interest* (what producers and consumers registered with ``add_topics``) when someone calls
  ``request_update`` (coalesced: one refresh at a time, at most one per ``retry_backoff``),
  when the snapshot is older than ``metadata_max_age``, or for explicit topics (``refresh``);
- runs operations with retries (``retry``): a retriable KafkaError (connection lost, not
  leader, coordinator moving, ...) is retried after an exponential backoff with jitter
  (``retry_backoff`` doubling up to ``retry_backoff_max``), refreshing metadata first when the
  error means the client's picture of leaders is stale, until the operation's deadline.
"""

from __future__ import annotations

import asyncio
import random

from odradek.client.connection import BrokerConnection
from odradek.client.errors import (
    BrokerError,
    ClientClosedError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
)
from odradek.client.metadata import ClusterMetadata
from odradek.client.sasl_authenticator import SaslClientConfig
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.metadata_request import (
    MetadataRequest,
    MetadataRequestTopic,
)

# Errors after which leaders or partition counts in the snapshot may be wrong.
STALE_METADATA = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_CONTROLLER, ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.REPLICA_NOT_AVAILABLE,
    ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.INCONSISTENT_TOPIC_ID,
})


def parse_bootstrap(servers) -> list[tuple[str, int]]:
    """``"h1:9092,h2:9093"`` or a list of ``"host:port"`` / ``(host, port)`` → address list."""
    if isinstance(servers, str):
        servers = [s for s in servers.split(",") if s.strip()]
    out = []
    for s in servers:
        if isinstance(s, tuple):
            out.append((s[0], int(s[1])))
            continue
        host, sep, port = s.strip().rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"bootstrap server {s!r} is not host:port")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("no bootstrap servers given")
    return out


def stale_metadata(error: BaseException) -> bool:
    """Whether ``error`` means the snapshot's leaders may be wrong (or a broker is gone)."""
    if isinstance(error, BrokerError):
        return error.code in STALE_METADATA
    return isinstance(error, KafkaConnectionError)


def _retrieve(task: asyncio.Task) -> None:
    if not task.cancelled():
        task.exception()  # a background refresh's failure is seen by whoever awaits it, if anyone


class ClusterClient:
    def __init__(
        self,
        bootstrap_servers,
        *,
        client_id: str = "odradek",
        request_timeout_ms: int = 30_000,
        connect_timeout_ms: int = 10_000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1_000,
        metadata_max_age_ms: int = 300_000,
        allow_auto_create_topics: bool = False,
        sasl: SaslClientConfig | None = None,
        ssl_context=None,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.ssl_context = ssl_context  # SSL, SASL_SSL: every connection is TLS (client/client_security.py)
        self.client_id = client_id
        self.sasl = sasl  # every connection authenticates so (client/sasl_authenticator.py)
        self.request_timeout = request_timeout_ms / 1000
        self.connect_timeout = connect_timeout_ms / 1000
        self.retry_backoff = retry_backoff_ms / 1000
        self.retry_backoff_max = max(retry_backoff_max_ms, retry_backoff_ms) / 1000
        self.metadata_max_age = metadata_max_age_ms / 1000
        self.allow_auto_create_topics = allow_auto_create_topics
        self.metadata = ClusterMetadata()
        self.metadata_version = 0  # counts refreshes
        self.topics: set[str] = set()  # topics of interest
        self.metadata_listeners: list = []  # callables(snapshot) after each refresh
        self._conns: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, asyncio.Future] = {}
        self._bootstrap_conn: BrokerConnection | None = None
        self._update: asyncio.Task | None = None
        self._update_again = False
        self._last_refresh = float("-inf")
        self._closed = False
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop

    async def start(self) -> ClusterClient:
        """Connect to a bootstrap server and load the broker list."""
        self._loop = asyncio.get_running_loop()
        await self.retry(lambda: self.refresh(self.topics or []), self.loop.time() + self.connect_timeout * 3)
        return self

    # --- connections ---------------------------------------------------------------------
    def connection_nowait(self, node_id: int) -> BrokerConnection | None:
        """The open connection to ``node_id``, or None while it is being opened (the open is
        started here; ``wait_connection`` waits for it)."""
        conn = self._conns.get(node_id)
        if conn is not None and not conn.closed:
            return conn
        if node_id not in self._connecting:
            self._start_connect(node_id)
        return None

    def connecting(self, node_id: int) -> asyncio.Future | None:
        """The future of a connection being opened to ``node_id``, if one is."""
        return self._connecting.get(node_id)

    def after_connect(self, connecting: asyncio.Future, callback) -> None:
        """Call ``callback()`` once ``connecting`` (from ``connecting``) settles: at once when
        the connection opened, after a metadata refresh when it failed (the broker may be gone
        and its partitions led elsewhere; the refresh's retry backoff keeps a dead address
        from becoming a busy loop of refused connects)."""
        def settled(future: asyncio.Future) -> None:
            if not future.cancelled() and future.exception() is not None:
                self.request_update().add_done_callback(lambda _: callback())
            else:
                callback()

        connecting.add_done_callback(settled)

    async def connection(self, node_id: int) -> BrokerConnection:
        """An open connection to ``node_id``; KafkaConnectionError if it cannot be opened."""
        conn = self.connection_nowait(node_id)
        if conn is not None:
            return conn
        return await asyncio.shield(self._connecting[node_id])

    def _start_connect(self, node_id: int) -> None:
        if self._closed:
            raise ClientClosedError("client is closed")
        future = self.loop.create_future()
        self._connecting[node_id] = future
        self.loop.create_task(self._connect(node_id, future))

    async def _connect(self, node_id: int, future: asyncio.Future) -> None:
        try:
            broker = self.metadata.brokers.get(node_id)
            if broker is None:
                raise KafkaConnectionError(f"broker {node_id} is not in the metadata")
            conn = BrokerConnection(broker.host, broker.port, node_id=node_id, client_id=self.client_id,
                                    request_timeout=self.request_timeout, sasl=self.sasl,
                                    ssl_context=self.ssl_context)
            await conn.connect(self.connect_timeout)
            if self._closed:
                conn.abort()
                raise ClientClosedError("client is closed")
            conn.on_close.append(self._forget)
            self._conns[node_id] = conn
            future.set_result(conn)
        except BaseException as e:  # noqa: BLE001 - handed to every waiter
            future.set_exception(e if isinstance(e, KafkaError) else KafkaConnectionError(repr(e)))
            future.exception()  # nobody may be waiting: mark it retrieved
        finally:
            self._connecting.pop(node_id, None)

    def _forget(self, conn: BrokerConnection) -> None:
        if self._conns.get(conn.node_id) is conn:
            del self._conns[conn.node_id]
        if self._bootstrap_conn is conn:
            self._bootstrap_conn = None

    async def any_connection(self) -> BrokerConnection:
        """A connection to some broker: the least busy open one, else a new one to a known
        broker, else to a bootstrap address."""
        open_conns = [c for c in self._conns.values() if not c.closed]
        if open_conns:
            return min(open_conns, key=lambda c: c.in_flight)
        nodes = list(self.metadata.brokers)
        random.shuffle(nodes)
        for node_id in nodes:
            try:
                return await self.connection(node_id)
            except KafkaConnectionError:
                continue
        return await self._bootstrap_connection()

    async def _bootstrap_connection(self) -> BrokerConnection:
        conn = self._bootstrap_conn
        if conn is not None and not conn.closed:
            return conn
        errors = []
        for host, port in self.bootstrap:
            conn = BrokerConnection(host, port, client_id=self.client_id, request_timeout=self.request_timeout,
                                    sasl=self.sasl,
                                    ssl_context=self.ssl_context)
            try:
                await conn.connect(self.connect_timeout)
            except KafkaError as e:
                if not e.retriable:  # a refused login (SASL): not a reachability problem
                    raise
                errors.append(str(e))
                continue
            conn.on_close.append(self._forget)
            self._bootstrap_conn = conn
            return conn
        raise KafkaConnectionError("no bootstrap server reachable: " + "; ".join(errors))

    # --- requests ------------------------------------------------------------------------
    async def send(self, node_id: int | None, api_key: int, build, *, timeout: float | None = None):
        """Send one request to ``node_id`` (None: any broker) and return the response body.

        ``build`` is the request body, or a callable taking the negotiated version and
        returning the body (for requests whose shape differs between versions).
        """
        if self._closed:
            raise ClientClosedError("client is closed")
        conn = await (self.any_connection() if node_id is None else self.connection(node_id))
        version = conn.api_version(api_key)
        body = build(version) if callable(build) else build
        return await conn.send(api_key, body, version=version, timeout=timeout)

    async def send_to_controller(self, api_key: int, build, *, timeout: float | None = None):
        """Send to the controller (NOT_CONTROLLER answers make ``retry`` refresh and resend)."""
        controller = self.metadata.controller_id
        if controller < 0 or controller not in self.metadata.brokers:
            await self.refresh([])
            controller = self.metadata.controller_id
        return await self.send(controller if controller >= 0 else None, api_key, build, timeout=timeout)

    def backoff(self, attempt: int) -> float:
        """Seconds to wait before retry number ``attempt`` (0-based): exponential, ±20%."""
        base = min(self.retry_backoff * (2**attempt), self.retry_backoff_max)
        return base * random.uniform(0.8, 1.2)

    async def retry(self, operation, deadline: float):
        """``await operation()`` until it succeeds, a non-retriable error, or ``deadline``
        (loop time) passes; then the last error is raised."""
        attempt = 0
        while True:
            try:
                return await operation()
            except KafkaError as e:
                if not e.retriable or self._closed:
                    raise
                delay = self.backoff(attempt)
                if self.loop.time() + delay >= deadline:
                    raise
                if stale_metadata(e):
                    self.request_update()
                attempt += 1
                await asyncio.sleep(delay)

    # --- metadata ------------------------------------------------------------------------
    def add_topics(self, topics) -> bool:
        """Register topics of interest; True when any is new (a refresh is then wanted)."""
        new = set(topics) - self.topics
        self.topics |= new
        return bool(new)

    async def refresh(self, topics=None, *, allow_auto_create: bool | None = None) -> ClusterMetadata:
        """Ask any broker for the metadata of ``topics`` (None: every topic; []: brokers only)
        and merge it into the snapshot."""
        if allow_auto_create is None:
            allow_auto_create = self.allow_auto_create_topics
        names = None if topics is None else sorted(set(topics))

        def build(version: int) -> MetadataRequest:
            wanted = None if names is None else [MetadataRequestTopic(name=n) for n in names]
            return MetadataRequest(topics=wanted, allow_auto_topic_creation=allow_auto_create)

        response = await self.send(None, ApiKey.METADATA, build)
        fresh = ClusterMetadata.from_response(response)
        self.metadata = self.metadata.merged(fresh, None if names is None else set(names))
        self.metadata_version += 1
        self._last_refresh = self.loop.time()
        for listener in list(self.metadata_listeners):
            listener(self.metadata)
        return self.metadata

    def request_update(self) -> asyncio.Future:
        """Ask for a refresh of the topics of interest; the task resolves with the snapshot.

        One refresh runs at a time; a request arriving during one schedules one more after
        it (the running one may have been sent before what made the caller ask).
        """
        if self._update is not None and not self._update.done():
            self._update_again = True
            return self._update
        if self._closed:
            done = self.loop.create_future()
            done.set_result(self.metadata)
            return done
        self._update = self.loop.create_task(self._run_updates())
        self._update.add_done_callback(_retrieve)
        return self._update

    async def _run_updates(self) -> ClusterMetadata:
        attempt = 0
        while True:
            self._update_again = False
            wait = self._last_refresh + self.retry_backoff - self.loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            try:
                snapshot = await self.refresh(self.topics or [], allow_auto_create=self.allow_auto_create_topics)
            except KafkaError as e:
                if self._closed or not e.retriable:
                    raise
                self._update_again = True
                await asyncio.sleep(self.backoff(attempt))
                attempt += 1
                continue
            if not self._update_again:
                return snapshot

    def maybe_update(self) -> None:
        """Refresh when the snapshot is older than ``metadata_max_age``."""
        if self.loop.time() - self._last_refresh > self.metadata_max_age:
            self.request_update()

    def stale_in(self, now: float) -> float | None:
        """Seconds until the snapshot is older than ``metadata_max_age`` (when `maybe_update`
        refreshes it); None when it is already, or was never refreshed."""
        left = self._last_refresh + self.metadata_max_age - now
        return left if left > 0 else None

    async def wait_for_topics(self, topics, deadline: float) -> ClusterMetadata:
        """Refresh until every topic in ``topics`` is in the snapshot. A non-retriable error
        for a topic (an invalid name, no authorization) is raised at once; a topic still
        missing at ``deadline`` (loop time) raises KafkaTimeoutError."""
        topics = set(topics)
        attempt = 0
        while True:
            meta = self.metadata
            missing = [t for t in topics if not meta.partition_count(t)]
            if not missing:
                return meta
            for t in missing:
                code = meta.errors.get(t)
                if code is not None and not BrokerError(code).retriable:
                    raise BrokerError(code, subject=t)
            if self.loop.time() >= deadline:
                why = {t: ErrorCode(meta.errors[t]).name for t in missing if t in meta.errors}
                raise KafkaTimeoutError(f"topics {sorted(missing)} not in the metadata in time {why or ''}")
            if attempt:
                await asyncio.sleep(min(self.backoff(attempt - 1), max(deadline - self.loop.time(), 0)))
            attempt += 1
            try:
                await self.refresh(topics | self.topics)
            except KafkaError as e:
                if not e.retriable:
                    raise

    # --- closing -------------------------------------------------------------------------
    async def close(self) -> None:
        self._closed = True
        if self._update is not None and not self._update.done():
            self._update.cancel()
            await asyncio.gather(self._update, return_exceptions=True)
        if self._connecting:
            await asyncio.gather(*self._connecting.values(), return_exceptions=True)
        conns = list(self._conns.values())
        if self._bootstrap_conn is not None:
            conns.append(self._bootstrap_conn)
        self._conns.clear()
        self._bootstrap_conn = None
        await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)
