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

The generator must not be what is late. On 2 cores shared by the broker, the consumer and this
process, a thread hand-off costs a scheduler round, so:

- the producer is one thread on a non-blocking socket: it waits in ``select`` until the next
  batch is due, reading whatever acks arrive meanwhile (``wire.FrameReader``, checked in place
  by ``wire.check_produce_ack``), and finishes a send the socket could not take at once when
  the socket is writable again. How late each send left (``send_lag``) is reported next to
  the percentiles, so a late generator can be told from a slow broker;
- the consumer child does nothing else: one pre-built Fetch frame with its offset patched in
  place, the response read into one reused buffer and its records located in place
  (``wire.fetch_records``), each batch's offsets and stamp read with ``struct``;
- neither collects garbage while it runs (the child, forked from the harness, freezes the
  inherited heap first, so a collection could not walk it either).
"""

from __future__ import annotations

import gc
import multiprocessing
import select
import struct
import time
from dataclasses import dataclass

from odradek.records.batch import iter_batch_positions, update_crc

from .raw_produce import build_batch
from .wire import (
    FrameReader,
    RawConnection,
    check_produce_ack,
    fetch_frame,
    fetch_records,
    produce_frame,
    set_correlation_id,
)

_STAMP = struct.Struct(">q")
_LAST_OFFSET_DELTA = struct.Struct(">i")
_LAST_OFFSET_DELTA_AT = 23  # in a v2 batch header (records.batch)
_MARK = b"\xfe\xed\xfa\xce\xca\xfe\xbe\xef"
# A fetch offset whose 8 bytes occur nowhere else in the Fetch frame: where to patch it.
_OFFSET_PROBE = 0x0DDC0FFEE0DDBA11


@dataclass(frozen=True)
class LatencyRun:
    offered_records_per_s: float
    achieved_records_per_s: float
    p50_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float
    samples: int
    send_lag_p99_ms: float  # how late the producer's sends left: already inside the latencies
    send_lag_max_ms: float
    ack_p99_ms: float  # from the scheduled time to the producer holding the ack (acks=1)


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


def fetch_template(topic: str) -> tuple[bytearray, int]:
    """A Fetch v12 frame for partition 0 of ``topic`` (4 MiB, ``min_bytes=1``, 100 ms) and the
    position of its 8-byte fetch offset, to be patched before each send."""
    frame = fetch_frame(topic, {0: _OFFSET_PROBE}, 4 << 20, 4 << 20, 100, 1)
    return frame, frame.index(_STAMP.pack(_OFFSET_PROBE))


def stamped_batches(records, offset: int, stamp_at: int):
    """``(next_offset, stamps)`` of the whole batches of a fetched region at or after
    ``offset``: each batch's stamp (at ``stamp_at`` in the batch) in order. A cut tail is
    left for the next fetch."""
    stamps = []
    if records is None:
        return offset, stamps
    end = len(records)
    for pos, size in iter_batch_positions(records):
        if pos + size > end:
            break
        (base,) = _STAMP.unpack_from(records, pos)
        if base >= offset:
            stamps.append(_STAMP.unpack_from(records, pos + stamp_at)[0])
            offset = base + _LAST_OFFSET_DELTA.unpack_from(records, pos + _LAST_OFFSET_DELTA_AT)[0] + 1
    return offset, stamps


def _consume(bootstrap: str, topic: str, batches: int, stamp_at: int, deadline: float, out,
             start_offset: int = 0) -> None:
    """Child process: fetch from ``start_offset`` until ``batches`` batches arrived; send back
    latencies (ns) and the arrival time of the last batch."""
    gc.freeze()  # the heap inherited from the harness: never walked, never copied on write
    gc.disable()
    lat: list[int] = []
    offset, last = start_offset, 0
    buf = bytearray(8 << 20)
    frame, offset_at = fetch_template(topic)
    with RawConnection(bootstrap) as conn:
        while len(lat) < batches and time.monotonic() < deadline:
            _STAMP.pack_into(frame, offset_at, offset)
            conn.send(frame)
            _, records = fetch_records(conn.recv_frame_into(buf))
            now = time.monotonic_ns()
            offset, stamps = stamped_batches(records, offset, stamp_at)
            if stamps:
                lat += [now - s for s in stamps]
                last = now
            del records  # a view of buf: buf may have to grow for the next response
    out.send((lat, last))
    out.close()


def run(bootstrap: str, topic: str, rate: float, seconds: float, tick_s: float = 0.001,
        value_size: int = 100, acks: int = 1, start_offset: int = 0) -> LatencyRun:
    """Produce ``rate`` records/s for ``seconds`` into partition 0 of ``topic`` (empty, or
    holding ``start_offset`` records written before; ``bootstrap`` must be its leader), with
    ``acks`` (1, or -1 on a replicated topic)."""
    per_batch = max(1, round(rate * tick_s))
    template, first_value = stamp_template(per_batch, value_size)
    frame = produce_frame(topic, {0: bytes(template)}, acks=acks)
    batch_at = frame.index(_MARK) - first_value
    stamp_in_frame = batch_at + first_value
    batch_size = len(template)
    ticks = int(seconds / tick_s)
    ctx = multiprocessing.get_context("fork")
    receiver, sender = ctx.Pipe(duplex=False)
    consumer = ctx.Process(target=_consume, args=(bootstrap, topic, ticks, first_value,
                                                  time.monotonic() + seconds + 30, sender, start_offset))
    consumer.start()
    try:
        time.sleep(0.2)  # let it connect and park its first long poll
        t0, lags, acks = _produce_paced(bootstrap, frame, batch_at, batch_size, stamp_in_frame,
                                        ticks, tick_s)
        lat_ns, last_ns = receiver.recv()
    except BaseException:
        consumer.terminate()  # it would otherwise wait for batches that never come
        raise
    finally:
        consumer.join(30)
    lat = sorted(x / 1e6 for x in lat_ns)
    if not lat:
        raise RuntimeError(f"{topic}: the consumer received nothing")
    lags_ms = sorted(x / 1e6 for x in lags)
    acks_ms = sorted(x / 1e6 for x in acks)
    span = (last_ns - t0) / 1e9
    return LatencyRun(rate, len(lat) * per_batch / span if span > 0 else 0.0,
                      _percentile(lat, 0.5), _percentile(lat, 0.99), _percentile(lat, 0.999),
                      lat[-1], len(lat), _percentile(lags_ms, 0.99), lags_ms[-1],
                      _percentile(acks_ms, 0.99))


def _produce_paced(bootstrap, frame, batch_at, batch_size, stamp_at, ticks,
                   tick_s) -> tuple[int, list[int], list[int]]:
    """Send ``ticks`` stamped copies of ``frame`` at ``t0 + i * tick`` on one thread; return
    ``t0``, how late (ns) each send left and when (ns after its scheduled time) each ack came
    back (responses come in request order). Returns once every send is acknowledged."""
    tick_ns = int(tick_s * 1e9)
    lags: list[int] = []
    acked_after: list[int] = []
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        with RawConnection(bootstrap) as conn:
            sock = conn.sock
            sock.setblocking(False)
            acks = FrameReader(sock)
            t0 = time.monotonic_ns() + 1_000_000
            give_up = t0 + ticks * tick_ns + 60_000_000_000
            sent = acked = 0
            pending = None  # what the socket has not taken yet of the frame being sent
            while acked < ticks:
                now = time.monotonic_ns()
                due = t0 + sent * tick_ns
                if pending is None and sent < ticks and now >= due:
                    _STAMP.pack_into(frame, stamp_at, due)
                    update_crc(frame, batch_at, batch_size)
                    set_correlation_id(frame, sent)
                    lags.append(now - due)
                    pending = memoryview(frame)
                    sent += 1
                if pending is not None:
                    try:
                        pending = pending[sock.send(pending):] or None
                    except BlockingIOError:
                        pass
                for ack in acks.frames():
                    check_produce_ack(ack)
                    acked_after.append(time.monotonic_ns() - t0 - acked * tick_ns)
                    acked += 1
                if now > give_up:
                    raise TimeoutError(f"{acked} of {ticks} produce requests acknowledged")
                _wait(sock, pending is not None, t0 + sent * tick_ns if sent < ticks else None)
    finally:
        if was_enabled:
            gc.enable()
    return t0, lags, acked_after


def _wait(sock, sending: bool, next_due: int | None) -> None:
    """Until the socket can take more of a frame being sent, until the next batch is due, or
    until an ack arrives, whichever is first (at most 1 s)."""
    if sending:
        select.select([sock], [sock], [], 1.0)
        return
    timeout = 1.0 if next_due is None else (next_due - time.monotonic_ns()) / 1e9
    if timeout > 0:
        select.select([sock], [], [], timeout)
