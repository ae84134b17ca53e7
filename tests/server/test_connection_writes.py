"""Connection: responses of one loop iteration leave in one write, in request order."""

from __future__ import annotations

import asyncio
import struct
from types import SimpleNamespace

from odradek.protocol import codec
from odradek.protocol.generated.api_versions_request import ApiVersionsRequest
from odradek.protocol.generated.api_versions_response import ApiVersionsResponse
from odradek.server.connection import Connection
from odradek.server.log_limiter import LogRateLimiter
from odradek.server.memory_pool import MemoryPool


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 1) if name == "peername" else default

    def writelines(self, data) -> None:
        self.writes.append(b"".join(bytes(d) for d in data))

    def write(self, data) -> None:
        self.writes.append(bytes(data))

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


class FakeBroker:
    """Answers every request with an ApiVersions response carrying its correlation id as
    the error code, after ``delay`` loop turns for the ids in ``slow``."""

    def __init__(self, slow=()) -> None:
        self.config = {"socket.request.max.bytes": 1 << 20, "queued.max.requests": 500}
        self.connections: set = set()
        self.memory_pool = MemoryPool(-1)
        self.slow = set(slow)
        self.tasks: set = set()
        # Only ApiVersions comes here; the produce fast path would decline anything else.
        self.produce_fast_path = SimpleNamespace(handle=lambda frame, connection: None)
        self.connection_quotas = SimpleNamespace(admit=lambda address: True, release=lambda address: None)
        self.log_limiter = LogRateLimiter()

    def dispatch(self, ctx, body):
        response = ApiVersionsResponse(error_code=ctx.correlation_id, api_keys=[])
        if ctx.correlation_id in self.slow:
            async def later():
                await asyncio.sleep(0.01)
                return response
            return later()
        return response

    def track(self, task) -> None:
        self.tasks.add(task)


def request_frame(correlation_id: int, client_id: str | None = None) -> bytes:
    header = codec.RequestHeader(18, 0, correlation_id, client_id)
    payload = codec.encode_request(header, ApiVersionsRequest())
    return struct.pack(">i", len(payload)) + payload


def response_ids(data: bytes) -> list[int]:
    """Correlation ids of the size-prefixed ApiVersions v0 responses in ``data``."""
    ids, pos = [], 0
    while pos < len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        _, body = codec.decode_response(18, 0, data[pos + 4 : pos + 4 + size])
        ids.append(body.error_code)
        pos += 4 + size
    return ids


def receive(conn: Connection, data: bytes) -> None:
    """Deliver ``data`` as the transport would: into ``get_buffer``, then ``buffer_updated``."""
    view = memoryview(data)
    while view:
        buf = conn.get_buffer(-1)
        n = min(len(buf), len(view))
        buf[:n] = view[:n]
        conn.buffer_updated(n)
        view = view[n:]


def test_responses_of_several_reads_in_one_iteration_go_out_in_one_write():
    """Reads that fill the buffer given are followed by another in the same iteration (the
    loop reads until a read comes up short): the write waits for that last one."""
    async def scenario():
        transport = FakeTransport()
        conn = Connection(FakeBroker(), "PLAINTEXT")
        conn.connection_made(transport)
        data = b"".join(request_frame(cid, "c" * 30_000) for cid in (1, 2, 3))  # > 64 KiB
        buf = conn.get_buffer(-1)
        n = len(buf)
        assert n < len(data)
        buf[:] = data[:n]
        del buf
        conn.buffer_updated(n)  # a full buffer: frames 1 and 2 complete, more is coming
        assert transport.writes == []
        receive(conn, data[n:])  # the short last read completes frame 3: one write for all
        return list(transport.writes)

    writes = asyncio.run(scenario())
    assert len(writes) == 1
    assert response_ids(writes[0]) == [1, 2, 3]


def test_responses_of_one_read_go_out_in_one_write_at_once():
    async def scenario():
        transport = FakeTransport()
        conn = Connection(FakeBroker(), "PLAINTEXT")
        conn.connection_made(transport)
        receive(conn, request_frame(1) + request_frame(2) + request_frame(3))
        return list(transport.writes)  # before the loop turns

    writes = asyncio.run(scenario())
    assert [response_ids(w) for w in writes] == [[1, 2, 3]]


def test_a_waiting_response_holds_back_the_later_ones_which_then_leave_together():
    async def scenario():
        transport = FakeTransport()
        conn = Connection(FakeBroker(slow={2}), "PLAINTEXT")
        conn.connection_made(transport)
        receive(conn, request_frame(1) + request_frame(2) + request_frame(3) + request_frame(4))
        await asyncio.sleep(0)
        first = list(transport.writes)
        await asyncio.sleep(0.05)
        return first, transport.writes

    first, writes = asyncio.run(scenario())
    assert [response_ids(w) for w in first] == [[1]]
    assert [response_ids(w) for w in writes] == [[1], [2, 3, 4]]


def test_reads_that_complete_no_frame_cost_no_processing_and_schedule_no_write():
    async def scenario():
        transport = FakeTransport()
        conn = Connection(FakeBroker(), "PLAINTEXT")
        conn.connection_made(transport)
        calls = []
        process = conn._process
        conn._process = lambda: (calls.append(1), process())
        data = request_frame(7)
        for i in range(len(data) - 1):  # byte by byte: no read but the last completes it
            receive(conn, data[i : i + 1])
        partial = (len(calls), conn._flush_scheduled, list(transport.writes))
        receive(conn, data[-1:])
        await asyncio.sleep(0)
        return partial, len(calls), transport.writes

    (calls_before, scheduled, writes_before), calls, writes = asyncio.run(scenario())
    assert (calls_before, scheduled, writes_before) == (0, False, [])
    assert calls == 1
    assert [response_ids(w) for w in writes] == [[7]]


def test_an_oversized_frame_closes_the_connection_as_soon_as_its_size_is_read():
    async def scenario():
        transport = FakeTransport()
        conn = Connection(FakeBroker(), "PLAINTEXT")
        conn.connection_made(transport)
        receive(conn, struct.pack(">i", (1 << 20) + 1))
        return transport.closed

    assert asyncio.run(scenario()) is True


def test_a_response_that_cannot_be_encoded_closes_only_its_connection_after_the_earlier_ones(caplog):
    """A handler's bug (a response its version cannot carry): the responses before it are
    written, the connection is closed, and the log has one line, not an exception escaping
    into the event loop."""
    class BadSecond(FakeBroker):
        def dispatch(self, ctx, body):
            if ctx.correlation_id == 2:
                return ApiVersionsResponse(error_code="not a number", api_keys=[])
            return super().dispatch(ctx, body)

    async def scenario():
        transport = FakeTransport()
        conn = Connection(BadSecond(), "PLAINTEXT")
        conn.connection_made(transport)
        receive(conn, request_frame(1) + request_frame(2) + request_frame(3))
        return list(transport.writes), transport.closed

    writes, closed = asyncio.run(scenario())
    assert [response_ids(w) for w in writes] == [[1]] and closed
    lines = [r for r in caplog.records if "could not be encoded" in r.getMessage()]
    assert len(lines) == 1
