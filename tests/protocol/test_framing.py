"""The incremental frame parser."""

import ctypes

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.protocol.framing import GROW_STEP_MAX, SCRATCH_SIZE, FrameParser, FrameTooLargeError, frame


@given(st.lists(st.binary(max_size=300), max_size=8), st.data())
def test_frames_survive_any_split(payloads, data):
    stream = b"".join(frame(p) for p in payloads)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    parser = FrameParser(max_size=1000)
    got = []
    start = 0
    for cut in cuts + [len(stream)]:
        parser.feed(stream[start:cut])
        start = cut
        got.extend(bytes(f) for f in parser.frames())
    assert got == payloads
    assert parser.buffered == 0


def test_partial_frame_waits():
    parser = FrameParser()
    parser.feed(frame(b"hello")[:6])
    assert parser.next_frame() is None
    parser.feed(b"llo")
    assert parser.next_frame() == b"hello"


@pytest.mark.parametrize("size", [-1, -(2**31), 1001, 2**31 - 1])
def test_oversized_or_negative_frame_is_refused_before_buffering(size):
    parser = FrameParser(max_size=1000)
    parser.feed(size.to_bytes(4, "big", signed=True))
    with pytest.raises(FrameTooLargeError):
        parser.next_frame()
    assert parser.buffered <= 4


def test_frames_are_writable_copies():
    parser = FrameParser()
    parser.feed(frame(b"abc") + frame(b"de"))
    first = parser.next_frame()
    first[0] = 0x7A
    assert parser.next_frame() == b"de"


@given(st.lists(st.binary(max_size=300), max_size=8), st.data())
def test_frames_bigger_than_the_scratch_get_their_own_buffer(payloads, data):
    """Received the BufferedProtocol way, in random pieces, with a 16-byte scratch buffer."""
    stream = b"".join(frame(p) for p in payloads)
    parser = FrameParser(max_size=1000, scratch_size=16)
    got, pos = [], 0
    while pos < len(stream):
        buf = parser.get_buffer()
        assert len(buf) > 0
        n = min(len(buf), len(stream) - pos, data.draw(st.integers(1, 64)))
        buf[:n] = stream[pos:pos + n]
        parser.buffer_updated(n)
        pos += n
        got.extend(bytes(f) for f in parser.frames())
    assert got == payloads
    assert parser.buffered == 0


def test_a_big_frame_is_received_in_place():
    parser = FrameParser(scratch_size=64)
    parser.feed(frame(b"x" * 10)[:8])
    parser.feed(frame(b"y" * 1000)[:0])
    parser.feed(frame(b"x" * 10)[8:] + frame(b"z" * 1000)[:100])
    assert parser.next_frame() == b"x" * 10
    received = 96
    while received < 1000:  # the rest of the big frame only, into its own growing buffer
        target = parser.get_buffer()
        assert 0 < len(target) <= 1000 - received
        target[:] = b"z" * len(target)
        received += len(target)
        assert parser.buffer_updated(len(target)) is (received == 1000)
    assert parser.next_frame() == b"z" * 1000


def test_has_frame_says_whether_next_frame_has_something_without_taking_it():
    parser = FrameParser()
    data = frame(b"x" * 100_000) + frame(b"y")
    parser.feed(data[:50_000])
    assert not parser.has_frame
    parser.feed(data[50_000:])
    assert parser.has_frame
    assert parser.next_frame() == bytearray(b"x" * 100_000)
    assert parser.has_frame
    assert parser.next_frame() == bytearray(b"y")
    assert not parser.has_frame and parser.next_frame() is None


def _receive(parser, data: bytes, piece: int = 1 << 30) -> list:
    """Feed ``data`` the BufferedProtocol way; return the frames completed, as taken."""
    got, pos = [], 0
    while pos < len(data):
        buf = parser.get_buffer()
        n = min(len(buf), len(data) - pos, piece)
        buf[:n] = data[pos:pos + n]
        del buf  # as a transport does: its view of the buffer is gone before frames are used
        parser.buffer_updated(n)
        pos += n
        got.extend(parser.frames())
    return got


def test_buffer_updated_says_whether_a_frame_is_ready():
    parser = FrameParser(scratch_size=16)
    data = frame(b"a" * 40) + frame(b"b")  # 44 + 5 bytes
    buf = parser.get_buffer()
    buf[:10] = data[:10]
    assert parser.buffer_updated(10) is False  # a big frame begun: 6 of its 40 bytes
    buf = parser.get_buffer()
    assert len(buf) == 16  # its buffer: what arrived and one 16-byte step
    buf[:] = data[10:26]
    assert parser.buffer_updated(16) is False
    buf = parser.get_buffer()
    assert len(buf) == 18  # the rest: the buffer never grows past the frame
    buf[:] = data[26:44]
    assert parser.buffer_updated(18) is True
    assert parser.next_frame() == b"a" * 40
    buf = parser.get_buffer()
    buf[:3] = data[44:47]
    assert parser.buffer_updated(3) is False
    buf = parser.get_buffer()
    buf[:2] = data[47:]
    assert parser.buffer_updated(2) is True
    assert parser.next_frame() == b"b"


def test_reused_buffer_serves_the_next_big_frame_once_the_last_is_dropped():
    parser = FrameParser(scratch_size=16, reuse_limit=1000)
    (first,) = _receive(parser, frame(b"x" * 300), piece=50)
    assert first == b"x" * 300
    del first
    (second,) = _receive(parser, frame(b"y" * 200), piece=50)
    assert second == b"y" * 200
    # The same memory, not a new (zero-filled) buffer: the first frame's tail is still there
    # (both begin after a 4-byte size prefix at the front of the buffer).
    assert second.obj[4 + 200 : 4 + 300] == b"x" * 100
    second[0] = 0x7A  # frames stay writable
    assert bytes(second[:2]) == b"zy"


def test_a_big_frame_in_the_kept_buffer_is_received_in_two_pieces():
    """Once grown, the buffer takes a big frame in two receives: its first ``scratch_size``
    bytes (its size unknown until then), then all the rest of it, and nothing after it."""
    parser = FrameParser(scratch_size=16, reuse_limit=1000)
    _receive(parser, frame(b"x" * 300))
    data = frame(b"y" * 250) + frame(b"s")
    buf = parser.get_buffer()
    assert len(buf) == 16
    buf[:] = data[:16]
    del buf
    assert not parser.buffer_updated(16) and parser.last_read_filled
    buf = parser.get_buffer()
    assert len(buf) == 254 - 16
    buf[:] = data[16:254]
    del buf
    assert parser.buffer_updated(254 - 16)
    assert [bytes(f) for f in parser.frames()] == [b"y" * 250]
    assert _receive(parser, data[254:]) == [b"s"]


def test_a_frame_still_referenced_is_never_overwritten():
    parser = FrameParser(scratch_size=16, reuse_limit=1000)
    (first,) = _receive(parser, frame(b"x" * 300), piece=70)
    records = first[10:20]  # what a decoder hands to a handler that keeps it
    del first
    (second,) = _receive(parser, frame(b"y" * 300), piece=70)
    assert bytes(records) == b"x" * 10
    assert second.obj is not records.obj
    del second
    (third,) = _receive(parser, frame(b"z" * 100))
    assert bytes(records) == b"x" * 10 and third == b"z" * 100


def test_frames_beyond_the_reuse_limit_get_fresh_buffers():
    parser = FrameParser(scratch_size=16, reuse_limit=100)
    frames = _receive(parser, frame(b"x" * 300) + frame(b"y" * 300) + frame(b"w" * 50))
    assert [bytes(f) for f in frames] == [b"x" * 300, b"y" * 300, b"w" * 50]
    assert isinstance(frames[0], bytearray) and isinstance(frames[1], bytearray)
    assert isinstance(frames[2], memoryview)


@given(st.lists(st.binary(max_size=300), max_size=10), st.data())
def test_reuse_keeps_every_frame_intact(payloads, data):
    """Frames taken and kept (or dropped) at random while later ones arrive in random pieces."""
    stream = b"".join(frame(p) for p in payloads)
    parser = FrameParser(max_size=1000, scratch_size=16, reuse_limit=200)
    kept, taken, pos = [], [], 0
    while pos < len(stream):
        n = data.draw(st.integers(1, 64) | st.integers(1, 4000))  # bits, or several frames
        taken_now = _receive(parser, stream[pos:pos + n])
        pos += n
        for f in taken_now:
            taken.append(bytes(f))
            if data.draw(st.booleans()):
                kept.append((f, bytes(f)))
    assert taken == payloads
    assert all(bytes(view) == copy for view, copy in kept)


@pytest.mark.parametrize("reuse_limit", [0, 2 << 20])
@pytest.mark.parametrize("size", [100_000_000, 2 << 20])
def test_a_declared_size_allocates_nothing_until_its_bytes_arrive(reuse_limit, size):
    """A prefix announcing 100 MB (or 2 MiB: in place where reused) and a few bytes of body:
    the parser holds its receive buffer, what arrived and one growth step, not the announced
    size (which it reports as ``declared``)."""
    parser = FrameParser(reuse_limit=reuse_limit)
    _receive(parser, size.to_bytes(4, "big") + b"x" * 1000)
    assert parser.allocated <= 3 * SCRATCH_SIZE
    _receive(parser, b"x" * 100_000)
    assert parser.allocated <= SCRATCH_SIZE + 2 * 101_004
    assert parser.declared == 4 + size and parser.in_frame
    assert parser.next_frame() is None


@pytest.mark.parametrize("reuse_limit", [0, 2 << 20])
def test_a_big_frame_grows_its_buffer_with_the_bytes_received(reuse_limit):
    """At every step the parser holds at most what arrived plus GROW_STEP_MAX, and a frame
    arriving in big reads costs a few growths (doubling), not one per read."""
    size = 3 * GROW_STEP_MAX + 12345
    data = frame(bytes(range(256)) * (size // 256) + b"e" * (size % 256))
    parser = FrameParser(max_size=size, reuse_limit=reuse_limit)
    buffers, pos, got = set(), 0, []
    while pos < len(data):
        buf = parser.get_buffer()
        buffers.add(id(buf.obj))
        n = min(len(buf), len(data) - pos, 256 * 1024)
        buf[:n] = data[pos:pos + n]
        del buf
        parser.buffer_updated(n)
        pos += n
        assert parser.allocated <= pos + GROW_STEP_MAX + SCRATCH_SIZE
        got.extend(parser.frames())
    assert len(got) == 1 and got[0] == data[4:]
    assert len(buffers) <= 16
    assert parser.declared == len(data) and not parser.in_frame


def test_shrink_gives_back_a_grown_buffer_only_between_frames():
    parser = FrameParser(scratch_size=16, reuse_limit=1000)
    (first,) = _receive(parser, frame(b"x" * 300))
    parser.shrink()
    assert parser.allocated > 300  # the frame is still referenced: kept
    del first
    _receive(parser, frame(b"y" * 300)[:100])
    parser.shrink()
    assert parser.allocated > 100  # a frame in progress: kept
    (second,) = _receive(parser, frame(b"y" * 300)[100:])
    del second
    parser.shrink()
    assert parser.allocated == 16
    assert [bytes(f) for f in _receive(parser, frame(b"z" * 300))] == [b"z" * 300]


def _offset(view: memoryview) -> int:
    """Where ``view`` begins in the buffer it was cut from."""
    base = memoryview(view.obj)
    return ctypes.addressof(ctypes.c_char.from_buffer(view)) - ctypes.addressof(ctypes.c_char.from_buffer(base))


def test_a_read_never_runs_past_the_end_of_a_frame_received_in_place():
    parser = FrameParser(scratch_size=16, reuse_limit=1000)
    _receive(parser, frame(b"x" * 300))  # the buffer grows to 304 and is kept
    data = frame(b"y" * 200) + frame(b"z" * 250)
    buf = parser.get_buffer()
    assert len(buf) == 16  # no frame begun: its size first
    buf[:] = data[:16]
    del buf
    assert not parser.buffer_updated(16)
    buf = parser.get_buffer()
    assert len(buf) == 204 - 16  # the rest of this frame, not the next one's beginning
    buf[:] = data[16:204]
    del buf
    assert parser.buffer_updated(204 - 16) and parser.last_read_filled  # filled: read on
    (first,) = parser.frames()
    assert first == b"y" * 200


@given(st.lists(st.integers(17, 300), min_size=2, max_size=8), st.data())
def test_frames_of_different_sizes_are_each_received_at_the_front_without_moving(sizes, data):
    """Pipelined in-place frames, each handled before the next read (as the broker's produce
    path does): every one lands at the front of the one kept buffer, none is moved."""
    parser = FrameParser(scratch_size=16, reuse_limit=1000)
    _receive(parser, frame(b"w" * 300))
    kept = id(parser._buf)  # (not the buffer itself: a reference would keep it from reuse)
    stream = b"".join(frame(bytes([65 + i % 26]) * n) for i, n in enumerate(sizes))
    moved = []
    parser._compact = lambda: moved.append(parser._end - parser._start)
    got, pos = [], 0
    while pos < len(stream):
        buf = parser.get_buffer()
        n = min(len(buf), len(stream) - pos, data.draw(st.integers(1, 400)))
        buf[:n] = stream[pos:pos + n]
        del buf
        parser.buffer_updated(n)
        pos += n
        for f in parser.frames():
            assert id(f.obj) == kept and _offset(f) == 4
            got.append(len(f))
            del f
    assert got == sizes and not moved


def test_a_big_frame_begun_behind_small_ones_moves_only_what_arrived_with_it():
    parser = FrameParser(scratch_size=16, reuse_limit=1000)
    _receive(parser, frame(b"x" * 300))  # the buffer grows to 304 and is kept
    smalls = frame(b"a" * 10) + frame(b"b" * 10)  # 28 bytes
    data = smalls + frame(b"y" * 290)  # 28 + 294 bytes: cannot end in the buffer
    assert [bytes(f) for f in _receive(parser, data[:28 + 4])] == [b"a" * 10, b"b" * 10]
    moved = []
    compact = parser._compact
    parser._compact = lambda: (moved.append(parser._end - parser._start), compact())
    buf = parser.get_buffer()  # the big frame's prefix moved to the front, the frame behind it
    assert moved == [4] and len(buf) == 294 - 4
    buf[:] = data[32:]
    del buf
    assert parser.buffer_updated(294 - 4)
    (big,) = parser.frames()
    assert big == b"y" * 290 and _offset(big) == 4
