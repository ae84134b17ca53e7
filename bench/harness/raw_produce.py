"""odradek's own load generator, producing: pre-built record batches pipelined over one socket.

Every Produce request is built before the clock starts (``produce_frame``); the sender thread
then only patches each frame's correlation id and ``sendall``s it, keeping at most ``window``
requests unanswered, while the receiver thread reads and checks the responses (any partition
error aborts the run). So the client spends a few microseconds per request, and the broker's
work per request and per byte is what limits the rate. Requests cycle through the given frames
(one per partition group, for instance), so the log is written with the same batches over and
over; the broker assigns each copy fresh offsets.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

from odradek.records.builder import BatchBuilder, BatchSpec

from .proc_stats import self_cpu_seconds
from .wire import RawConnection, check_produce_response, set_correlation_id


@dataclass(frozen=True)
class ProduceRun:
    seconds: float
    requests: int
    bytes: int  # record batch bytes sent (frame overhead excluded)
    records: int
    client_cpu_s: float


def build_batch(records: int, value_size: int, key: bytes | None = None) -> bytes:
    """A v2 batch of ``records`` records of ``value_size`` random bytes each, no compression."""
    builder = BatchBuilder(BatchSpec())
    value = os.urandom(value_size)
    ts = int(time.time() * 1000)
    for _ in range(records):
        builder.append(ts, key, value)
    return bytes(builder.build())


def batch_of_size(target_bytes: int, value_size: int) -> tuple[bytes, int]:
    """The largest batch of ``value_size`` records that fits ``target_bytes``; (batch, records)."""
    per_record = value_size + 8  # record framing of a null-key record this size, about
    n = max(1, (target_bytes - 61) // per_record)
    while True:
        batch = build_batch(n, value_size)
        if len(batch) <= target_bytes or n == 1:
            return batch, n
        n -= max(1, n // 200)


def pipelined_produce(bootstrap: str, frames: list[bytearray], requests: int, window: int,
                      bytes_per_request: int, records_per_request: int) -> ProduceRun:
    """Send ``requests`` requests cycling over ``frames``, at most ``window`` in flight."""
    slots = threading.Semaphore(window)
    failure: list[BaseException] = []
    done = threading.Event()
    conn = RawConnection(bootstrap)

    def receive():
        try:
            for _ in range(requests):
                check_produce_response(conn.recv_frame())
                slots.release()
        except BaseException as e:  # noqa: BLE001 - reported by the sender
            failure.append(e)
            for _ in range(window):
                slots.release()
        finally:
            done.set()

    reader = threading.Thread(target=receive, daemon=True)
    cpu0 = self_cpu_seconds()
    begin = time.perf_counter()
    reader.start()
    try:
        for i in range(requests):
            slots.acquire()
            if failure:
                break
            frame = frames[i % len(frames)]
            set_correlation_id(frame, i)
            conn.send(frame)
        if not done.wait(600):
            failure.append(TimeoutError("produce responses missing after 600 s"))
    finally:
        seconds = time.perf_counter() - begin
        conn.close()
    if failure:
        raise failure[0]
    return ProduceRun(seconds, requests, requests * bytes_per_request,
                      requests * records_per_request, self_cpu_seconds() - cpu0)
