"""Batches captured from real clients' Produce requests decode to the records they sent.

The fixtures (tests/protocol/fixtures, captured by tools/capture_golden.py) hold Produce
requests from kafka-python, confluent-kafka (librdkafka 2.16), aiokafka and kcat (librdkafka
2.0), uncompressed and with each codec; the scenarios (tools/golden_clients.py) sent these
three records.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from odradek.protocol import codec
from odradek.records import compression
from odradek.records.reader import iter_batches

FIXTURES = Path(__file__).resolve().parent.parent / "protocol" / "fixtures"
SENT = [(b"k%d" % i, b"value-%d " % i * 12, (("h1", b"v%d" % i),)) for i in range(3)]
CODECS = {"gzip": compression.GZIP, "snappy": compression.SNAPPY, "lz4": compression.LZ4, "zstd": compression.ZSTD}
PRODUCES = [e for e in json.loads((FIXTURES / "index.json").read_text())["fixtures"]
            if e["api_name"] == "Produce" and e["direction"] == "request"]


@pytest.mark.parametrize("entry", PRODUCES, ids=[e["file"] for e in PRODUCES])
def test_client_batches_decode_to_sent_records(entry):
    frame = (FIXTURES / entry["file"]).read_bytes()
    _, request = codec.decode_request(frame)
    got = []
    codecs_seen = set()
    for topic in request.topic_data:
        for part in topic.partition_data:
            for batch in iter_batches(part.records):
                codecs_seen.add(batch.header.compression)
                got += [(r.key, r.value, tuple(r.headers)) for r in batch.records()]
    sent = SENT
    if entry["client"] == "kcat":  # kcat -H puts the same header on every record
        sent = [(k, v, (("h1", b"v1"),)) for k, v, _ in SENT]
    assert got == sent[: len(got)] and got
    suffix = entry["file"].rsplit("-", 1)[-1].removesuffix(".bin")
    if suffix in CODECS:
        assert codecs_seen == {CODECS[suffix]}
