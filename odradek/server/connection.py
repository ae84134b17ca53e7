"""One client connection: frames in, responses out, in order.

Requests on a connection are answered in the order they arrived (Kafka's guarantee), but a
request does not wait for earlier responses to be written: every complete frame of a read is
decoded and dispatched at once, and a handler that has to wait (a long-poll fetch, an
acks=all produce) returns an awaitable. Responses are queued in arrival order and written
once per wakeup, everything ready at the head of the queue in one ``writelines``: the
responses of all the reads the loop made on this socket (it reads on while reads fill the
buffer given, e.g. several pipelined 1 MiB produce requests) and of the waiting handlers that
finished meanwhile (a group-commit fsync answers every produce it covered). One send per
wakeup, not per response: LIMITS.md measures that at 4-5x the throughput. The write happens
right after the last read of the wakeup (one that did not fill its buffer: the loop waits
after it); after a read that filled its buffer, and when a waiting handler finishes, it is
deferred to the end of the loop's iteration (``call_soon``). (Deferring every time cost a
produce of 100-byte records ~4% of the broker's CPU: a handle and an idle callback per
request.)

Record batches in fetch responses are file regions of the log (``server/region_writer.py``):
once nothing is queued ahead of one in the transport it goes out with ``os.sendfile``
(zero-copy), as far as the socket takes it; the rest follows as the socket drains, and every
later response waits behind it. Under TLS, which encrypts in user space, a region is read
with one ``pread`` and written through the TLS transport instead.

Security: the listener's protocol, the peer's principal, TLS client certificates and SASL
are the gate's (``server/connection_security.py``), which sees every frame first.
Backpressure: reading pauses while more than ``queued.max.requests`` responses are pending or
while the transport's write buffer is above its high-water mark (a slow reader), so one
client can neither grow the broker's memory without bound nor slow other connections down.

Memory for requests: the frame parser allocates as bytes arrive, never what a size prefix
declares (``protocol/framing.py``). Every request's declared bytes are reserved in the
broker's ``MemoryPool`` (``queued.max.request.bytes``, ``server/memory_pool.py``) when its
prefix is read with the pool under its limit, and released once it is handled (its response
computed, or its handler's future done); while the pool is at its limit, a connection between
requests, or with a request begun but not yet reserved, stops reading until a release brings
the pool back under it. Nothing fails for want of memory: requests wait. A half-received
request keeps its reservation until ``connections.max.idle.ms`` closes its silent connection
(``server/background.py``), which releases it.

Bad input: an oversized or negative frame size, an unknown API key, an unsupported version
(other than of ApiVersions, which gets UNSUPPORTED_VERSION in the v0 layout) or a body that
does not decode closes this connection after one log line (at most one per kind of reason
every few seconds: ``LogRateLimiter``); nothing else is disturbed.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import time
from types import CoroutineType

from odradek.protocol import codec
from odradek.protocol.api_keys import ApiKey, is_supported
from odradek.protocol.framing import FrameParser, FrameTooLargeError
from odradek.protocol.primitives import DecodeError
from odradek.server.failed_authentication import CloseAfterResponse
from odradek.server.connection_security import close_gate, frame_too_large, intercepted, open_gate, tls_established
from odradek.server.handlers import api_versions
from odradek.server.log_limiter import message_key
from odradek.server.memory_pool import MemoryPool
from odradek.server.metrics.request_metrics import request_metrics_of
from odradek.server.region_writer import write_parts
from odradek.server.request import CLOSE_CONNECTION, NO_RESPONSE, RequestContext
from odradek.server.throttled_channel import ThrottledChannel

log = logging.getLogger("odradek.server")

# Responses of one read are written together, but in chunks of at most this many bytes, so
# that a slow reader's pause (pause_writing) takes effect between chunks.
WRITE_CHUNK = 1 << 20
# Requests of up to this size are received into a buffer the connection keeps and reuses
# (``FrameParser``'s ``reuse_limit``): producers' requests are at most ``max.request.size``,
# 1 MiB by default (librdkafka: ~1 MB), so those all qualify; bigger ones get a buffer each.
# The cost is at most this much memory held per connection that sent a large request.
FRAME_REUSE_LIMIT = 2 << 20
# Connection ids are unique within the process (``Connection.connection_id``).
_CONNECTION_INDEX = itertools.count()


class Connection(asyncio.BufferedProtocol):
    """asyncio protocol for one client; ``dispatch(ctx, body)`` comes from the broker."""

    def __init__(self, broker, listener_name: str) -> None:
        self.broker = broker
        self.listener_name = listener_name
        # Who this connection is to the broker's close listeners (``connection_lost``), as
        # Kafka's connection id: share sessions record the connection that owns them.
        self.connection_id = f"{listener_name}-{next(_CONNECTION_INDEX)}"
        self.client_host = "?"  # the peer's address, which handlers authorize ``principal`` from
        self._sendfile = True  # not under TLS: see server/region_writer.py
        self.parser = FrameParser(broker.config["socket.request.max.bytes"], reuse_limit=FRAME_REUSE_LIMIT)
        # security_protocol, principal, security, sasl (server/connection_security.py)
        open_gate(self, broker, listener_name)
        self.max_queued = broker.config["queued.max.requests"]
        self.memory: MemoryPool = broker.memory_pool
        self._reserved = 0  # the parser's ``declared`` bytes, reserved in ``memory``
        self._released = 0  # of those, released (handled requests)
        self._holder: asyncio.Future | None = None  # the last frame's handler, if it waits
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.pending: collections.deque = collections.deque()  # [ctx, result|future]
        self.last_active = time.monotonic()
        self.closed = False
        self._reading_paused = False
        self._writing_paused = False
        self._process_scheduled = False
        self._flush_scheduled = False
        self._stalled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._fast_produce = broker.produce_fast_path.handle
        self._counted_address: str | None = None  # admitted by the broker's ConnectionQuotas
        self._throttled = False  # muted over a client quota (throttle, KIP-219)
        self._requests = request_metrics_of(broker)  # counts and times per API (server/metrics/)
        self.throttled_channel: ThrottledChannel | None = None
        self._region_sender = None  # a RegionSender waiting for the socket (region_writer.py)
        self._after_region: list = []  # the parts to write after it

    # --- asyncio callbacks ----------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        self._loop = asyncio.get_running_loop()
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        address = peer[0] if peer else "?"
        self.client_host = address
        if not self.broker.connection_quotas.admit(address):
            self.closed = True
            transport.close()
            return
        self._counted_address = address
        self.broker.connections.add(self)
        if tls_established(self, transport):
            self._sendfile = False

    def connection_lost(self, exc) -> None:
        self.closed = True
        self.broker.connections.discard(self)
        if self._counted_address is not None:
            self.broker.connection_quotas.release(self._counted_address)
            self._counted_address = None
        # Whatever this connection reserved and did not release: requests half received,
        # waiting in the parser, or with handlers still running (their releases are ignored
        # once closed).
        self.memory.forget(self)
        close_gate(self)
        self.memory.release(self._reserved - self._released)
        self._released = self._reserved
        for _, result in self.pending:
            if isinstance(result, asyncio.Future):
                result.cancel()
        self.pending.clear()
        self._stop_region()
        self._notify_close_listeners()

    def _notify_close_listeners(self) -> None:
        """Tell the broker's ``connection_close_listeners`` (callables of the connection id,
        e.g. the share sessions' owner) that this connection is gone; one failing does not
        keep the others from hearing it."""
        for listener in getattr(self.broker, "connection_close_listeners", ()):
            try:
                listener(self.connection_id)
            except Exception:
                log.exception("connection close listener failed for %s", self.peer)

    @property
    def writing_paused(self) -> bool:
        """The transport's buffer is above its high-water mark, or a region waits for the
        socket to take more (``server/region_writer.py``): the peer is not reading."""
        return self._writing_paused or self._region_sender is not None

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._flush()

    # The transport receives straight into the parser's buffers (BufferedProtocol): a large
    # produce request lands in its own frame buffer with no copy in user space.
    def get_buffer(self, sizehint: int) -> memoryview:
        return self.parser.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        self.last_active = time.monotonic()
        parser = self.parser
        ready = parser.buffer_updated(nbytes)
        if parser.declared != self._reserved:  # new size prefixes
            self._reserve()
        # A read that completed no frame (most reads of a big request) has nothing to
        # handle and nothing new to write: no _process, no scheduled flush.
        if ready:
            self._process()
        if self.memory.exhausted or self._reserved != parser.declared:
            self._update_reading()

    def eof_received(self) -> bool:
        return False  # close our side too

    def _process(self) -> None:
        """Handle buffered frames while fewer than ``queued.max.requests`` are pending."""
        self._process_scheduled = False
        self._stalled = False
        try:
            while not self.closed:
                if self._throttled:
                    break  # frames wait in the parser until the throttle time has passed
                if len(self.pending) >= self.max_queued:
                    self._stalled = True  # frames may wait in the parser; see _flush
                    break
                frame = self.parser.next_frame()
                if frame is None:
                    break
                nbytes = 4 + len(frame)
                started = time.perf_counter()
                self._handle_frame(frame)
                self._requests.record(frame, started, self._holder)
                del frame
                self._release_when_handled(nbytes)
        except FrameTooLargeError as e:
            e.__traceback__ = None  # the parser keeps ``e``: its traceback would hold us in a cycle
            if not frame_too_large(self, e):
                self.close(f"{e} (socket.request.max.bytes)")
            return
        if self.parser.last_read_filled:
            self._schedule_flush()  # more reads to come in this iteration: write after them
        else:
            self._flush()

    # --- requests -------------------------------------------------------------------------
    def _handle_frame(self, frame: bytearray | memoryview) -> None:
        if intercepted(self, frame):
            return  # a bare SASL token, or a request refused before authentication
        if len(frame) > 8 and frame[1] == 0 and frame[0] == 0:  # Produce (api key 0)
            try:
                response = self._fast_produce(frame, self)
            except Exception as e:
                self.broker.log_limiter.error(log, ("handler", "produce", type(e)),
                                              "produce fast path failed; closing %s", self.peer, exc_info=True)
                self.close("handler error")
                return
            if response is not None:
                self._queue(None, response)
                return
        try:
            header, pos = codec.decode_request_header(frame)
        except codec.UnsupportedVersionError as e:
            if e.header.request_api_key == ApiKey.API_VERSIONS:
                self._queue(RequestContext.for_header(self, e.header, 0), api_versions.unsupported())
                return
            self.close(f"unsupported request {e}")
            return
        except DecodeError as e:
            self.close(f"bad request header: {e}")
            return
        if not is_supported(header.request_api_key, header.request_api_version):
            if header.request_api_key == ApiKey.API_VERSIONS:
                self._queue(RequestContext.for_header(self, header, 0), api_versions.unsupported())
            else:
                self.close(f"unsupported API {header.request_api_key} v{header.request_api_version}")
            return
        try:
            body = codec.decode_request_body(header, frame, pos)
        except DecodeError as e:
            self.close(f"malformed {ApiKey(header.request_api_key).name} v{header.request_api_version}: {e}")
            return
        version = header.request_api_version
        ctx = RequestContext(self, header.request_api_key, version, header.correlation_id,
                             header.client_id, version)
        try:
            result = self.broker.dispatch(ctx, body)
        except Exception as e:
            self.broker.log_limiter.error(log, ("handler", ctx.api_name, type(e)),
                                          "handler for %s failed; closing %s", ctx.api_name, self.peer, exc_info=True)
            self.close("handler error")
            return
        if result is NO_RESPONSE:
            return
        # Handlers that wait are ``async def``s. (asyncio.iscoroutine would also accept other
        # awaitables, at the price of an ABC check in Python for every plain response.)
        if type(result) is CoroutineType:
            result = asyncio.ensure_future(result)
            result.add_done_callback(self._on_done)
            self._holder = result  # it may keep the request's bytes until it is done
            self.broker.track(result)
        self._queue(ctx, result)

    def _release_when_handled(self, nbytes: int) -> None:
        """Give the bytes of the request just handled back to the pool: now, or when its
        handler's future is done."""
        holder, self._holder = self._holder, None
        if holder is None:
            self._release(nbytes)
        else:
            holder.add_done_callback(lambda _, n=nbytes: self._release(n))

    def _release(self, nbytes: int) -> None:
        if not self.closed:  # once closed, connection_lost released everything
            self._released += nbytes
            self.memory.release(nbytes)

    def _reserve(self) -> None:
        """Reserve the bytes the parser's size prefixes declared: complete frames at once
        (they are in memory and handled next), the frame in progress only while the pool is
        under its limit (it is then admitted: it reads on to its end whatever the pool does;
        else the connection stops reading, holding only what it received, until a release)."""
        parser = self.parser
        if parser.completed > self._reserved:
            self.memory.reserve(parser.completed - self._reserved)
            self._reserved = parser.completed
        if self._reserved < parser.declared and not self.memory.exhausted:
            self.memory.reserve(parser.declared - self._reserved)
            self._reserved = parser.declared

    def resume_for_memory(self) -> None:
        """The pool is back under its limit (``MemoryPool.release``)."""
        if not self.closed:
            self._update_reading()

    def _queue(self, ctx: RequestContext, result) -> None:
        self.pending.append((ctx, result))
        if len(self.pending) >= self.max_queued:
            self._update_reading()

    def _on_done(self, future: asyncio.Future) -> None:
        if not self.closed:
            self._schedule_flush()

    # --- responses ------------------------------------------------------------------------
    def _schedule_flush(self) -> None:
        """Write what is ready at the end of this loop iteration (once, however many reads
        and finished handlers asked for it)."""
        if not self._flush_scheduled and not self.closed:
            self._flush_scheduled = True
            self._loop.call_soon(self._scheduled_flush)

    def _scheduled_flush(self) -> None:
        self._flush_scheduled = False
        if not self.closed:
            self._flush()

    def _flush(self) -> None:
        """Write the responses that are ready at the head of the queue.

        Writing stops while the transport is paused (its buffer is above the high-water
        mark: a slow reader), so memory per connection stays bounded by that buffer plus
        ``queued.max.requests`` unencoded responses; ``resume_writing`` continues here.
        """
        parts: list = []
        pending_bytes = 0
        plain = True  # parts holds no file region
        pending = self.pending
        while pending and not self.closed and not self._writing_paused and self._region_sender is None:
            ctx, result = pending[0]
            if isinstance(result, asyncio.Future):
                if not result.done():
                    break
                if result.cancelled() or result.exception() is not None:
                    exc = None if result.cancelled() else result.exception()
                    self.broker.log_limiter.error(log, ("handler", ctx.api_name, type(exc)),
                                                  "handler for %s failed: %r; closing %s", ctx.api_name, exc, self.peer)
                    self.close("handler error")
                    return
                result = result.result()
                if type(result) is CloseAfterResponse:  # a failed authentication, after its delay
                    parts.append(codec.encode_response_frame(ctx.api_key, ctx.response_version,
                                                             ctx.correlation_id, result.response))
                    self._write(parts, plain)
                    self.close(result.reason, logging.DEBUG)
                    return
            pending.popleft()
            if type(result) is bytes:  # a frame the produce fast path encoded (ctx is None)
                parts.append(result)
                pending_bytes += len(result)
            elif result is NO_RESPONSE:
                continue
            elif result is CLOSE_CONNECTION:
                self._write(parts, plain)
                self.close(f"{ctx.api_name} with acks=0 failed")
                return
            else:
                try:
                    buf = codec.encode_response_frame(ctx.api_key, ctx.response_version, ctx.correlation_id, result)
                except Exception as e:  # a handler's bug: one rate-limited line, this connection only
                    self.broker.log_limiter.error(log, ("encode", ctx.api_name, type(e)),
                                                  "%s v%d response could not be encoded; closing %s", ctx.api_name,
                                                  ctx.response_version, self.peer, exc_info=True)
                    self._write(parts, plain)
                    self.close("response encoding error")
                    return
                if buf.regions:
                    parts.extend(buf.parts())
                    pending_bytes += buf.total_size()
                    plain = False
                else:
                    parts.append(buf)
                    pending_bytes += len(buf)
            if pending_bytes >= WRITE_CHUNK:
                self._write(parts, plain)
                parts, pending_bytes, plain = [], 0, True
        if parts:
            self._write(parts, plain)
        if (self._stalled and len(self.pending) < self.max_queued and not self.closed
                and not self._process_scheduled):
            # Frames left unhandled while the queue was full: take them up again (later in
            # this loop iteration, not recursively).
            self._process_scheduled = True
            asyncio.get_running_loop().call_soon(self._process)
        if self._reading_paused:  # (only the queue's shrinking is new here)
            self._update_reading()

    def _write(self, parts: list, plain: bool = False) -> None:
        """Write bytes and file regions in order; regions go zero-copy where possible.
        ``plain``: the caller knows ``parts`` holds bytes-like objects only. While a region
        waits for the socket (``server/region_writer.py``), everything after it waits too."""
        if self.transport is None or self.closed:
            return
        if self._region_sender is not None:
            self._after_region.extend(parts)
            return
        if plain:
            self.transport.writelines(parts)
            self.last_active = time.monotonic()
            return
        sender, rest = write_parts(self, parts, self._sendfile)
        if sender is not None:
            self._region_sender, self._after_region = sender, rest
        self.last_active = time.monotonic()

    def _region_sent(self) -> None:
        """The region that waited for the socket is sent: write what queued behind it, then
        whatever became ready meanwhile."""
        self._region_sender = None
        rest, self._after_region = self._after_region, []
        self._write(rest)
        if self._region_sender is None:
            self._flush()

    def _update_reading(self) -> None:
        if self.transport is None or self.closed:
            return
        # For memory, a connection waits while it is between requests or its request in
        # progress is not admitted (reserved) yet; one admitted reads on to its end:
        # stopping it could leave every reader waiting on the others.
        self._reserve()
        memory_wait = self._reserved != self.parser.declared or (self.memory.exhausted
                                                                 and not self.parser.in_frame)
        if memory_wait:
            self.memory.wait(self)
        want_pause = (self._writing_paused or len(self.pending) >= self.max_queued or memory_wait
                      or self._throttled)
        if want_pause and not self._reading_paused:
            self.transport.pause_reading()
            self._reading_paused = True
        elif not want_pause and self._reading_paused:
            self._reading_paused = False
            self.transport.resume_reading()

    def throttle(self, ms: int) -> None:
        """Mute for ``ms`` ms, or until a later end (a client over its quota; see
        ``server/throttled_channel.py``). Responses still go out."""
        if not self.closed and self._loop is not None:
            if self.throttled_channel is None:
                self.throttled_channel = ThrottledChannel(self, self._loop)
            self.throttled_channel.throttle(ms)

    def mute(self, muted: bool) -> None:
        """Stop (True) or resume reading and handling requests (``ThrottledChannel``)."""
        self._throttled = muted
        if not self.closed:
            self._update_reading()
            if not muted:
                self._process()

    def close(self, reason: str | None = None, level: int = logging.WARNING) -> None:
        """Close, saying why at ``level`` (routine closes, such as idle ones, at DEBUG as in
        Kafka's ``Selector``)."""
        if self.closed:
            return
        if reason:  # one line per kind of reason and interval: a flood of bad frames is one kind
            self.broker.log_limiter.log(log, level, ("close", message_key(reason)),
                                        "closing connection from %s: %s", self.peer, reason)
        self.closed = True
        self._stop_region()
        if self.transport is not None:
            self.transport.close()

    def _stop_region(self) -> None:
        sender, self._region_sender = self._region_sender, None
        self._after_region = []
        if sender is not None:
            sender.stop()

