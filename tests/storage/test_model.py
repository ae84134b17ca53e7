"""Random operation sequences checked against an in-memory model of the log (opfuzz).

The model keeps the batches (base offset, last offset, records) the log must hold, the log
start and end offsets; after every operation everything readable must equal the model's
records at or above the log start offset.
"""

import random

import pytest

from odradek.records.reader import iter_batches
from odradek.storage.append_info import LogAppendInfo
from odradek.storage.cleaner import LogCleaner
from odradek.storage.clock import FakeClock
from odradek.storage.config import LogConfig
from odradek.storage.file_handle_cache import FileHandleCache
from tests.storage.helpers import T0, make_batch, open_log, read_records

CONFIG = LogConfig(
    segment_bytes=700,
    index_interval_bytes=150,
    segment_index_bytes=64,
    retention_bytes=600,  # below the sizes the operations reach, so retention deletes
    retention_ms=-1,
    cleanup_policy=("compact", "delete"),
    delete_retention_ms=10**12,
)
KEYS = [b"k%d" % i for i in range(6)]


class Model:
    def __init__(self):
        self.batches = []  # [base, last, [(offset, key, value)]]
        self.start = 0
        self.end = 0

    def visible(self):
        return [r for _, _, recs in self.batches for r in recs if r[0] >= self.start]

    def truncate(self, offset, first_base):
        if offset >= self.end:
            return
        if offset < self.start or offset <= first_base:
            self.batches, self.start, self.end = [], offset, offset
            return
        cut = [b for b in self.batches if b[1] >= offset]
        self.batches = [b for b in self.batches if b[1] < offset]
        self.end = max(min([offset] + [b[0] for b in cut[:1]]), self.start)

    def compact(self, end_offset):
        latest = {}
        for _, _, recs in self.batches:
            for off, key, _ in recs:
                if off < end_offset:
                    latest[key] = off
        kept = []
        for base, last, recs in self.batches:
            recs = [r for r in recs if r[0] >= end_offset or latest.get(r[1]) == r[0]]
            if recs:
                kept.append([base, last, recs])
        self.batches = kept


def model_retention(layout, start, retention_bytes):
    """How many leading segments of ``layout`` ((base offset, size) pairs, the last one
    active) retention deletes, as Kafka's ``UnifiedLog.deleteOldSegments`` decides with
    retention.ms off: first those whose successor starts at or below the log start offset,
    then, while the log exceeds retention.bytes by at least the oldest remaining segment's
    size, that segment; never the active segment."""
    count = 0
    while count < len(layout) - 1 and layout[count + 1][0] <= start:
        count += 1
    diff = sum(size for _, size in layout[count:]) - retention_bytes
    while count < len(layout) - 1 and diff >= layout[count][1]:
        diff -= layout[count][1]
        count += 1
    return count


def check(log, model, rng):
    assert (log.log_start_offset, log.log_end_offset) == (model.start, model.end)
    assert read_records(log) == model.visible()
    for _ in range(3):
        if model.end == model.start:
            break
        offset = rng.randrange(model.start, model.end)
        limit = rng.choice([1, 200, 900])
        region = log.read(offset, limit)
        batches = list(iter_batches(region.read()))
        if not batches:
            assert not any(b[1] >= offset for b in model.batches)
            continue
        expected = [b for b in model.batches if b[1] >= offset]
        assert [(b.base_offset, b.last_offset) for b in batches] == [
            (b[0], b[1]) for b in expected[: len(batches)]
        ]
        assert region.length <= limit or len(batches) == 1


def run(tmp_path, seed, steps):
    rng = random.Random(seed)
    clock = FakeClock(T0)
    cache = FileHandleCache(8)
    log = open_log(tmp_path, CONFIG, clock, cache)
    model = Model()
    for step in range(steps):
        op = rng.choices(
            ["append", "gap", "roll", "truncate", "delete_records", "retention", "clean",
             "restart", "crash"],
            weights=[40, 3, 4, 5, 4, 4, 4, 3, 3],
        )[0]
        if op in ("append", "gap"):
            base = model.end + (rng.randint(1, 5) if op == "gap" else 0)
            n = rng.randint(1, 4)
            keys = [rng.choice(KEYS) for _ in range(n)]
            values = [None if rng.random() < 0.1 else b"s%d-%d" % (step, i) for i in range(n)]
            data = make_batch(base, n, T0 + step, keys=keys, values=values,
                              compression=rng.choice([0, 0, 0, 3, 4]))
            log.append(data, LogAppendInfo.from_batches(data))
            model.batches.append([base, base + n - 1, list(zip(range(base, base + n), keys, values))])
            model.end = base + n
        elif op == "roll":
            log.roll()
        elif op == "truncate":
            offset = rng.randint(max(model.start - 2, 0), model.end + 1)
            first_base = log.segments[0].base_offset
            log.truncate_to(offset)
            model.truncate(offset, first_base)
        elif op == "delete_records":
            offset = rng.randint(model.start, model.end)
            log.delete_records(offset)
            model.start = max(model.start, offset)
        elif op == "retention":
            layout = [(s.base_offset, s.size) for s in log.segments]
            deleted = model_retention(layout, model.start, CONFIG.retention_bytes)
            assert log.delete_old_segments(clock.milliseconds()) == deleted
            assert [s.base_offset for s in log.segments] == [b for b, _ in layout[deleted:]]
            if deleted:
                model.start = max(model.start, layout[deleted][0])
        elif op == "clean":
            stats = LogCleaner().clean(log, clock.milliseconds(), force=True)
            if stats is not None:
                model.compact(stats.end_offset)
        elif op in ("restart", "crash"):
            point = log.recovery_point if op == "crash" else 0
            if op == "restart":
                log.close()
            else:
                log.abandon()
            log = open_log(tmp_path, CONFIG, clock, cache, clean_shutdown=op == "restart",
                           recovery_point=point, log_start_offset=model.start)
            # Loading may raise the start to the first segment's base offset (as Kafka
            # does) and read the end back as the offset after the last batch, but only
            # across offsets that hold nothing.
            visible = model.visible()
            assert all(log.log_start_offset <= r[0] < log.log_end_offset for r in visible)
            assert log.log_end_offset <= model.end
            if log.log_end_offset < model.end:
                assert max([b[1] + 1 for b in model.batches], default=0) <= log.log_end_offset
            model.start, model.end = log.log_start_offset, log.log_end_offset
        clock.advance(1)
        check(log, model, rng)
    log.close()


@pytest.mark.parametrize("seed", range(8))
def test_random_operation_sequences(tmp_path, seed):
    run(tmp_path, seed, 120)
