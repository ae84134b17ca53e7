"""A follower's append: the leader's batches, copied verbatim (Kafka's ``Log.appendAsFollower``).

A follower never assigns anything: offsets, leader epochs, timestamps and CRCs are the
leader's, so the bytes on disk are the same on every replica and truncation can compare logs
by epoch alone (``replication/truncation.py``). What the follower does check:

- the bytes split into whole v2 batches (a fetch response may end with a cut batch: that tail
  is left for the next fetch, never appended);
- each batch's CRC-32C and header (``records.batch.validate``): a batch damaged on the way is
  refused, not stored;
- offsets only go up: the first batch starts at or after the log end offset, each next one
  after the previous one's last offset (gaps are allowed: a compacted leader log has them).

Then the bytes go to ``Log.append`` as they are, which records each batch's partition leader
epoch in the leader epoch cache (``LeaderEpochFileCache.assign_appended``), and every batch's
header goes to the producer state unchecked (Kafka's origin "replication"), so that a follower
that becomes leader knows each idempotent producer's last sequences and refuses duplicates
exactly as the old leader would have, and knows the open transactions (the LSO) and the
aborted ones (the markers' entries in its own ``.txnindex``).
"""

from __future__ import annotations

from odradek.records import batch as rb
from odradek.replication.transactions import update_follower_producers
from odradek.storage.append_info import LogAppendInfo
from odradek.storage.errors import InvalidAppendOffsetError


def whole_batches(records) -> tuple[object, list[rb.BatchHeader]]:
    """``(bytes, headers)``: the leading whole batches of ``records`` (a prefix of it) and
    their validated headers. Raises CorruptRecordError (``records.errors``) for a damaged
    batch or one not in the v2 format (a leader's log holds only v2: it converts legacy
    message sets on the way in)."""
    headers = []
    end = 0
    for pos, size in rb.iter_batch_positions(records):
        headers.append(rb.validate(records, pos, size))
        end = pos + size
    if end == len(records):
        return records, headers
    return memoryview(records)[:end], headers


def summarize(headers: list[rb.BatchHeader], log_end_offset: int) -> LogAppendInfo:
    """The append's ``LogAppendInfo`` from the batches' own headers, after checking that
    their offsets start at or after ``log_end_offset`` and increase (InvalidAppendOffsetError
    otherwise). The time index gets the last offset of the batch with the largest timestamp,
    as Kafka's follower append does."""
    expected = log_end_offset
    max_ts, max_ts_offset = rb.NO_TIMESTAMP, -1
    for header in headers:
        if header.base_offset < expected:
            raise InvalidAppendOffsetError(
                f"batch at offset {header.base_offset} does not follow offset {expected - 1}")
        last = header.base_offset + header.last_offset_delta
        if header.max_timestamp > max_ts:
            max_ts, max_ts_offset = header.max_timestamp, last
        expected = last + 1
    last_offset = expected - 1
    return LogAppendInfo(headers[0].base_offset, last_offset, max_ts,
                         max_ts_offset if max_ts_offset >= 0 else last_offset)


def append_as_follower(part, records) -> LogAppendInfo | None:
    """Append the whole batches of ``records`` to ``part``'s log verbatim and replay them into
    its producer state; their summary, or None when there was no whole batch. Raises
    CorruptRecordError / InvalidAppendOffsetError (nothing appended), OSError from the disk
    (the log unchanged, ``Log.append``'s contract), or the log's refusal of a too large
    append (``Log.append_refusal``)."""
    data, headers = whole_batches(records)
    if not headers:
        return None
    plog = part.log
    info = summarize(headers, plog.log_end_offset)
    refused = plog.append_refusal(len(data), info.first_offset, info.last_offset)
    if refused is not None:
        raise refused
    plog.append(data, info)
    update_follower_producers(part, data, headers)
    return info
