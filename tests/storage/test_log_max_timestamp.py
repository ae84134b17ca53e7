"""``Log.max_timestamp``: the record holding the largest timestamp, not its batch's last
offset (ListOffsets MAX_TIMESTAMP since Kafka 3.8, KAFKA-16310), whatever offset the time
index kept for it (the batch's last offset, for batches appended before records were read)."""

from odradek.storage.append_info import TimestampOffset
from odradek.storage.config import LogConfig
from tests.storage.helpers import T0, append, open_log


def test_the_first_record_with_the_largest_timestamp(tmp_path):
    log = open_log(tmp_path, LogConfig(index_interval_bytes=1))
    append(log, 3, timestamps=[T0 + 50, T0 + 10, T0 + 20])
    append(log, 4, timestamps=[T0 + 5, T0 + 60, T0 + 30, T0 + 60])
    append(log, 2, timestamps=[T0 + 1, T0 + 2])
    assert log.max_timestamp() == TimestampOffset(T0 + 60, 4)


def test_across_segments_and_after_reopening(tmp_path):
    log = open_log(tmp_path, LogConfig(segment_bytes=300, index_interval_bytes=1))
    for i in range(6):
        append(log, 3, timestamps=[T0 + 10 * i, T0 + 10 * i + (7 if i == 2 else 1), T0 + 10 * i])
    assert len(log.segments) > 2
    assert log.max_timestamp() == TimestampOffset(T0 + 51, 16)
    log.close()
    log = open_log(tmp_path, LogConfig(segment_bytes=300, index_interval_bytes=1))
    assert log.max_timestamp() == TimestampOffset(T0 + 51, 16)


def test_none_in_an_empty_log(tmp_path):
    assert open_log(tmp_path).max_timestamp() == TimestampOffset(-1, -1)
