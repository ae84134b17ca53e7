"""The console's message browser (``/api/topics/<name>/messages``): one bounded page of a
partition's records, from an offset or from a time.

    GET /api/topics/orders/messages?partition=0&offset=40&limit=20
    GET /api/topics/orders/messages?partition=0&timestamp=1717171717000
    -> {"topic": "orders", "partition": 0, "start": 0, "end": 120, "from": 40, "next": 60,
        "records": [{"offset": 40, "timestamp": 1717171717123, "key": VIEW, "value": VIEW,
                     "headers": [{"key": "trace", "value": VIEW}]}, ...]}

where a VIEW of some bytes is ``{"size": n, "text": ..., "json": ..., "hex": ..., "truncated":
bool}`` (all null for a null key or value): ``text`` the bytes as UTF-8 (undecodable bytes as
U+FFFD), ``json`` the value re-indented when it parses as JSON (else null), ``hex`` the bytes
in hex. Only the first ``SHOWN_BYTES`` of a large value are shown (``truncated``).

The page starts at ``offset`` (kept within [start, end]); with ``timestamp`` instead, at the
first record whose timestamp is at or after it (ListOffsets by time: none, an empty page at
the end); with neither, at the last ``limit`` records. Records are read with Fetch by a
consumer of no group (nothing is committed), assigned the one partition, until ``limit``
records, the partition's end, or ``READ_SECONDS``.
"""

from __future__ import annotations

import json

from odradek.client.consumer import AsyncConsumer
from odradek.client.errors import BrokerError
from odradek.client.topic_partition import TopicPartition
from odradek.console.offset_lookup import LATEST, OFFSETS_TIMEOUT_MS
from odradek.console.request_error import integer, invalid
from odradek.protocol.generated.error_codes import ErrorCode

EARLIEST = -2
DEFAULT_LIMIT = 20
MAX_LIMIT = 200
SHOWN_BYTES = 64 * 1024
# A page of records is normally one Fetch away; the bound keeps a request from hanging on a
# partition whose leader is moving.
READ_SECONDS = 5.0


async def browse(admin, consumer_settings: dict, topic: str, query) -> dict:
    """One page of records of ``topic`` as ``query`` (a mapping of the URL's parameters) asks;
    ``consumer_settings``: the bootstrap servers and security of the console's clients."""
    partition = integer(query, "partition", minimum=0)
    if partition is None:
        raise invalid("give the partition to browse")
    limit = min(integer(query, "limit", DEFAULT_LIMIT, minimum=1), MAX_LIMIT)
    offset = integer(query, "offset", minimum=0)
    timestamp = integer(query, "timestamp", minimum=0)
    if offset is not None and timestamp is not None:
        raise invalid("give an offset or a timestamp, not both")
    described = (await admin.describe_topics([topic]))[topic]  # an unknown topic: 404 at once
    if partition >= len(described.partitions):
        raise BrokerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic} has no partition {partition}")
    tp = TopicPartition(topic, partition)
    bounds = await admin.list_offsets({tp: EARLIEST}, timeout_ms=OFFSETS_TIMEOUT_MS)
    ends = await admin.list_offsets({tp: LATEST}, timeout_ms=OFFSETS_TIMEOUT_MS)
    start, end = bounds[tp].offset, ends[tp].offset
    if timestamp is not None:
        found = (await admin.list_offsets({tp: timestamp}, timeout_ms=OFFSETS_TIMEOUT_MS)).get(tp)
        offset = end if found is None else found.offset
    elif offset is None:
        offset = max(end - limit, start)
    offset = min(max(offset, start), end)
    records = await _read(consumer_settings, tp, offset, end, limit) if offset < end else []
    return {"topic": topic, "partition": partition, "start": start, "end": end, "from": offset,
            "next": records[-1]["offset"] + 1 if records else offset, "records": records}


async def _read(settings: dict, tp: TopicPartition, offset: int, end: int, limit: int) -> list[dict]:
    consumer = AsyncConsumer(settings["bootstrap"], client_id="odradek-console", auto_offset_reset="earliest",
                             enable_auto_commit=False, max_poll_records=limit, fetch_max_wait_ms=100,
                             security=settings.get("security"))
    out: list[dict] = []
    async with consumer:
        loop = consumer.cluster.loop
        deadline = loop.time() + READ_SECONDS
        consumer.assign([tp])
        consumer.seek(tp, offset)
        while len(out) < limit and loop.time() < deadline:
            batch = await consumer.poll(timeout_ms=max(deadline - loop.time(), 0) * 1000, max_records=limit)
            for record in batch.get(tp, ()):
                if record.offset >= offset and len(out) < limit:
                    out.append(record_view(record))
            if await consumer.position(tp) >= end:
                break
    return out


def record_view(record) -> dict:
    return {"offset": record.offset, "timestamp": record.timestamp, "key": bytes_view(record.key),
            "value": bytes_view(record.value),
            "headers": [{"key": k, "value": bytes_view(v)} for k, v in record.headers]}


def bytes_view(data: bytes | None) -> dict:
    """The VIEW of the module doc."""
    if data is None:
        return {"size": None, "text": None, "json": None, "hex": None, "truncated": False}
    data = bytes(data)
    shown = data[:SHOWN_BYTES]
    text = shown.decode("utf-8", "replace")
    return {"size": len(data), "text": text, "json": _json(data) if len(data) <= SHOWN_BYTES else None,
            "hex": shown.hex(" "), "truncated": len(data) > SHOWN_BYTES}


def _json(data: bytes) -> str | None:
    stripped = data.strip()
    if not stripped or stripped[:1] not in b'{["':
        return None  # numbers and words parse as JSON too, but showing them re-indented adds nothing
    try:
        return json.dumps(json.loads(stripped), indent=2, ensure_ascii=False)
    except (ValueError, RecursionError):
        return None
