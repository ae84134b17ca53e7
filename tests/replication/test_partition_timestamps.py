"""CreateTime limits on produce (KIP-937): ``message.timestamp.before.max.ms`` and
``message.timestamp.after.max.ms`` (or the deprecated ``difference.max.ms`` for both) refuse a
batch whose header timestamps are too far from the broker's clock with INVALID_TIMESTAMP, and
nothing of the partition's records is appended."""

from __future__ import annotations

import uuid

import pytest

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.replication.partition import Partition
from odradek.replication.produce_validation import ProduceError
from odradek.storage.config import LogConfig
from tests.storage.helpers import T0, make_batch, open_log

NOW = T0
SECOND = 1000


def partition(tmp_path, **config) -> Partition:
    log = open_log(tmp_path, LogConfig(**config))
    return Partition("topic", 0, uuid.uuid4(), log, leader_id=1, isr=(1,))


def produce(part: Partition, *batches: list[int]):
    """Append one request holding a batch per list of record timestamps."""
    data = bytearray(b"".join(make_batch(0, len(ts), timestamps=ts) for ts in batches))
    return part.append_records_as_leader(memoryview(data), NOW)


def refused(part: Partition, *batches: list[int]) -> ProduceError:
    end = part.log_end_offset
    with pytest.raises(ProduceError) as e:
        produce(part, *batches)
    assert e.value.error == ErrorCode.INVALID_TIMESTAMP == 32
    assert part.log_end_offset == end  # nothing of the request was appended
    return e.value


def test_before_max_ms_bounds_how_old_a_timestamp_may_be(tmp_path):
    part = partition(tmp_path, message_timestamp_before_max_ms=SECOND)
    assert produce(part, [NOW - SECOND]).base_offset == 0
    error = refused(part, [NOW - SECOND - 1])
    assert str(NOW - SECOND - 1) in str(error) and f"[{NOW - SECOND}, +inf]" in str(error)
    assert produce(part, [NOW + 10**9]).base_offset == 1  # no limit the other way


def test_after_max_ms_bounds_how_far_ahead_a_timestamp_may_be(tmp_path):
    part = partition(tmp_path, message_timestamp_after_max_ms=SECOND)
    assert produce(part, [NOW + SECOND]).base_offset == 0
    error = refused(part, [NOW + SECOND + 1])
    assert f"[-inf, {NOW + SECOND}]" in str(error)
    assert produce(part, [0]).base_offset == 1  # no limit the other way


def test_the_deprecated_difference_applies_where_a_new_limit_is_unset(tmp_path):
    part = partition(tmp_path, message_timestamp_difference_max_ms=SECOND)
    refused(part, [NOW - SECOND - 1])
    refused(part, [NOW + SECOND + 1])
    assert produce(part, [NOW - SECOND], [NOW + SECOND]).last_offset == 1
    loose_after = partition(tmp_path / "b", message_timestamp_difference_max_ms=SECOND,
                            message_timestamp_after_max_ms=60 * SECOND)
    refused(loose_after, [NOW - SECOND - 1])
    assert produce(loose_after, [NOW + 60 * SECOND]).base_offset == 0


def test_every_record_is_checked_against_the_future_bound(tmp_path):
    # The batch's max timestamp is the largest of all its records.
    part = partition(tmp_path, message_timestamp_after_max_ms=SECOND)
    refused(part, [NOW, NOW + 5 * SECOND, NOW])


def test_a_later_record_below_the_base_timestamp_is_not_checked(tmp_path):
    # Only the header is read: the base timestamp is the first record's; a later record's
    # smaller timestamp is a negative delta inside the batch, which is not decoded.
    part = partition(tmp_path, message_timestamp_before_max_ms=SECOND)
    assert produce(part, [NOW, NOW - 60 * SECOND]).last_offset == 1
    refused(part, [NOW - 60 * SECOND, NOW])


def test_one_bad_batch_refuses_the_whole_request(tmp_path):
    part = partition(tmp_path, message_timestamp_before_max_ms=SECOND)
    refused(part, [NOW], [NOW - 2 * SECOND], [NOW])
    assert part.log_end_offset == 0 and part.high_watermark == 0


def test_records_without_timestamps_are_not_checked(tmp_path):
    part = partition(tmp_path, message_timestamp_before_max_ms=0, message_timestamp_after_max_ms=0)
    assert produce(part, [-1, -1]).last_offset == 1
    assert produce(part, [NOW]).base_offset == 2
    refused(part, [NOW - 1])


def test_log_append_time_topics_are_not_checked(tmp_path):
    part = partition(tmp_path, message_timestamp_type="LogAppendTime", message_timestamp_difference_max_ms=0,
                     message_timestamp_before_max_ms=0, message_timestamp_after_max_ms=0)
    result = produce(part, [0], [NOW + 10**9])
    assert (result.last_offset, result.log_append_time) == (1, NOW)


def test_by_default_any_timestamp_is_accepted(tmp_path):
    part = partition(tmp_path)
    assert produce(part, [0], [-(2**63)], [2**63 - 1], [NOW]).last_offset == 3


def test_a_changed_config_applies_to_the_next_request(tmp_path):
    part = partition(tmp_path)
    assert produce(part, [NOW - 60 * SECOND]).base_offset == 0
    part.log.update_config(LogConfig(message_timestamp_before_max_ms=SECOND))
    refused(part, [NOW - 60 * SECOND])
