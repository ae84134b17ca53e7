"""The fused CRC-32C of the produce fast path (records/crc32c_fused.h): three streams over a
split span, stepped per record and combined, and (on CPUs with AVX-512 and VPCLMULQDQ) 64-byte
folding, each against the crc32c package; and the fast path's CRC verdict on batches of every
size, with one flipped byte anywhere. Every test runs with each path this CPU has."""
import os
import random

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.records._log_validator import _crc32c, _crc32c_fold, validate_and_assign
from odradek.records.builder import build_batch
from odradek.records.record import Record

pytestmark = pytest.mark.skipif(_crc32c(b"", 0) is None, reason="no SSE4.2: the fused CRC is not used")

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
FOLDING = _crc32c_fold(True)  # the default where the CPU can


@pytest.fixture(autouse=True, params=["fold", "streams"])
def crc_path(request):
    """Each test with the 64-byte folding (where the CPU has it) and with the three streams."""
    if request.param == "fold" and not FOLDING:
        pytest.skip("no AVX-512 VPCLMULQDQ: the three streams only")
    _crc32c_fold(request.param == "fold")
    yield request.param
    _crc32c_fold(True)


@pytest.mark.parametrize("n", [*range(0, 80), *range(500, 530), 767, 768, 769, 4096, 100_003, 1_000_000])
@pytest.mark.parametrize("count", [0, 1, 2, 7, 100, 4800, 10**6])
def test_split_edges(n, count):
    data = os.urandom(n)
    assert _crc32c(data, count) == crc32c.crc32c(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=5000), st.integers(0, 15), st.integers(0, 5000))
def test_any_offset_and_steps(blob, offset, count):
    data = memoryview(bytes(16) + blob)[offset:]  # every alignment
    assert _crc32c(data, count) == crc32c.crc32c(data)


def batch(count, value_size=100, seed=0):
    rng = random.Random(seed)
    recs = [Record(i, 1_700_000_000_000 + i, None, rng.randbytes(value_size)) for i in range(count)]
    return bytearray(build_batch(recs))


def fast(buf):
    return validate_and_assign(buf, 0, 0, 10**9, INT64_MIN, INT64_MAX, None, False)


@pytest.mark.parametrize("count,value_size", [(1, 0), (1, 5), (1, 100), (2, 3), (3, 200), (40, 1), (4800, 100),
                                              (300, 3000)])
def test_batches_pass_and_any_flip_is_refused(count, value_size):
    good = batch(count, value_size, seed=count)
    assert fast(bytearray(good)) is not None
    rng = random.Random(count * 7 + value_size)
    # Flips in the CRC'd span (21..end) and in the stored CRC: every batch is refused.
    positions = {17, 20, 21, 22, 60, 61, len(good) - 1, len(good) // 3, 2 * len(good) // 3}
    positions |= {rng.randrange(17, len(good)) for _ in range(40)}
    for pos in sorted(positions):
        bad = bytearray(good)
        bad[pos] ^= 1 << rng.randrange(8)
        assert fast(bad) is None, pos


def test_batches_back_to_back():
    buf = bytearray(b"".join(batch(n, 50, seed=n) for n in (1, 4800, 3, 700)))
    assert fast(bytearray(buf)) is not None
    bad = bytearray(buf)
    bad[-1] ^= 0x40
    assert fast(bad) is None
