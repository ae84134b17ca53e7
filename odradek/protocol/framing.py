"""Size-prefixed framing: every Kafka request and response is ``int32 size`` + ``size`` bytes.

``FrameParser`` is an incremental, sans-I/O parser in the style of h11. Bytes come in either
way:

- ``feed(data)``: hand it whatever bytes arrived;
- ``get_buffer()`` / ``buffer_updated(n)``: let the caller receive straight into the parser's
  memory (asyncio's ``BufferedProtocol``).

Then take complete frames with ``next_frame()`` until it returns None. Frames are writable
buffers (the broker patches batch offsets in place): ``bytearray``, or ``memoryview`` in the
receive-in-place mode below. A frame whose declared size is negative or above ``max_size``
(Kafka's ``socket.request.max.bytes``, default 104857600) raises ``FrameTooLargeError`` as
soon as its 4-byte prefix is seen, before any of its body is buffered; the connection is then
unusable and must be closed. A frame still being received is never visible to the caller.

Where the bytes go. Reads land in a receive buffer, ``scratch_size`` (64 KiB) to start with.
A frame that fits in it is copied out (one small ``bytearray``), so the buffer is reused at
once. A bigger frame is handled in one of two ways:

- by default (``reuse_limit=0``, the client's parsers): it gets a ``bytearray(size)`` of its
  own as soon as its size prefix is known, and the rest of it is received straight into that,
  so a 1 MiB frame is never copied in user space;
- receive in place (``reuse_limit`` > 0, the broker's connections): a frame of up to
  ``reuse_limit`` bytes stays where it is received. The receive buffer grows to hold it (once:
  the buffer is kept), and the frame is handed out as a ``memoryview`` of the buffer. The next
  read starts again at the front of the same buffer as soon as nothing refers to it any more,
  so a producer's 500 KB request arrives in one ``recv`` into already-mapped memory and is
  neither copied nor zero-filled. The default way costs, per such request, a memset and a
  malloc/free of the whole frame, a copy of the first 64 KiB, and two more ``recv`` calls
  (the last one failing with EAGAIN) with Python run between them. On 100-byte-record produce
  through kcat (~500 KB requests, the broker idle between them) receiving in place took ~4%
  off the broker's CPU per request in side-by-side runs, and ~9% in the first, noisier
  kcat comparisons of a reused buffer alone.

"Nothing refers to it" is read from the buffer's reference count. Every view of a frame (the
frame itself, the ``records`` memoryviews decoded from it, the view a transport is receiving
into) holds one reference to the buffer through their shared managed buffer; a count of the
parser's own reference alone means no reader is left. So a frame that something keeps (a
handler holding on to records) is never overwritten: the parser moves on to a new buffer and
leaves the old one to its holder. Memory: one receive buffer per parser, of at most
``reuse_limit`` bytes plus a prefix, and frames still referenced elsewhere.
"""

from __future__ import annotations

import collections
import struct
import sys

DEFAULT_MAX_FRAME_SIZE = 104_857_600
SCRATCH_SIZE = 64 * 1024
_SIZE = struct.Struct(">i")
_refcount = sys.getrefcount


class FrameTooLargeError(ValueError):
    """A frame's declared size is negative or larger than allowed."""

    def __init__(self, size: int, max_size: int) -> None:
        super().__init__(f"frame size {size} outside 0..{max_size}")
        self.size = size
        self.max_size = max_size


class FrameParser:
    """Splits a byte stream into frames (the bytes after each size prefix).

    Invariants: unparsed bytes are ``_buf[_start:_end]``; bytes of ``_buf`` before ``_start``
    may belong to frames handed out (receive in place) and are never written while anything
    refers to ``_buf``. While ``_big`` is set, the bytes of the current frame received so far
    are ``_big[:_filled]`` and nothing is unparsed in ``_buf``.
    """

    def __init__(self, max_size: int = DEFAULT_MAX_FRAME_SIZE, scratch_size: int = SCRATCH_SIZE,
                 reuse_limit: int = 0) -> None:
        self.max_size = max_size
        self.reuse_limit = reuse_limit
        self._copy_limit = scratch_size  # frames up to this size are copied out
        self._buf = bytearray(scratch_size)
        self._start = 0
        self._end = 0
        self._big: bytearray | None = None
        self._filled = 0
        self._ready: collections.deque = collections.deque()
        self._error: FrameTooLargeError | None = None
        # Whether the last buffer_updated filled all the space get_buffer offered: a socket
        # reader (libuv, asyncio) then reads again before it waits.
        self.last_read_filled = False

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        return self._end - self._start + self._filled + sum(len(f) for f in self._ready)

    @property
    def has_frame(self) -> bool:
        """True when ``next_frame()`` would return a frame or raise (cheap: no work done)."""
        return bool(self._ready) or self._error is not None

    # --- receiving ----------------------------------------------------------------------
    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """Where the next received bytes should go (never empty). ``sizehint`` is ignored
        (it is there so the method can serve as asyncio's ``BufferedProtocol.get_buffer``)."""
        if self._big is not None:
            return memoryview(self._big)[self._filled :]
        if self._start == self._end and self._start and self._is_free():
            self._start = self._end = 0  # all parsed and no frame in use: from the front
        elif self._end == len(self._buf):
            self._make_room()
        return memoryview(self._buf)[self._end :]

    def buffer_updated(self, n: int) -> bool:
        """``n`` bytes were written at the start of the last ``get_buffer()``; returns
        ``has_frame`` (so a receiving loop needs no second call to know)."""
        if self._big is not None:
            self._filled += n
            self.last_read_filled = self._filled == len(self._big)
            if self.last_read_filled:
                self._ready.append(self._big)
                self._big, self._filled = None, 0
                return True
            return False
        self._end += n
        self.last_read_filled = self._end == len(self._buf)
        self._split()
        return bool(self._ready) or self._error is not None

    def feed(self, data) -> None:
        view = memoryview(data)
        while len(view):
            buf = self.get_buffer()
            n = min(len(buf), len(view))
            buf[:n] = view[:n]
            del buf
            self.buffer_updated(n)
            view = view[n:]

    # --- frames -------------------------------------------------------------------------
    def next_frame(self) -> bytearray | memoryview | None:
        """The next complete frame, or None until more bytes arrive.

        Raises FrameTooLargeError once every frame before the oversized one was taken.
        """
        if self._ready:
            return self._ready.popleft()
        if self._error is not None:
            raise self._error
        return None

    def frames(self):
        """Iterate over every complete frame buffered now."""
        while (frame := self.next_frame()) is not None:
            yield frame

    def _split(self) -> None:
        """Cut complete frames out of the receive buffer; see to it that an incomplete one
        at its end has room to be completed (in place, or in a buffer of its own)."""
        while self._error is None and self._end - self._start >= 4:
            (size,) = _SIZE.unpack_from(self._buf, self._start)
            if size < 0 or size > self.max_size:
                self._error = FrameTooLargeError(size, self.max_size)
                self._start = self._end
                return
            body = self._start + 4
            if self._end - body < size:
                if 4 + size > len(self._buf):
                    self._room_for(size)
                return
            if size <= self._copy_limit:
                self._ready.append(self._buf[body : body + size])
            else:  # only in place: a bigger frame never completes in the small buffer
                self._ready.append(memoryview(self._buf)[body : body + size])
            self._start = body + size

    def _room_for(self, size: int) -> None:
        """The frame of ``size`` bytes begun at ``_start`` would not fit in the receive buffer
        even at its front: move it to a bigger receive buffer, while that stays within
        ``reuse_limit``, else to a buffer of its own. (One that fits once moved to the front
        stays put: ``get_buffer`` makes room when the buffer's end is reached.)"""
        have = self._end - self._start
        if size > self.reuse_limit:
            self._big = bytearray(size)
            self._big[: have - 4] = self._buf[self._start + 4 : self._end]
            self._filled = have - 4
            self._start = self._end  # all taken; get_buffer starts the buffer over
            return
        # Grow geometrically, so that a client whose requests creep up in size does not
        # make a new buffer for each one.
        new = bytearray(max(4 + size, min(2 * len(self._buf), 4 + self.reuse_limit)))
        new[:have] = self._buf[self._start : self._end]
        self._buf, self._start, self._end = new, 0, have

    def _make_room(self) -> None:
        """Space after ``_end``: start over at the front of the buffer (moving what is not
        parsed yet) when nothing refers to it, else continue in a new one."""
        if self._is_free():
            self._compact()
            return
        have = self._end - self._start
        new = bytearray(len(self._buf))
        new[:have] = self._buf[self._start : self._end]
        self._buf, self._start, self._end = new, 0, have

    def _is_free(self) -> bool:
        # Only the attribute and getrefcount's argument: no view of any frame is alive.
        return _refcount(self._buf) <= 2

    def _compact(self) -> None:
        """Move the unparsed tail of the receive buffer to its front."""
        remaining = self._end - self._start
        if self._start:
            self._buf[:remaining] = self._buf[self._start : self._end]
        self._start, self._end = 0, remaining


def frame(payload: bytes) -> bytes:
    """``payload`` with its size prefix."""
    return _SIZE.pack(len(payload)) + payload
