"""odradek's own load generator, consuming: large sequential Fetch requests, one reused buffer.

Each response is received into one buffer that is reused (no allocation per response), its
partitions decoded with the generated codec (records stay memoryviews into the buffer), and
only the batch headers are read, to count records and find the next fetch offset. Fetches for
different partitions are pipelined (``fetch_range``); with a large ``max_bytes`` each round
trip moves tens of megabytes.
Fetches can also be sent at chosen offsets (``random_reads``) to time single reads.

Fetches ask for ``min_bytes=1`` with a 500 ms wait: the data is there, so neither broker waits,
but Tansu 0.6 answers ``min_bytes=0`` with no partitions at all.
"""

from __future__ import annotations

import random
import time
from collections import deque
from dataclasses import dataclass

from .proc_stats import self_cpu_seconds
from .wire import RawConnection, fetch_frame, fetch_partitions, set_correlation_id, whole_batches


@dataclass(frozen=True)
class FetchRun:
    seconds: float
    requests: int
    bytes: int  # record batch bytes received
    records: int
    client_cpu_s: float


def fetch_range(bootstrap: str, topic: str, end_offsets: dict[int, int], max_bytes: int) -> FetchRun:
    """Read every partition of ``end_offsets`` from offset 0 to its end offset.

    One Fetch per partition is kept in flight on the one connection (responses come back in
    request order), so with several partitions the broker always has the next request queued
    while the client reads the last response: the fetches are pipelined without guessing
    offsets. With one partition this is a plain consumer, one fetch at a time.
    """
    buf = bytearray(max_bytes + (1 << 20))
    offsets = {p: 0 for p, end in end_offsets.items() if end > 0}
    in_flight: deque[int] = deque()
    requests = total_bytes = total_records = 0
    cpu0 = self_cpu_seconds()
    begin = time.perf_counter()
    with RawConnection(bootstrap) as conn:

        def send(partition: int) -> None:
            nonlocal requests
            frame = fetch_frame(topic, {partition: offsets[partition]}, max_bytes, max_bytes, 500, 1)
            set_correlation_id(frame, requests)
            conn.send(frame)
            in_flight.append(partition)
            requests += 1

        for partition in offsets:
            send(partition)
        while in_flight:
            partition = in_flight.popleft()
            view = conn.recv_frame_into(buf)
            (part,) = fetch_partitions(view)
            _, records, next_offset = whole_batches(part.records)
            if next_offset <= offsets[partition]:
                raise RuntimeError(f"{topic}-{partition}: no whole batch at {offsets[partition]}")
            total_bytes += len(part.records)
            total_records += records
            offsets[partition] = next_offset
            del part, view
            if next_offset < end_offsets[partition]:
                send(partition)
    seconds = time.perf_counter() - begin
    return FetchRun(seconds, requests, total_bytes, total_records, self_cpu_seconds() - cpu0)


def random_reads(bootstrap: str, topic: str, end_offset: int, count: int, max_bytes: int,
                 seed: int = 8) -> list[float]:
    """Latencies (ms) of ``count`` single fetches at random offsets of partition 0."""
    rng = random.Random(seed)
    buf = bytearray(max_bytes + (1 << 20))
    out = []
    with RawConnection(bootstrap) as conn:
        for i in range(count):
            frame = fetch_frame(topic, {0: rng.randrange(end_offset)}, max_bytes, max_bytes, 500, 1)
            set_correlation_id(frame, i)
            begin = time.perf_counter()
            conn.send(frame)
            view = conn.recv_frame_into(buf)
            out.append((time.perf_counter() - begin) * 1e3)
            (part,) = fetch_partitions(view)
            if whole_batches(part.records)[0] == 0:
                raise RuntimeError(f"{topic}-0: random read returned no whole batch")
            del part, view
    return out
