"""``Log.batch_headers``: the headers a producer-state replay reads, from the batch holding
the start offset on; within its segment the walk starts where the offset index points, not at
the segment's first batch."""

from odradek.storage.config import LogConfig
from tests.storage.helpers import append, open_log


def test_batch_headers_from_any_offset_are_those_holding_it_and_after(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_bytes=2000, index_interval_bytes=1))
    for _ in range(40):
        append(log, count=2)  # offsets 0-79, several segments
    assert len(log.segments) > 2
    every = [(h.base_offset, h.last_offset) for h in log.batch_headers(0)]
    assert every == [(2 * i, 2 * i + 1) for i in range(40)]
    for start in range(81):
        assert [(h.base_offset, h.last_offset) for h in log.batch_headers(start)] == every[start // 2:]
    log.close()


def test_the_walk_in_the_segment_holding_the_start_begins_at_the_indexed_batch(tmp_path, monkeypatch):
    log = open_log(tmp_path, LogConfig(index_interval_bytes=1))
    for _ in range(20):
        append(log, count=2)  # one segment, every batch indexed
    segment = log.segments[0]
    positions = []
    walk = type(segment).iter_batches

    def recording(self, start=0):
        positions.append(start)
        return walk(self, start)

    monkeypatch.setattr(type(segment), "iter_batches", recording)
    headers = list(log.batch_headers(30))
    assert headers[0].base_offset == 30 and len(headers) == 5
    assert positions == [segment.translate_offset(30)[0]] and positions[0] > 0
    log.close()
