"""The incremental frame parser."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.protocol.framing import FrameParser, FrameTooLargeError, frame


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
    target = parser.get_buffer()
    assert len(target) == 1000 - 96  # the rest of the big frame, nothing else
    target[:] = b"z" * len(target)
    parser.buffer_updated(len(target))
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
