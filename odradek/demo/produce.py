"""Producing the activity stream into odradek, with a progress bar.

Events go out through odradek's own transactional producer (lz4-compressed batches, acks=all,
transactional id ``odradek-demo-activity``), keyed by member so that a member's events stay
in one partition and in order. They are committed in transactions of at most
``TXN_RECORDS`` events or ``TXN_MS`` milliseconds, as a service writing its activity log with
exactly-once semantics would: the streaming job and the loader read at read_committed, so
they never see events of a transaction that did not commit (a producer killed mid-way: its
open transaction is aborted when the next one starts, ``init_transactions`` fencing it).
Two clocks:
- simulated (the default, as fast as the producer goes): event times are spread evenly
  over the ``span_ms`` ending now, so a short demo still covers many one-minute windows;
  but never before ``not_before_ms`` (where the previous run's events ended): a stream's
  time only moves on, else a second run's events would fall behind the streaming job's
  watermark and be dropped as late;
- real (``--duration``/``--follow``): events are paced to ``rate`` per second and stamped
  with the wall clock.
Either way no event is stamped later than the present.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from odradek.client import Producer
from odradek.demo.activity import ActivityGenerator

__all__ = ["ProduceResult", "produce", "TRANSACTIONAL_ID"]

TRANSACTIONAL_ID = "odradek-demo-activity"
TXN_RECORDS = 2000
TXN_MS = 100


@dataclass
class ProduceResult:
    counts: Counter = field(default_factory=Counter)
    seconds: float = 0.0
    transactions: int = 0
    first_ts: int | None = None
    last_ts: int | None = None

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def produce(bootstrap: str, generator: ActivityGenerator, count: int | None, *, console: Console,
            rate: float | None = None, span_ms: int = 0, not_before_ms: int = 0,
            stop: threading.Event | None = None) -> ProduceResult:
    """Produce ``count`` events (None: until ``stop`` is set), paced to ``rate`` per second
    when given, else as fast as possible with simulated event times over ``span_ms`` (see
    the module's docstring for ``not_before_ms``)."""
    result = ProduceResult()
    stop = stop or threading.Event()
    started = time.monotonic()
    now = int(time.time() * 1000)
    total = count if count is not None else 10**12
    start = min(max(now - span_ms, not_before_ms), now)
    step = (now - start) / max(count or 1, 1)

    def wall_clock() -> int:
        return int(time.time() * 1000)

    def clock() -> int:
        return wall_clock() if rate else start + int(result.total * step)

    columns = [TextColumn("[bold]producing activity"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[rate]:>8,.0f} events/s"), TimeElapsedColumn()]
    with Producer(bootstrap, client_id="odradek-demo", linger_ms=10, compression_type="lz4",
                  transactional_id=TRANSACTIONAL_ID) as producer, \
            Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("produce", total=count, rate=0.0)
        producer.init_transactions()
        txn = _Transactions(producer, result)
        for event in generator.events(total, clock, ceiling=wall_clock if rate else lambda: now):
            if stop.is_set():
                break
            if rate:
                ahead = result.total / rate - (time.monotonic() - started)
                if ahead > 0:
                    stop.wait(ahead)
            txn.before_send()
            producer.send(event.topic, event.value, key=event.key, timestamp=event.timestamp)
            result.counts[event.topic] += 1
            result.first_ts = event.timestamp if result.first_ts is None else min(result.first_ts, event.timestamp)
            result.last_ts = event.timestamp if result.last_ts is None else max(result.last_ts, event.timestamp)
            if result.total % 500 == 0:
                elapsed = time.monotonic() - started
                progress.update(task, completed=result.total, rate=result.total / max(elapsed, 1e-6))
        txn.commit()
        result.seconds = time.monotonic() - started
        progress.update(task, completed=result.total, rate=result.total / max(result.seconds, 1e-6))
    return result


class _Transactions:
    """Opens a transaction before a send when none is open, and commits it after
    ``TXN_RECORDS`` sends or ``TXN_MS`` milliseconds."""

    def __init__(self, producer, result: ProduceResult) -> None:
        self.producer = producer
        self.result = result
        self.records = 0
        self.began = 0.0

    def before_send(self) -> None:
        if self.records and (self.records >= TXN_RECORDS or time.monotonic() - self.began >= TXN_MS / 1000):
            self.commit()
        if not self.records:
            self.producer.begin_transaction()
            self.began = time.monotonic()
        self.records += 1

    def commit(self) -> None:
        if self.records:
            self.producer.commit_transaction()
            self.result.transactions += 1
            self.records = 0
