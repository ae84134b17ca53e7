"""End-to-end latency at a fixed rate: from the moment a batch is due to be sent to the moment
a consumer holds it, through the broker (produce, acks=1, then a long-polling fetch).

Open loop, so a slow broker cannot slow the load down and hide its own latency: the producer
sends one batch every ``tick`` at scheduled times ``t0 + i * tick``, each batch holding
``rate * tick`` records of 100 bytes, and stamps into the first record's value the *scheduled*
time (``time.monotonic_ns()``, CLOCK_MONOTONIC, the same clock in every process of the
machine); if it falls behind, the wait counts as latency. The stamp is 8 bytes big-endian at a
fixed position of the pre-built frame; the batch CRC-32C is recomputed after each stamp.
The consumer runs in a child process, fetching with ``min_bytes=1`` and ``max_wait_ms=100``,
and records ``now - stamp`` for every batch it receives. A batch stands for its records (they
were created within one tick of each other), so percentiles over batches are percentiles over
records within one tick.
"""

from __future__ import annotations

import multiprocessing
import struct
import threading
import time
from dataclasses import dataclass

from odradek.records.batch import iter_batch_positions, read_header, update_crc

from .raw_produce import build_batch
from .wire import (RawConnection, check_produce_response, fetch_frame, fetch_partitions,
                   produce_frame, set_correlation_id)

_STAMP = struct.Struct(">q")
_MARK = b"\xfe\xed\xfa\xce\xca\xfe\xbe\xef"


@dataclass(frozen=True)
class LatencyRun:
    offered_records_per_s: float
    achieved_records_per_s: float
    p50_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float
    samples: int


def _percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * q))]


def stamp_template(records: int, value_size: int) -> tuple[bytearray, int]:
    """A batch whose first record's value starts with ``_MARK``; (batch, where the value starts).

    Every record has the same value, and a record ends with its value and a header count of 0,
    so the batch's last bytes but one are a value; their first occurrence is the first record's.
    """
    template = bytearray(build_batch(records, value_size))
    first_value = template.index(template[-value_size - 1:-1])
    template[first_value:first_value + 8] = _MARK
    update_crc(template, 0, len(template))
    return template, first_value


def _consume(bootstrap: str, topic: str, batches: int, stamp_at: int, deadline: float, out) -> None:
    """Child process: fetch until ``batches`` batches arrived; send back latencies (ns) and the
    arrival time of the last batch."""
    lat, offset, last = [], 0, 0
    buf = bytearray(8 << 20)
    with RawConnection(bootstrap) as conn:
        while len(lat) < batches and time.monotonic() < deadline:
            conn.send(fetch_frame(topic, {0: offset}, 4 << 20, 4 << 20, 100, 1))
            view = conn.recv_frame_into(buf)
            (part,) = fetch_partitions(view)
            records = part.records
            now = time.monotonic_ns()
            if records is not None:
                for pos, size in iter_batch_positions(records):
                    if pos + size > len(records):
                        break
                    h = read_header(records, pos)
                    if h.base_offset >= offset:
                        lat.append(now - _STAMP.unpack_from(records, pos + stamp_at)[0])
                        offset = h.base_offset + h.last_offset_delta + 1
                        last = now
            del part, records, view
    out.send((lat, last))
    out.close()


def run(bootstrap: str, topic: str, rate: float, seconds: float, tick_s: float = 0.001,
        value_size: int = 100) -> LatencyRun:
    """Produce ``rate`` records/s for ``seconds`` into partition 0 of ``topic`` (new and empty)."""
    per_batch = max(1, round(rate * tick_s))
    template, first_value = stamp_template(per_batch, value_size)
    frame = produce_frame(topic, {0: bytes(template)}, acks=1)
    batch_at = frame.index(_MARK) - first_value
    stamp_in_frame = batch_at + first_value
    batch_size = len(template)
    ticks = int(seconds / tick_s)
    ctx = multiprocessing.get_context("fork")
    receiver, sender = ctx.Pipe(duplex=False)
    consumer = ctx.Process(target=_consume, args=(bootstrap, topic, ticks, first_value,
                                                  time.monotonic() + seconds + 30, sender))
    consumer.start()
    time.sleep(0.2)  # let it connect and park its first long poll
    acked = _produce_paced(bootstrap, frame, batch_at, batch_size, stamp_in_frame, ticks, tick_s)
    lat_ns, last_ns = receiver.recv()
    consumer.join(30)
    lat = sorted(x / 1e6 for x in lat_ns)
    if not lat:
        raise RuntimeError(f"{topic}: the consumer received nothing")
    span = (last_ns - acked["first_ns"]) / 1e9
    return LatencyRun(rate, len(lat) * per_batch / span if span > 0 else 0.0,
                      _percentile(lat, 0.5), _percentile(lat, 0.99), _percentile(lat, 0.999),
                      lat[-1], len(lat))


def _produce_paced(bootstrap, frame, batch_at, batch_size, stamp_at, ticks, tick_s) -> dict:
    tick_ns = int(tick_s * 1e9)
    failure: list[BaseException] = []
    with RawConnection(bootstrap) as conn:
        def acks():
            try:
                for _ in range(ticks):
                    check_produce_response(conn.recv_frame())
            except BaseException as e:  # noqa: BLE001 - reported below
                failure.append(e)

        reader = threading.Thread(target=acks, daemon=True)
        reader.start()
        t0 = time.monotonic_ns() + 1_000_000
        for i in range(ticks):
            due = t0 + i * tick_ns
            delay = due - time.monotonic_ns()
            if delay > 0:
                time.sleep(delay / 1e9)
            _STAMP.pack_into(frame, stamp_at, due)
            update_crc(frame, batch_at, batch_size)
            set_correlation_id(frame, i)
            conn.send(frame)
            if failure:
                break
        reader.join(60)
    if failure:
        raise failure[0]
    return {"first_ns": t0}
