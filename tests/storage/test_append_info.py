"""LogAppendInfo and AppendResult: small immutable values with checked offsets."""

import pytest

from odradek.records.builder import build_batch
from odradek.records.record import Record
from odradek.storage.append_info import AppendResult, LogAppendInfo


def test_append_info_keeps_its_fields_and_defaults():
    info = LogAppendInfo(10, 14)
    assert (info.first_offset, info.last_offset) == (10, 14)
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (-1, -1)
    assert info.offset_count == 5
    assert LogAppendInfo(first_offset=3, last_offset=3, max_timestamp=7, offset_of_max_timestamp=3) == (3, 3, 7, 3)


@pytest.mark.parametrize("first,last", [(-1, 4), (5, 4)])
def test_append_info_refuses_an_impossible_offset_range(first, last):
    with pytest.raises(ValueError):
        LogAppendInfo(first, last)


def test_append_info_is_immutable():
    info = LogAppendInfo(1, 2)
    with pytest.raises(AttributeError):
        info.first_offset = 0  # type: ignore[misc]


def test_append_info_from_batches_summarizes_headers():
    data = build_batch([Record(offset=i, timestamp=1000 + i, key=None, value=b"v") for i in range(3)])
    info = LogAppendInfo.from_batches(data)
    assert (info.first_offset, info.last_offset, info.max_timestamp) == (0, 2, 1002)


def test_append_result_fields():
    result = AppendResult(0, 4, 0, 5)
    assert result.log_end_offset == 5 and result.first_offset == 0
