"""A ShareFetch reads the log up to MaxBytes, but parses batch headers only as far as an
acquisition can reach (the in-flight window's end plus MaxRecords): on a backlog of
one-record batches, parsing every header of megabytes per fetch cost more than the fetch."""

from __future__ import annotations

from odradek.server.share.delayed_share_fetch import _headers_to_acquire
from odradek.storage.file_handle_cache import SegmentFile
from odradek.storage.file_region import FileRegion
from tests.storage.helpers import make_batch


def _region(tmp_path, batches: int) -> FileRegion:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"".join(make_batch(offset) for offset in range(batches)))
    file = SegmentFile(str(path))
    return FileRegion(file, 0, path.stat().st_size, 0)


def test_the_scan_stops_at_the_first_batch_reaching_the_limit(tmp_path):
    region = _region(tmp_path, 1000)
    headers = _headers_to_acquire(region, 10)
    assert [h.base_offset for _, h in headers] == list(range(11))


def test_a_region_ending_before_the_limit_is_scanned_whole(tmp_path):
    region = _region(tmp_path, 5)
    assert [h.base_offset for _, h in _headers_to_acquire(region, 100)] == list(range(5))
