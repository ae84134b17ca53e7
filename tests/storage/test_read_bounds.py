"""Reads bounded by ``max_offset`` (the high watermark for consumers), against a model.

Kafka's read with ``FetchIsolation.HIGH_WATERMARK`` serves only batches entirely below the
high watermark: a batch straddling it (base below, last offset at or above) is not served,
whatever ``max_bytes`` and ``minOneMessage`` say, because a follower may not have it yet and a
new leader may truncate it away. The model: from the batch holding the offset, the longest
run of whole batches of one segment that fits ``max_bytes`` (at least the first when
``min_one``), cut before the first batch whose last offset reaches ``max_offset``.
"""

from __future__ import annotations

import random

import pytest

from odradek.storage.config import LogConfig
from tests.storage.helpers import append, open_log, region_batches


def _expected(layout, offset: int, max_bytes: int, max_offset: int, min_one: bool):
    """(base, last) of the batches a bounded read from ``offset`` returns, per the model;
    ``layout`` lists each segment's batches as (base, last, size)."""
    for batches in layout:
        run = [b for b in batches if b[1] >= offset]
        if not run:
            continue
        out, used = [], 0
        for base, last, size in run:
            if last >= max_offset:
                break
            if used + size > max_bytes and not (min_one and not out):
                break
            out.append((base, last))
            used += size
        return out
    return []


def _layout(log):
    return [[(h.base_offset, h.last_offset, h.size) for _, h in s.iter_batches()] for s in log.segments]


@pytest.mark.parametrize("seed", range(4))
def test_bounded_reads_serve_only_batches_entirely_below_max_offset(tmp_path, seed):
    rng = random.Random(seed)
    log = open_log(tmp_path, LogConfig(segment_bytes=600, index_interval_bytes=100))
    for _ in range(30):
        append(log, rng.randint(1, 4), value_size=rng.randint(5, 60))
    layout = _layout(log)
    assert len(layout) > 3
    for _ in range(300):
        max_offset = rng.randint(1, log.log_end_offset)
        offset = rng.randint(0, log.log_end_offset)
        max_bytes = rng.choice([1, 50, 150, 400, 1 << 20])
        min_one = rng.random() < 0.7
        region = log.read(offset, max_bytes, max_offset, min_one)
        got = [(b.base_offset, b.last_offset) for b in region_batches(region)]
        case = (offset, max_bytes, max_offset, min_one)
        assert got == _expected(layout, *case), case
        assert all(last < max_offset for _, last in got)


def test_a_batch_straddling_max_offset_is_not_served_even_as_the_one_batch(tmp_path):
    log = open_log(tmp_path)
    append(log, 2)
    append(log, 2)  # [2, 3]
    for max_bytes in (1, 1 << 20):  # below its size (min_one would force it out) and above
        assert log.read(2, max_bytes, max_offset=3, min_one=True).length == 0
        assert [b.last_offset for b in region_batches(log.read(0, max_bytes, max_offset=3))] == [1]
