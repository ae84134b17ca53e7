"""``odradek dump-log`` on segments a broker wrote (plain and compressed batches, headers,
its offset and time indexes), with control batches appended, legacy message sets, and
damaged files."""

from __future__ import annotations

import json
import shutil
import struct

import pytest

from odradek.client import AdminClient, NewTopic, Producer
from odradek.records import compression as codecs
from odradek.records.control import ABORT, COMMIT, build_end_txn_marker_batch
from odradek.records.legacy import build_message_set
from odradek.records.record import Record
from odradek.testing.broker import InProcessBroker
from tests.cli.conftest import run_cli

TOPIC = "dumped"
CODECS = ("gzip", "snappy", "lz4", "zstd")
PER_BATCH = 20
SEGMENT = f"{0:020d}"


@pytest.fixture(scope="module")
def partition_dir(tmp_path_factory):
    """A partition a broker wrote and closed (so its indexes are on disk): one batch of keyed
    records with headers, then one batch per codec; index entries every 100 bytes."""
    data = tmp_path_factory.mktemp("dump") / "data"
    with InProcessBroker(data, node_id=1000) as broker:
        with AdminClient(broker.bootstrap) as admin:
            admin.create_topics([NewTopic(TOPIC, 1, 1, configs={"index.interval.bytes": "100"})])
        with Producer(broker.bootstrap, linger_ms=50) as producer:
            for i in range(PER_BATCH):
                producer.send(TOPIC, f"plain {i}".encode(), key=f"k{i}".encode(), headers=[("h", b"v"), ("n", None)])
            producer.flush()
        for codec in CODECS:
            with Producer(broker.bootstrap, linger_ms=50, compression_type=codec) as producer:
                for i in range(PER_BATCH):
                    producer.send(TOPIC, f"{codec} {i} ".encode() * 4)
                producer.flush()
    return data / f"{TOPIC}-0"


def dump(*args: str):
    return run_cli("dump-log", *args)


def test_log_lists_batches_and_records(partition_dir):
    log = partition_dir / f"{SEGMENT}.log"
    result = dump("--files", str(log))
    assert result.code == 0, result.err
    lines = result.lines()
    assert lines[:2] == [f"Dumping {log}", "Log starting offset: 0"]
    batches = [line for line in lines if line.startswith("baseOffset:")]
    assert len(batches) == 1 + len(CODECS)
    assert [b.split("compresscodec: ")[1].split()[0] for b in batches] == ["none", *CODECS]
    assert all("isvalid: true" in b and "isControl: false" in b and "magic: 2" in b for b in batches)
    assert batches[1].startswith(f"baseOffset: {PER_BATCH} lastOffset: {2 * PER_BATCH - 1} count: {PER_BATCH}")
    records = [line for line in lines if line.startswith("| offset:")]
    assert len(records) == PER_BATCH * (1 + len(CODECS))
    assert records[0].startswith("| offset: 0 CreateTime: ")
    assert "keySize: 2 valueSize: 7 sequence: 0 headerKeys: [h,n]" in records[0]
    assert "payload" not in records[0]
    assert lines[-1] == f"{1 + len(CODECS)} batches, {PER_BATCH * (1 + len(CODECS))} records"


def test_print_data_log_shows_keys_values_and_headers(partition_dir):
    result = dump("--files", str(partition_dir / f"{SEGMENT}.log"), "--print-data-log")
    records = [line for line in result.lines() if line.startswith("| offset:")]
    assert records[3].endswith("key: k3 payload: plain 3 headers: h:v,n:null")
    assert records[PER_BATCH].endswith("key: null payload: " + "gzip 0 " * 4)
    assert records[-1].endswith("key: null payload: " + "zstd 19 " * 4)


def test_json_output(partition_dir):
    result = dump("--files", str(partition_dir / f"{SEGMENT}.log"), "--print-data-log", "--output", "json")
    docs = [json.loads(line) for line in result.lines()]
    batches = [d for d in docs if "base_offset" in d]
    records = [d for d in docs if "batch_position" in d]
    assert [b["compression"] for b in batches] == ["none", *CODECS]
    assert [r["offset"] for r in records] == list(range(PER_BATCH * (1 + len(CODECS))))
    assert records[0]["headers"] == [["h", "v"], ["n", None]]
    assert (records[0]["key"], records[0]["value"]) == ("k0", "plain 0")


def test_indexes_are_consistent_with_the_log(partition_dir):
    index, times = partition_dir / f"{SEGMENT}.index", partition_dir / f"{SEGMENT}.timeindex"
    assert index.stat().st_size > 0 and times.stat().st_size > 0
    result = dump("--files", f"{index},{times}")
    assert result.code == 0, result.out
    entries = [line for line in result.lines() if line.startswith("offset:")]
    assert len(entries) == index.stat().st_size // 8
    assert all(int(e.split()[1]) >= PER_BATCH for e in entries)  # the first batch needs no entry
    stamps = [line for line in result.lines() if line.startswith("timestamp:")]
    assert len(stamps) == times.stat().st_size // 12
    quiet = dump("--files", f"{index},{times}", "--verify-index-only")
    assert (quiet.code, quiet.out) == (0, "")


def with_control_batches(partition_dir, tmp_path):
    """A copy of the broker's segment with a COMMIT and an ABORT marker appended."""
    log = tmp_path / f"{SEGMENT}.log"
    shutil.copy(partition_dir / f"{SEGMENT}.log", log)
    end = PER_BATCH * (1 + len(CODECS))
    with open(log, "ab") as f:
        f.write(build_end_txn_marker_batch(COMMIT, 5, producer_id=77, producer_epoch=2, timestamp=1_700_000_000_000,
                                           base_offset=end))
        f.write(build_end_txn_marker_batch(ABORT, 6, producer_id=78, producer_epoch=0, timestamp=1_700_000_000_001,
                                           base_offset=end + 1))
    return log, end


def test_control_batches(partition_dir, tmp_path):
    log, end = with_control_batches(partition_dir, tmp_path)
    result = dump("--files", str(log))
    assert result.code == 0
    lines = result.lines()
    controls = [line for line in lines if "isControl: true" in line]
    assert len(controls) == 2
    assert controls[0].startswith(f"baseOffset: {end} lastOffset: {end} count: 1")
    assert "producerId: 77 producerEpoch: 2" in controls[0] and "isTransactional: true" in controls[0]
    markers = [line for line in lines if "endTxnMarker" in line]
    assert markers[0].startswith(f"| offset: {end} CreateTime: 1700000000000 keySize: 4 valueSize: 6")
    assert markers[0].endswith("endTxnMarker: COMMIT coordinatorEpoch: 5")
    assert markers[1].endswith("endTxnMarker: ABORT coordinatorEpoch: 6")
    docs = [json.loads(line) for line in dump("--files", str(log), "--output", "json").lines()]
    assert [d["control"] for d in docs if "control" in d] == [{"type": "COMMIT", "coordinator_epoch": 5},
                                                              {"type": "ABORT", "coordinator_epoch": 6}]


def test_legacy_message_sets(tmp_path):
    log = tmp_path / f"{SEGMENT}.log"
    plain = [Record(0, -1, b"k", b"v0 plain")]
    wrapped = [Record(1, 1000, None, b"v1 a"), Record(2, 2000, b"k2", b"v1 b")]
    log.write_bytes(build_message_set(plain, 0) + build_message_set(wrapped, 1, codecs.GZIP))
    result = dump("--files", str(log), "--print-data-log")
    assert result.code == 0, result.out
    lines = result.lines()
    assert lines[2].startswith("baseOffset: 0 lastOffset: 0 count: 1 position: 0") and "magic: 0" in lines[2]
    assert lines[3].endswith("key: k payload: v0 plain")
    assert "magic: 1 compresscodec: gzip" in lines[4] and lines[4].startswith("baseOffset: 1 lastOffset: 2 count: 2")
    assert lines[5].startswith("| offset: 1 CreateTime: 1000") and lines[6].endswith("key: k2 payload: v1 b")


def test_damage_is_reported_and_fails(partition_dir, tmp_path):
    log = tmp_path / f"{SEGMENT}.log"
    data = bytearray((partition_dir / f"{SEGMENT}.log").read_bytes())
    data[70] ^= 0xFF  # inside the first batch's records: its CRC no longer matches
    log.write_bytes(bytes(data) + b"\x00" * 10)
    result = dump("--files", str(log))
    assert result.code == 1
    assert result.err == "odradek dump-log: found 2 problem(s) in 1 file(s)\n"
    lines = result.lines()
    assert f"{log}: invalid batch at position 0: record batch CRC mismatch" in lines
    assert any(line.startswith("baseOffset: 0 ") and line.endswith("isvalid: false") for line in lines)
    assert f"{log}: Found 10 invalid bytes at the end of {log.name}: 10 bytes at position {len(data)} " \
           "are too few for a batch header" in lines
    assert sum(1 for line in lines if line.startswith("baseOffset:")) == 1 + len(CODECS)


def test_index_mismatches_are_reported(partition_dir, tmp_path):
    shutil.copy(partition_dir / f"{SEGMENT}.log", tmp_path / f"{SEGMENT}.log")
    index, times = tmp_path / f"{SEGMENT}.index", tmp_path / f"{SEGMENT}.timeindex"
    index.write_bytes(struct.pack(">ii", PER_BATCH, 1) + struct.pack(">ii", 10_000, 10_000_000))
    times.write_bytes(struct.pack(">qi", 5, PER_BATCH) + b"\x01")
    result = dump("--files", f"{index},{times}", "--verify-index-only")
    assert result.code == 1
    assert result.out.splitlines() == [
        f"{index}: index mismatch at offset: {PER_BATCH} position: 1: position 1 is not the start of a batch",
        f"{index}: index mismatch at offset: 10000 position: 10000000: position 10000000 is not the start of a batch",
        f"{times}: 1 bytes at the end are not a whole entry",
        f"{times}: index mismatch at timestamp: 5 offset: {PER_BATCH}: the largest timestamp up to offset "
        f"{PER_BATCH} is " + str(max_timestamp_through(partition_dir, 2)),
    ]


def max_timestamp_through(partition_dir, batches: int) -> int:
    docs = [json.loads(line) for line in
            run_cli("dump-log", "--files", str(partition_dir / f"{SEGMENT}.log"), "--output", "json").lines()]
    return max([d["max_timestamp"] for d in docs if "base_offset" in d][:batches])


def test_file_errors(tmp_path):
    missing = dump("--files", str(tmp_path / "nope.log"))
    assert (missing.code, missing.err) == (1, f"odradek dump-log: {tmp_path / 'nope.log'}: no such file\n")
    other = tmp_path / "x.snapshot"
    other.write_bytes(b"")
    assert "not a .log, .index or .timeindex file" in dump("--files", str(other)).err
    badly_named = tmp_path / "segment.index"
    badly_named.write_bytes(b"")
    assert "named by its segment's base offset" in dump("--files", str(badly_named)).err
    alone = tmp_path / f"{SEGMENT}.index"
    alone.write_bytes(struct.pack(">ii", 3, 100))
    unverified = dump("--files", str(alone))
    assert unverified.code == 0 and "(no 00000000000000000000.log beside it: not verified)" in unverified.out
    assert "is not beside it" in dump("--files", str(alone), "--verify-index-only").err
    garbage = tmp_path / f"{1:020d}.log"
    garbage.write_bytes(b"\x00" * 16 + b"\x07" + b"\x00" * 50)
    result = dump("--files", str(garbage))
    assert result.code == 1 and "unknown magic 7 at position 0" in result.out
