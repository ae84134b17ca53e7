"""``FrameParser``'s kept receive buffers (``SPARE_BUFFERS``): while frames of the current
buffer are held (a produce request being written off the loop), the next frames go to another
kept buffer, never over the held bytes; once let go, a buffer is used again instead of a new
one being allocated."""

from __future__ import annotations

from odradek.protocol.framing import SPARE_BUFFERS, FrameParser, frame
from tests.protocol.test_framing import _receive


def test_held_frames_are_never_received_over_and_their_buffers_come_back():
    parser = FrameParser(scratch_size=16, reuse_limit=1000)
    held = []
    for i in range(3):  # three requests written off the loop at once
        (f,) = _receive(parser, frame(bytes([65 + i]) * 300), piece=70)
        held.append(f)
    assert len({id(f.obj) for f in held}) == 3  # each in a buffer of its own
    (extra,) = _receive(parser, frame(b"q" * 300), piece=70)
    assert [bytes(f) for f in held] == [b"A" * 300, b"B" * 300, b"C" * 300]
    buffers = {id(f.obj) for f in held} | {id(extra.obj)}
    del extra
    held.clear()  # every write done
    for i in range(6):  # now they serve again: no new buffer
        (f,) = _receive(parser, frame(bytes([97 + i]) * 250), piece=70)
        assert bytes(f) == bytes([97 + i]) * 250 and id(f.obj) in buffers
        keep = f  # one held at a time: the parser alternates
        del f
    del keep
    assert len(parser._spares) <= SPARE_BUFFERS


def test_kept_buffers_are_bounded_and_given_back_by_shrink():
    parser = FrameParser(scratch_size=16, reuse_limit=1000)
    held = [_receive(parser, frame(b"x" * 300), piece=70)[0] for _ in range(SPARE_BUFFERS + 3)]
    assert len(parser._spares) == SPARE_BUFFERS
    assert all(bytes(f) == b"x" * 300 for f in held)
    held.clear()
    parser.shrink()
    assert parser._spares == [] and parser.allocated == 16
