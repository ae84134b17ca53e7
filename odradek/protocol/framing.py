"""Size-prefixed framing: every Kafka request and response is ``int32 size`` + ``size`` bytes.

``FrameParser`` is an incremental, sans-I/O parser in the style of h11: feed it whatever bytes
arrived (``feed``), then take complete frames (``next_frame``) until it returns None. A frame
whose declared size is negative or above ``max_size`` (Kafka's ``socket.request.max.bytes``,
default 104857600) raises ``FrameTooLargeError`` as soon as its 4-byte prefix is seen, before
any of its body is buffered; the connection is then unusable and must be closed.
"""

from __future__ import annotations

import struct

DEFAULT_MAX_FRAME_SIZE = 104_857_600
_SIZE = struct.Struct(">i")


class FrameTooLargeError(ValueError):
    """A frame's declared size is negative or larger than allowed."""

    def __init__(self, size: int, max_size: int) -> None:
        super().__init__(f"frame size {size} outside 0..{max_size}")
        self.size = size
        self.max_size = max_size


class FrameParser:
    """Splits a byte stream into frames (the bytes after each size prefix)."""

    def __init__(self, max_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_size = max_size
        self._buf = bytearray()
        self._pos = 0  # start of unconsumed bytes in _buf
        self._need = -1  # size of the frame being collected, -1 while reading a prefix

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        return len(self._buf) - self._pos

    def feed(self, data) -> None:
        if self._pos and self._pos == len(self._buf):
            # Everything consumed: reuse the buffer instead of growing it.
            self._buf.clear()
            self._pos = 0
        self._buf += data

    def next_frame(self) -> bytearray | None:
        """The next complete frame, or None until more bytes are fed."""
        buf = self._buf
        available = len(buf) - self._pos
        if self._need < 0:
            if available < 4:
                return None
            (size,) = _SIZE.unpack_from(buf, self._pos)
            if size < 0 or size > self.max_size:
                raise FrameTooLargeError(size, self.max_size)
            self._pos += 4
            available -= 4
            self._need = size
        if available < self._need:
            return None
        start = self._pos
        end = start + self._need
        # One copy, into a writable buffer: the broker patches batch offsets in place.
        frame = bytearray(memoryview(buf)[start:end])
        self._pos = end
        self._need = -1
        if self._pos > 1 << 20 and self._pos * 2 > len(buf):
            # Drop consumed bytes now and then so a long pipeline does not grow the buffer.
            del buf[: self._pos]
            self._pos = 0
        return frame

    def frames(self):
        """Iterate over every complete frame buffered now."""
        while (frame := self.next_frame()) is not None:
            yield frame


def size_prefix(size: int) -> bytes:
    return _SIZE.pack(size)


def frame(payload: bytes) -> bytes:
    """``payload`` with its size prefix."""
    return _SIZE.pack(len(payload)) + payload
