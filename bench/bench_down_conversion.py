#!/usr/bin/env python3
"""The cost of down-conversion: the same log read by Fetch v12 (batches as stored, sendfile),
v3 (magic 1) and v1 (magic 0), broker CPU per record and per MB.

Run: ``.venv/bin/python bench/bench_down_conversion.py`` (about half a minute). An odradek
broker in a child process gets ``--records`` records of ``--value-size`` bytes (keys of 8
bytes, hex values: gzip halves them) in batches of 1000, one topic uncompressed and one gzip;
then each topic is read from offset 0 to its end, one fetch at a time with ``--max-bytes``
per partition, by each Fetch version, ``--reps`` times in alternation. Reported per codec and
version (medians): records/s as the client sees it, broker CPU seconds (per-thread
``schedstat``, ``harness/proc_stats.py``) per MB of the log read and per million records,
and the bytes the broker sent. Every read is checked: all records, offsets contiguous.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness.proc_stats import cpu_seconds  # noqa: E402
from odradek.protocol import codec  # noqa: E402
from odradek.records import compression as codecs  # noqa: E402
from odradek.records.batch import iter_batch_positions, read_header  # noqa: E402
from odradek.records.builder import BatchSpec, build_batch  # noqa: E402
from odradek.records.legacy import LegacyBatch, read_message  # noqa: E402
from odradek.records.record import Record  # noqa: E402
from odradek.testing.broker import BrokerProcess  # noqa: E402

VERSIONS = (12, 3, 1)  # v2 batches as stored; magic 1; magic 0
BATCH = 1000
_ENTRY = struct.Struct(">qi")  # a legacy entry's offset and message size


class Client:
    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)))
        self.correlation_id = 0

    def request(self, name: str, version: int, body):
        self.correlation_id += 1
        mod = codec.module(name + "Request")
        header = codec.RequestHeader(mod.API_KEY, version, self.correlation_id, "bench-downconv")
        payload = codec.encode_request(header, body)
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", self._recv(4))[0]
        return codec.decode_response(mod.API_KEY, version, self._recv(size))[1]

    def _recv(self, n: int) -> bytes:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:])
            if not k:
                raise ConnectionError("closed by broker")
            got += k
        return bytes(buf)


def load(client: Client, topic: str, records: int, value_size: int, codec_id: int) -> int:
    m = codec.module("CreateTopicsRequest")
    client.request("CreateTopics", 5, m.MESSAGE(topics=[m.CreatableTopic(
        name=topic, num_partitions=1, replication_factor=1)], timeout_ms=5000))
    p = codec.module("ProduceRequest")
    stored = 0
    for base in range(0, records, BATCH):
        batch = build_batch(
            [Record(i - base, 1_700_000_000_000 + i, b"%08d" % i, os.urandom(value_size // 2).hex().encode())
             for i in range(base, min(base + BATCH, records))],
            BatchSpec(base_offset=0, compression=codec_id))
        stored += len(batch)
        resp = client.request("Produce", 9, p.MESSAGE(acks=1, timeout_ms=30000, topic_data=[
            p.TopicProduceData(name=topic, partition_data=[p.PartitionProduceData(index=0, records=batch)])]))
        error = resp.responses[0].partition_responses[0].error_code
        assert error == 0, error
    return stored


def count(records: bytes, version: int) -> tuple[int, int]:
    """(records, next offset) of a fetched partition's records. Legacy sets are walked by
    their size fields (only wrappers are parsed, to open them), so the client's cost stays
    far below the broker's."""
    if version >= 4:
        headers = [read_header(records, pos) for pos, _ in iter_batch_positions(records)]
        return sum(h.records_count for h in headers), headers[-1].next_offset
    n, last = 0, -1
    for pos, size, offset, attributes in _entries(records):
        if attributes & 0x07:
            inner = LegacyBatch(read_message(records, pos, size)).inner_messages()
            n += len(inner)
        else:
            n += 1
        last = offset
    return n, last + 1


def _entries(buf: bytes):
    """(position, size, offset, attributes) of each whole entry of a message set."""
    pos, end = 0, len(buf)
    while end - pos >= 18:
        offset, message_size = _ENTRY.unpack_from(buf, pos)
        size = 12 + message_size
        if pos + size > end:
            return
        yield pos, size, offset, buf[pos + 17]
        pos += size


def read_all(client: Client, topic: str, end: int, version: int, max_bytes: int) -> tuple[int, int]:
    """Fetch ``topic`` from 0 to ``end``; (records read, bytes received)."""
    m = codec.module("FetchRequest")
    offset = n = received = 0
    while offset < end:
        body = m.MESSAGE(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes, topics=[
            m.FetchTopic(topic=topic, partitions=[
                m.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=max_bytes)])])
        part = client.request("Fetch", version, body).responses[0].partitions[0]
        assert part.error_code == 0, part.error_code
        got, next_offset = count(part.records, version)
        assert next_offset > offset
        n += got
        received += len(part.records)
        offset = next_offset
    assert n == end, (n, end)
    return n, received


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--max-bytes", type=int, default=1 << 20)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp, BrokerProcess(Path(tmp) / "data") as broker:
        client = Client(broker.bootstrap)
        for name, codec_id in (("none", codecs.NONE), ("gzip", codecs.GZIP)):
            stored = load(client, f"downconv-{name}", args.records, args.value_size, codec_id)
            runs: dict[int, list[tuple[float, float, int]]] = {v: [] for v in VERSIONS}
            for _ in range(args.reps):
                for version in VERSIONS:
                    cpu0, t0 = cpu_seconds(broker.pid), time.perf_counter()
                    _, received = read_all(client, f"downconv-{name}", args.records, version, args.max_bytes)
                    runs[version].append((time.perf_counter() - t0, cpu_seconds(broker.pid) - cpu0, received))
            for version in VERSIONS:
                seconds = statistics.median(r[0] for r in runs[version])
                cpu = statistics.median(r[1] for r in runs[version])
                rows.append((name, version, args.records / seconds, cpu / (stored / 1e6),
                             cpu / (args.records / 1e6), runs[version][0][2] / 1e6, stored / 1e6))
    print(f"{args.records:,} records of {args.value_size} B (+8 B keys), {args.max_bytes:,} B per fetch, "
          f"median of {args.reps}")
    print("| codec | Fetch version (format) | records/s | broker CPU-s per MB of log | "
          "broker CPU-s per M records | MB sent (log MB) |")
    print("|---|---|---|---|---|---|")
    for name, version, rate, per_mb, per_m, sent, log_mb in rows:
        fmt = {12: "v2 batches, as stored", 3: "magic 1", 1: "magic 0"}[version]
        print(f"| {name} | v{version} ({fmt}) | {rate:,.0f} | {per_mb:.4f} | {per_m:.2f} | "
              f"{sent:.1f} ({log_mb:.1f}) |")


if __name__ == "__main__":
    main()
