#!/usr/bin/env python3
"""Micro-benchmarks of the generated codec: ns per encode and decode.

Run: ``.venv/bin/python bench/bench_codec.py``. Messages: a Metadata response for 10 topics x
10 partitions (v12), a Produce request with one 1 MiB batch (v9), and a Fetch response with 8
partitions, each with 16 KiB of records (v12) and with a 64 MiB out-of-line file region.
"""

from __future__ import annotations

import time
import uuid

from rich.console import Console
from rich.table import Table

from odradek.protocol import codec
from odradek.protocol.primitives import EncodeBuffer


def per_call_ns(fn, min_seconds: float = 0.5) -> float:
    n = 1
    while True:
        start = time.perf_counter_ns()
        for _ in range(n):
            fn()
        elapsed = time.perf_counter_ns() - start
        if elapsed > min_seconds * 1e9:
            return elapsed / n
        n *= 4


def metadata_response():
    m = codec.module("MetadataResponse")
    topics = [
        m.MetadataResponseTopic(name=f"topic-{t}", topic_id=uuid.uuid4(), partitions=[
            m.MetadataResponsePartition(partition_index=p, leader_id=1, leader_epoch=0,
                                        replica_nodes=[1, 2, 3], isr_nodes=[1, 2, 3])
            for p in range(10)])
        for t in range(10)]
    body = m.MESSAGE(brokers=[m.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=9092)],
                     cluster_id="x" * 22, controller_id=1, topics=topics)
    return "MetadataResponse v12 (100 partitions)", m, 12, body


def produce_request():
    m = codec.module("ProduceRequest")
    body = m.MESSAGE(acks=-1, timeout_ms=30000, topic_data=[m.TopicProduceData(
        name="t", partition_data=[m.PartitionProduceData(index=0, records=bytes(1 << 20))])])
    return "ProduceRequest v9 (1 MiB batch)", m, 9, body


def fetch_response(records):
    m = codec.module("FetchResponse")
    parts = [m.PartitionData(partition_index=p, high_watermark=1000, records=records) for p in range(8)]
    body = m.MESSAGE(responses=[m.FetchableTopicResponse(topic="t", partitions=parts)])
    return m, 12, body


class Region:
    size = 64 << 20


def main() -> None:
    cases = [metadata_response(), produce_request()]
    cases.append(("FetchResponse v12 (8 x 16 KiB inline)", *fetch_response(bytes(16384))))
    cases.append(("FetchResponse v12 (8 x 64 MiB regions)", *fetch_response(Region())))
    table = Table(title="odradek codec")
    for col in ("message", "encode ns", "decode ns"):
        table.add_column(col, justify="right" if col != "message" else "left")
    for name, mod, version, body in cases:
        out = EncodeBuffer()
        mod.WRITERS[version](body, out)

        def encode():
            mod.WRITERS[version](body, EncodeBuffer())

        if out.regions and not isinstance(out.regions[0][1], (bytes, memoryview)):
            decode_ns = "n/a (regions are sent, not decoded)"
        else:
            frame = memoryview(out.to_bytes())
            decode_ns = f"{per_call_ns(lambda: mod.READERS[version](frame, 0)):,.0f}"
        table.add_row(name, f"{per_call_ns(encode):,.0f}", decode_ns)
    Console().print(table)


if __name__ == "__main__":
    main()
