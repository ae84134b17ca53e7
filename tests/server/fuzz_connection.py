"""Drive a broker's ``Connection`` with bytes, on the broker's own loop, with no socket.

``exchange(b, frames)`` feeds frames to a fresh connection of the in-process broker ``b``
through a fake transport and reports what came back: the response frames written, whether
the broker closed the connection, and whether a handler is still waiting (a long-poll fetch
or a join that waits for its group). A handler exception raised out of the protocol's
callbacks reaches the caller, as asyncio would turn it into a traceback and a reset.
"""

from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass, field

from odradek.server.connection import Connection


class FakeTransport(asyncio.Transport):
    """What ``Connection`` uses of a transport; written bytes are kept in ``out``."""

    def __init__(self, protocol) -> None:
        super().__init__()
        self.protocol = protocol
        self.out = bytearray()
        self.closing = False

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 40000) if name == "peername" else default

    def write(self, data) -> None:
        self.out += data

    def writelines(self, parts) -> None:
        for part in parts:
            self.out += part

    def close(self) -> None:
        if not self.closing:
            self.closing = True
            asyncio.get_running_loop().call_soon(self.protocol.connection_lost, None)

    def is_closing(self) -> bool:
        return self.closing

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0


@dataclass
class Outcome:
    responses: list[bytes] = field(default_factory=list)
    closed: bool = False
    waiting: bool = False  # a handler had not finished when the exchange gave up


def _split(out: bytes) -> list[bytes]:
    frames, pos = [], 0
    while pos + 4 <= len(out):
        (size,) = struct.unpack_from(">i", out, pos)
        frames.append(bytes(out[pos + 4:pos + 4 + size]))
        pos += 4 + size
    return frames


async def _exchange(broker, data: bytes, patience: float) -> Outcome:
    conn = Connection(broker, next(iter(broker.bound)))
    transport = FakeTransport(conn)
    conn.connection_made(transport)
    pos = 0
    while pos < len(data) and not conn.closed:
        buf = conn.get_buffer(len(data) - pos)
        n = min(len(buf), len(data) - pos)
        buf[:n] = data[pos:pos + n]
        pos += n
        conn.buffer_updated(n)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + patience
    while conn.pending and not conn.closed and loop.time() < deadline:
        await asyncio.sleep(0.001)
    await asyncio.sleep(0)  # let connection_lost run
    outcome = Outcome(_split(transport.out), conn.closed, bool(conn.pending) and not conn.closed)
    if not conn.closed:
        conn.close()
    return outcome


def exchange(b, frames: list[bytes], patience: float = 1.0) -> Outcome:
    """Feed size-prefixed ``frames`` to a new connection of InProcessBroker ``b``."""
    return b.call(_exchange, b.broker, b"".join(frames), patience)
