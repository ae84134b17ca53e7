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

- by default (``reuse_limit=0``, the client's parsers): it gets a ``bytearray`` of its own
  as soon as its size prefix is known, and the rest of it is received straight into that,
  so a 1 MiB frame is never copied in user space on its way in (only when its buffer grows);
- receive in place (``reuse_limit`` > 0, the broker's connections): a frame of up to
  ``reuse_limit`` bytes stays where it is received. The receive buffer grows to hold it (the
  buffer is kept), and the frame is handed out as a ``memoryview`` of the buffer. The next
  read starts again at the front of the same buffer as soon as nothing refers to it any more,
  so a producer's 500 KB request arrives in two ``recv`` calls (its first ``scratch_size``
  bytes, then the rest: below) into already-mapped memory and is neither copied nor
  zero-filled. The default way costs, per such request, a memset and a
  malloc/free of the whole frame, a copy of the first 64 KiB, and two more ``recv`` calls
  (the last one failing with EAGAIN) with Python run between them. On 100-byte-record produce
  through kcat (~500 KB requests, the broker idle between them) receiving in place took ~4%
  off the broker's CPU per request in side-by-side runs, and ~9% in the first, noisier
  kcat comparisons of a reused buffer alone.

Memory follows the bytes that arrived, never the size a prefix declares: a buffer that a
frame needs bigger grows only once the bytes received fill it, and then by what it holds
(doubling) but at least ``scratch_size`` and at most ``GROW_STEP_MAX`` (8 MiB), and never past
the frame's end. So a peer that declares 100 MB and sends 4 bytes costs one 64 KiB step, not
100 MB; a 100 MB frame that does arrive costs ~20 growths (64 KiB doubling to 8 MiB, then
8 MiB steps), a 1 MiB frame 4 (once per connection, in place); and a buffer never holds more
than ``GROW_STEP_MAX`` bytes beyond those received. ``allocated`` says how many bytes the
parser holds (the broker's memory accounting and its tests read it); ``declared`` adds up
the sizes the prefixes seen so far announced (4 + size each, the frame in progress included:
what the broker reserves, ``queued.max.request.bytes``).

Reads stop at the end of a frame received in place. While such a frame (one bigger than
``scratch_size``) is in progress, ``get_buffer`` offers only the space up to its end, and
while no frame is (its size prefix not seen yet) at most ``scratch_size`` bytes, so a read
never carries the beginning of a big frame far into the buffer behind another. Otherwise,
when pipelined frames differ in size (a client's requests always do), the beginning of the
next frame would land in the tail of the buffer and have to be moved to the front
(``_compact``) before the frame could be received in place: a memmove of up to a frame's
worth of bytes, ~5% of all the bytes received in a simulation of 0.9-1 MiB requests over a
socket pair. With the limits the next frame is received at the front of the buffer once the
last one is let go, for one more ``recv`` per big frame (its first ``scratch_size`` bytes,
then the rest); a big frame whose prefix arrived behind smaller frames, where it cannot end
in the buffer, moves at once, only what arrived with it. A read that fills the space offered
says so (``last_read_filled``): the reader reads again before it waits.

"Nothing refers to it" is read from the buffer's reference count. Every view of a frame (the
frame itself, the ``records`` memoryviews decoded from it, the view a transport is receiving
into) holds one reference to the buffer through their shared managed buffer; a count of the
parser's own reference alone means no reader is left. So a frame that something keeps (a
handler holding on to records) is never overwritten: the parser moves on to a new buffer and
leaves the old one to its holder. Memory: one receive buffer per parser, of at most
``reuse_limit`` bytes plus a prefix (``shrink`` gives it back), and frames still referenced
elsewhere.
"""

from __future__ import annotations

import collections
import struct
import sys

DEFAULT_MAX_FRAME_SIZE = 104_857_600
SCRATCH_SIZE = 64 * 1024
GROW_STEP_MAX = 8 << 20  # most a buffer grows by at once (see the module docstring)
# What buffers grow by, extended in place: ``bytearray += zeros`` reallocates (large blocks by
# remapping their pages, not copying them) and writes only the new bytes. Never written, so
# its pages stay unmapped until read, and then map the kernel's shared zero page.
_ZEROS = memoryview(bytes(GROW_STEP_MAX))
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
    are ``_big[:_filled]``, the frame is ``_big_size`` bytes (``len(_big)`` reaches it as the
    bytes arrive) and nothing is unparsed in ``_buf``. ``_current`` is 4 + the size of the
    frame in progress once its prefix is parsed, else 0; ``_completed`` adds up 4 + size of
    every frame completed so far.
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
        self._big_size = 0
        self._filled = 0
        self._current = 0
        self._completed = 0
        self._ready: collections.deque = collections.deque()
        self._error: FrameTooLargeError | None = None
        # Whether the last buffer_updated filled all the space get_buffer offered: a socket
        # reader (libuv, asyncio) then reads again before it waits.
        self.last_read_filled = False
        self._offered_end = 0  # where the space the last get_buffer offered ends (in _buf)

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        return self._end - self._start + self._filled + sum(len(f) for f in self._ready)

    @property
    def allocated(self) -> int:
        """Bytes of memory the parser holds: its buffers and the frames it copied out and
        has not handed over yet (frames received in place are part of the receive buffer)."""
        big = len(self._big) if self._big is not None else 0
        return len(self._buf) + big + sum(len(f) for f in self._ready if type(f) is bytearray)

    @property
    def declared(self) -> int:
        """4 + the declared size of every frame whose prefix was parsed so far, the one in
        progress included (it only grows: a caller charges its increase)."""
        return self._completed + self._current

    @property
    def completed(self) -> int:
        """4 + the size of every frame completed so far (``declared`` less the frame in
        progress)."""
        return self._completed

    @property
    def in_frame(self) -> bool:
        """A frame's prefix was parsed and the rest of it is still to come."""
        return self._current != 0

    @property
    def has_frame(self) -> bool:
        """True when ``next_frame()`` would return a frame or raise (cheap: no work done)."""
        return bool(self._ready) or self._error is not None

    # --- receiving ----------------------------------------------------------------------
    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """Where the next received bytes should go (never empty). ``sizehint`` is ignored
        (it is there so the method can serve as asyncio's ``BufferedProtocol.get_buffer``)."""
        if self._big is not None:
            if self._filled == len(self._big):
                self._grow_big()
            return memoryview(self._big)[self._filled :]
        in_place = self._current > self._copy_limit + 4  # a frame in progress, received in place
        if self._start == self._end and self._start and self._is_free():
            self._start = self._end = 0  # all parsed and no frame in use: from the front
        elif self._end == len(self._buf) or (in_place and self._start
                                             and self._start + self._current > len(self._buf)):
            self._make_room()  # (a big frame that cannot end in the buffer: move it now)
        end = len(self._buf)
        if in_place:
            end = min(end, self._start + self._current)  # not into the next frame (module docstring)
        elif not self._current:
            end = min(end, self._end + self._copy_limit)  # a frame may begin: learn its size first
        self._offered_end = end
        return memoryview(self._buf)[self._end : end]

    def buffer_updated(self, n: int) -> bool:
        """``n`` bytes were written at the start of the last ``get_buffer()``; returns
        ``has_frame`` (so a receiving loop needs no second call to know)."""
        if self._big is not None:
            self._filled += n
            self.last_read_filled = self._filled == len(self._big)
            if self._filled == self._big_size:
                self._ready.append(self._big)
                self._completed += self._current
                self._big, self._filled, self._current = None, 0, 0
                return True
            return False
        self._end += n
        self.last_read_filled = self._end == self._offered_end
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

    def shrink(self) -> None:
        """Between frames (nothing unparsed, no view of the buffer alive), give back a
        receive buffer grown for big frames: the next read starts in a ``scratch_size`` one.
        For connections gone quiet (``server/background.py``), so that a grown buffer is
        kept while requests keep coming, not for ever."""
        if (len(self._buf) > self._copy_limit and self._start == self._end and self._big is None
                and self._is_free()):
            self._buf = bytearray(self._copy_limit)
            self._start = self._end = 0

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
        """Cut complete frames out of the receive buffer; a big one begun at its end moves
        to a buffer of its own."""
        self._current = 0
        while self._error is None and self._end - self._start >= 4:
            (size,) = _SIZE.unpack_from(self._buf, self._start)
            if size < 0 or size > self.max_size:
                self._error = FrameTooLargeError(size, self.max_size)
                self._start = self._end
                return
            body = self._start + 4
            if self._end - body < size:
                self._current = 4 + size
                if size > self.reuse_limit and 4 + size > len(self._buf):
                    self._start_big(size)
                return
            if size <= self._copy_limit:
                self._ready.append(self._buf[body : body + size])
            else:  # only in place: a bigger frame never completes in the small buffer
                self._ready.append(memoryview(self._buf)[body : body + size])
            self._completed += 4 + size
            self._start = body + size

    def _grown(self, have: int, need: int) -> int:
        """The size of a buffer holding ``have`` bytes of the ``need`` a frame takes, once
        the buffer is full: doubled, by at least ``_copy_limit``, at most GROW_STEP_MAX."""
        return min(need, have + min(max(have, self._copy_limit), GROW_STEP_MAX))

    def _start_big(self, size: int) -> None:
        """The frame of ``size`` bytes begun at ``_start`` is bigger than ``reuse_limit``:
        continue it in a buffer of its own, sized to what arrived and grown as more does."""
        have = self._end - self._start - 4
        self._big = bytearray(self._grown(have, size))
        self._big[:have] = memoryview(self._buf)[self._start + 4 : self._end]
        self._big_size, self._filled = size, have
        self._start = self._end  # all taken; get_buffer starts the buffer over

    def _grow_big(self) -> None:
        self._big = _extended(self._big, self._grown(self._filled, self._big_size))

    def _make_room(self) -> None:
        """Space after ``_end``. When nothing refers to the buffer: start over at its front
        (moving what is not parsed yet), and grow it in place if the frame in progress needs
        more (as far as ``_grown`` allows). Else continue in a new buffer, of that size."""
        have = self._end - self._start
        size = len(self._buf)
        if self._current > size:
            size = max(size if self._start else 0, self._grown(have, self._current))
        if self._is_free():
            self._compact()
            if size > len(self._buf):
                self._buf = _extended(self._buf, size)
            return
        new = bytearray(size)
        new[:have] = memoryview(self._buf)[self._start : self._end]
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


def _extended(buf: bytearray, size: int) -> bytearray:
    """``buf`` grown to ``size`` bytes, in place when nothing holds a view of it, else a
    copy (a receiver may still hold the view it was given, until it lets go)."""
    try:
        buf += _ZEROS[: size - len(buf)]
        return buf
    except BufferError:
        new = bytearray(size)
        new[: len(buf)] = buf
        return new


def frame(payload: bytes) -> bytes:
    """``payload`` with its size prefix."""
    return _SIZE.pack(len(payload)) + payload
