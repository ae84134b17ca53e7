"""One asyncio connection to one broker: pipelined requests matched by correlation id.

Wire: each request is ``int32 size`` + request header + body (``protocol.codec``), each
response ``int32 size`` + response header (starting with the request's correlation id) + body.
A Kafka broker answers the requests of one connection in the order they came, but responses
are matched by correlation id anyway, so a broker that reorders is still read correctly.

Lifecycle: ``connect()`` opens the socket (with TLS when given an ``ssl_context``: the
handshake, and the broker certificate's check, happen before it returns) and negotiates versions with ApiVersions
(then authenticates with SASL when given ``sasl``, ``client/sasl_authenticator.py``): for each
API the connection uses the highest version in both the broker's range and the client's own
(``CLIENT_VERSIONS``). ``send()`` writes a request at once and returns a future of the decoded
response body; any number of requests may be in flight (callers bound it). Every request has a
deadline: when one passes, the connection is closed, because the broker may still answer it
and the stream can no longer be trusted to line up. A broken or closed connection fails every
pending request with ``KafkaConnectionError`` (retriable); ``close()`` fails them with
``ClientClosedError``. After a close the object is spent: callers open a new connection.

Contracts: the decoded body's ``records`` fields are memoryviews into the response frame, which
the connection never reuses, so they stay valid as long as the caller holds them.
"""

from __future__ import annotations

import asyncio
import ssl
import struct

from odradek.client.sasl_authenticator import SaslClientConfig, authenticate
from odradek.client.errors import (
    ClientClosedError,
    KafkaConnectionError,
    KafkaTimeoutError,
    SslAuthenticationError,
    UnsupportedVersionError,
)
from odradek.protocol import codec
from odradek.protocol.features import CLIENT_SOFTWARE_NAME
from odradek.protocol.framing import (
    DEFAULT_MAX_FRAME_SIZE,
    FrameParser,
    FrameTooLargeError,
)
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated import request_header as _request_header
from odradek.protocol.generated.api_versions_request import ApiVersionsRequest
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.request_header import RequestHeader
from odradek.protocol.primitives import DecodeError, EncodeBuffer

CLIENT_SOFTWARE_VERSION = "0.1"

# The versions of each API this client can build requests for and read answers of. Lower
# bounds are where the client's semantics start: Produce v3 / Fetch v4 carry v2 batches,
# ListOffsets v1 answers one offset per partition, Metadata v1 can ask for "all topics".
CLIENT_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (3, 11),
    ApiKey.FETCH: (4, 17),
    ApiKey.LIST_OFFSETS: (1, 10),
    ApiKey.METADATA: (1, 12),
    ApiKey.OFFSET_COMMIT: (2, 9),
    ApiKey.OFFSET_FETCH: (1, 9),
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    # the consumer group protocol (KIP-848): client/consumer_group_membership.py; v1 has regexes
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 0),
    # share groups (KIP-932): client/share_consumer.py and client/admin_share_groups.py
    ApiKey.SHARE_GROUP_HEARTBEAT: (1, 1),
    ApiKey.SHARE_GROUP_DESCRIBE: (1, 1),
    ApiKey.SHARE_FETCH: (1, 2),
    ApiKey.SHARE_ACKNOWLEDGE: (1, 2),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.CREATE_TOPICS: (0, 7),
    ApiKey.DELETE_TOPICS: (0, 6),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    ApiKey.DESCRIBE_CONFIGS: (0, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.DESCRIBE_LOG_DIRS: (0, 4),
    # SASL (client/sasl_authenticator.py) and SCRAM credentials (client/admin_scram.py)
    ApiKey.SASL_HANDSHAKE: (1, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    # ACLs (client/admin_acls.py); v1 brought pattern types (KIP-290)
    ApiKey.DESCRIBE_ACLS: (1, 3),
    ApiKey.CREATE_ACLS: (1, 3),
    ApiKey.DELETE_ACLS: (1, 3),
    # client quotas (client/admin_quotas.py); v1 is flexible, the same fields
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    # transactions; AddPartitionsToTxn v4+ is the brokers' batched form, EndTxn v5 bumps the
    # epoch on every transaction (KIP-890 part 2), which this client does not do
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 4),
    ApiKey.TXN_OFFSET_COMMIT: (0, 4),
    ApiKey.WRITE_TXN_MARKERS: (0, 1),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    # inter-broker: the controller's requests to brokers, and brokers' requests to it
    ApiKey.LEADER_AND_ISR: (0, 7),
    ApiKey.STOP_REPLICA: (0, 4),
    ApiKey.UPDATE_METADATA: (0, 8),
    ApiKey.CONTROLLED_SHUTDOWN: (0, 3),
    ApiKey.ALTER_PARTITION: (0, 3),
}

_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")
_MAX_CORRELATION = 2**31 - 1


def negotiate(client: dict[int, tuple[int, int]], broker: dict[int, tuple[int, int]]) -> dict[int, int]:
    """For each API both sides know: the highest version inside both ranges (if any)."""
    chosen = {}
    for key, (cmin, cmax) in client.items():
        theirs = broker.get(key)
        if theirs is None:
            continue
        low, high = max(cmin, theirs[0]), min(cmax, theirs[1])
        if low <= high:
            chosen[key] = high
    return chosen


class BrokerConnection(asyncio.Protocol):
    """A connection to ``host:port`` (the broker ``node_id``, -1 for a bootstrap address)."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        node_id: int = -1,
        client_id: str | None = "odradek",
        request_timeout: float = 30.0,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        ssl_context=None,
        sasl: SaslClientConfig | None = None,
    ) -> None:
        self.host, self.port, self.node_id = host, port, node_id
        self.ssl_context = ssl_context  # an ssl.SSLContext: TLS (client/ssl_factory.py); None: plaintext
        self.sasl = sasl  # SASL_PLAINTEXT / SASL_SSL: authenticate after ApiVersions
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.versions: dict[int, int] = {}
        self.broker_versions: dict[int, tuple[int, int]] = {}
        self.features: dict[str, tuple[int, int]] = {}  # ApiVersions' supported_features
        self._parser = FrameParser(max_frame_size)
        # correlation id -> [future, api_key, version, deadline]; insertion ordered.
        self._pending: dict[int, list] = {}
        self._next_correlation = 0
        self._transport: asyncio.Transport | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._close_reason: Exception | None = None
        self._lost: asyncio.Future | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = float("inf")
        self.on_close: list = []  # callables(conn) run once when the connection ends

    def __repr__(self) -> str:
        return f"BrokerConnection(node={self.node_id}, {self.host}:{self.port})"

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    # --- opening -------------------------------------------------------------------------
    async def connect(self, timeout: float = 10.0) -> BrokerConnection:
        """Open the socket and negotiate API versions; KafkaConnectionError on failure."""
        self._loop = loop = asyncio.get_running_loop()
        self._lost = loop.create_future()
        try:
            await asyncio.wait_for(loop.create_connection(
                lambda: self, self.host, self.port, ssl=self.ssl_context,
                server_hostname=self.host if self.ssl_context is not None else None), timeout)
        except ssl.SSLError as e:  # trying again will not make the certificate trusted
            self._closed = True
            raise SslAuthenticationError(f"SSL handshake with {self.host}:{self.port} failed: {e}") from None
        except (TimeoutError, OSError) as e:
            self._closed = True
            raise KafkaConnectionError(f"cannot connect to {self.host}:{self.port}: {e!r}") from None
        try:
            await self._negotiate(timeout)
            if self.sasl is not None:
                await authenticate(self, self.sasl, timeout)
        except BaseException:
            self.abort()
            raise
        return self

    async def _negotiate(self, timeout: float) -> None:
        version = CLIENT_VERSIONS[ApiKey.API_VERSIONS][1]
        for _ in range(2):
            request = ApiVersionsRequest(CLIENT_SOFTWARE_NAME, CLIENT_SOFTWARE_VERSION)
            response = await self.send(ApiKey.API_VERSIONS, request, version=version, timeout=timeout)
            ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
            if response.error_code == ErrorCode.UNSUPPORTED_VERSION and ApiKey.API_VERSIONS in ranges:
                # The broker answered in v0 with its own range: ask again in a version it has.
                version = min(version, ranges[ApiKey.API_VERSIONS][1])
                continue
            if response.error_code != ErrorCode.NONE:
                raise KafkaConnectionError(f"ApiVersions failed: {ErrorCode(response.error_code).name}")
            self.broker_versions = ranges
            self.versions = negotiate(CLIENT_VERSIONS, ranges)
            self.features = {f.name: (f.min_version, f.max_version) for f in response.supported_features}
            return
        raise UnsupportedVersionError("broker refused every ApiVersions version")

    def api_version(self, api_key: int) -> int:
        """The negotiated version of ``api_key``; UnsupportedVersionError if there is none."""
        try:
            return self.versions[api_key]
        except KeyError:
            raise UnsupportedVersionError(
                f"broker {self.node_id} supports no version of API {api_key} this client knows "
                f"(broker: {self.broker_versions.get(api_key)}, client: {CLIENT_VERSIONS.get(api_key)})"
            ) from None

    def supports(self, api_key: int, min_version: int = 0) -> bool:
        return self.versions.get(api_key, -1) >= min_version

    # --- asyncio.Protocol ----------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self._transport = transport

    def data_received(self, data) -> None:
        parser = self._parser
        try:
            parser.feed(data)
            while (frame := parser.next_frame()) is not None:
                self._on_frame(frame)
        except FrameTooLargeError as e:
            self._shutdown(KafkaConnectionError(f"{self}: {e}"))

    def connection_lost(self, exc) -> None:
        self._shutdown(KafkaConnectionError(f"{self} lost: {exc!r}" if exc else f"{self} closed by broker"))
        if self._lost is not None and not self._lost.done():
            self._lost.set_result(None)

    def eof_received(self):
        return False  # close the transport: the broker will not answer any more

    # --- requests ------------------------------------------------------------------------
    def send(self, api_key: int, body, *, version: int | None = None, timeout: float | None = None,
             expect_response: bool = True) -> asyncio.Future:
        """Write one request; return a future of the decoded response body.

        ``expect_response=False`` (Produce with acks=0) resolves the future with None once
        the bytes are handed to the transport. Raises nothing: failures go into the future.
        ``body`` may also be the body already encoded at ``version`` (``bytes``: the
        controller's LeaderAndIsr and UpdateMetadata, encoded once for all brokers).
        """
        loop = self._loop
        future = loop.create_future()
        if self._closed:
            future.set_exception(self._close_reason or KafkaConnectionError(f"{self} is closed"))
            return future
        try:
            if version is None:
                version = self.api_version(api_key)
            correlation_id = self._next_correlation
            self._next_correlation = 0 if correlation_id == _MAX_CORRELATION else correlation_id + 1
            header = RequestHeader(api_key, version, correlation_id, self.client_id)
            out = EncodeBuffer(b"\0\0\0\0")
            _request_header.WRITERS[codec.request_header_version(api_key, version)](header, out)
            if isinstance(body, bytes):
                out += body
            else:
                codec.request_module(api_key).WRITERS[version](body, out)
        except Exception as e:  # noqa: BLE001 - a bad body is the caller's error, in the future
            future.set_exception(e if not isinstance(e, (ValueError, TypeError, OverflowError))
                                 else ValueError(f"cannot encode API {api_key} v{version}: {e}"))
            return future
        _SIZE.pack_into(out, 0, out.total_size() - 4)
        if expect_response:
            deadline = loop.time() + (self.request_timeout if timeout is None else timeout)
            self._pending[correlation_id] = [future, api_key, version, deadline]
            if deadline < self._timer_at:
                self._arm_timer(deadline)
        transport = self._transport
        if out.regions:
            for part in out.parts():
                transport.write(part)
        else:
            transport.write(out)
        if not expect_response:
            future.set_result(None)
        return future

    def _on_frame(self, frame: bytearray) -> None:
        if len(frame) < 4:
            self._shutdown(KafkaConnectionError(f"{self}: response shorter than its header"))
            return
        (correlation_id,) = _CORRELATION.unpack_from(frame, 0)
        entry = self._pending.pop(correlation_id, None)
        if entry is None:
            self._shutdown(KafkaConnectionError(f"{self}: response to unknown request {correlation_id}"))
            return
        future, api_key, version, _ = entry
        try:
            body = self._decode(api_key, version, frame)
        except DecodeError as e:
            if not future.done():
                future.set_exception(KafkaConnectionError(f"{self}: undecodable response: {e}"))
            self._shutdown(KafkaConnectionError(f"{self}: stream out of step after a bad response"))
            return
        if not future.done():
            future.set_result(body)

    @staticmethod
    def _decode(api_key: int, version: int, frame):
        try:
            return codec.decode_response(api_key, version, frame)[1]
        except DecodeError:
            if api_key != ApiKey.API_VERSIONS or version == 0:
                raise
            # A broker that does not know our ApiVersions version answers in v0.
            return codec.decode_response(api_key, 0, frame)[1]

    # --- timeouts ------------------------------------------------------------------------
    def _arm_timer(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = when
        self._timer = self._loop.call_at(when, self._check_timeouts)

    def _check_timeouts(self) -> None:
        self._timer, self._timer_at = None, float("inf")
        now = self._loop.time()
        expired = [e for e in self._pending.values() if e[3] <= now]
        if expired:
            for future, api_key, version, _ in expired:
                if not future.done():
                    future.set_exception(KafkaTimeoutError(
                        f"{self}: no response to API {api_key} v{version} within the request timeout"))
            self._shutdown(KafkaConnectionError(f"{self} closed after a request timed out"))
        elif self._pending:
            self._arm_timer(min(e[3] for e in self._pending.values()))

    # --- closing -------------------------------------------------------------------------
    def _shutdown(self, reason: Exception) -> None:
        """Fail every pending request with ``reason`` and close the transport (idempotent)."""
        if not self._closed:
            self._closed = True
            self._close_reason = reason
        pending, self._pending = self._pending, {}
        for future, *_ in pending.values():
            if not future.done():
                future.set_exception(reason)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()
        callbacks, self.on_close = self.on_close, []
        for callback in callbacks:
            callback(self)

    def abort(self) -> None:
        self._shutdown(ClientClosedError(f"{self} closed"))

    async def close(self) -> None:
        """Fail pending requests with ClientClosedError, close, and wait until closed."""
        self._shutdown(ClientClosedError(f"{self} closed"))
        if self._lost is not None and self._transport is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._lost), 5)
            except TimeoutError:
                self._transport.abort()
