"""``odradek demo``: the activity-stream pipeline, end to end.

1. an embedded broker (``embedded_broker``), or a local cluster of ``brokers`` brokers, unless a
   bootstrap server is given; the topics get min(3, brokers in the cluster) replicas;
2. the topics ``page_views`` and ``searches`` (keyed by member), ``page_view_counts`` and
   the compacted ``member_visits``; a synthetic activity stream produced into the first two
   (``activity``, ``produce``), with a progress bar;
3. the Structured Streaming job (``streaming_job``) to the result topics and Parquet;
4. the batch loader (``batch_loader``), then a second loader run that must find nothing new;
5. a report (``report``), with PNG charts in ``<dir>/report`` of the run's throughput, the
   streaming job's micro-batches and its lag, sampled meanwhile (``timeline``, ``charts``).

By default everything runs once and the demo exits: events are produced as fast as the
producer goes with event times spread over the last ``events / 25`` seconds (but after the
newest event already in the topics, so that a rerun's events are not behind the streaming
job's watermark), then the queries run with Trigger.AvailableNow. With ``duration`` (seconds) events are paced over
that time at the wall clock while the queries run every few seconds; ``follow`` keeps
producing and streaming (loading every minute) until Ctrl-C,
with the web console (``odradek console``) served meanwhile on 127.0.0.1, its address printed. Either way the queries are
finally run once more with AvailableNow, from their checkpoints, to drain what is left.
State stays in ``directory`` (broker data, checkpoints, warehouse), so a second run adds to
the first: new events, resumed queries, a load of only the new offsets.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from odradek.client import AdminClient, NewTopic, TopicPartition
from odradek.demo import batch_loader, report, streaming_job
from odradek.demo.activity import PAGE_VIEWS, SEARCHES, ActivityGenerator
from odradek.demo.embedded_broker import EmbeddedBroker
from odradek.demo.produce import ProduceResult, produce
from odradek.demo.timeline import LagSampler
from odradek.spark.sink_log import ensure_topic

__all__ = ["DemoConfig", "run"]

SIMULATED_EVENTS_PER_SECOND = 25
FOLLOW_RATE = 200  # events per second when following without --duration
LOAD_EVERY = 60.0


@dataclass(frozen=True)
class DemoConfig:
    events: int = 20_000
    duration: float = 0.0
    follow: bool = False
    bootstrap: str | None = None
    directory: Path = Path("data/demo")
    members: int = 1000
    partitions: int = 4
    brokers: int = 1             # more: a local ZooKeeper-mode cluster of that many brokers
    seed: int | None = None      # None: a new stream each run
    console_port: int = 0        # with follow: the web console's port (0: a free one), -1: none


def create_topics(bootstrap: str, partitions: int) -> None:
    """The demo's topics (those missing), with min(3, brokers in the cluster) replicas each."""
    with AdminClient(bootstrap, client_id="odradek-demo") as admin:
        replicas = min(3, len(admin.describe_cluster().brokers))
        for topic in (NewTopic(PAGE_VIEWS, partitions, replicas), NewTopic(SEARCHES, partitions, replicas),
                      NewTopic(streaming_job.PAGE_VIEW_COUNTS, partitions, replicas),
                      NewTopic(streaming_job.MEMBER_VISITS, partitions, replicas,
                               configs={"cleanup.policy": "compact"})):
            ensure_topic(admin, topic)


def start_brokers(base: Path, config: DemoConfig):
    """The demo's own broker (``base/broker``), or with ``config.brokers`` > 1 its own local
    cluster (``base/cluster``: ZooKeeper and the brokers, see odradek/server/local_cluster/)
    whose default replication factor (for the Spark sink's log) is min(3, brokers). Either
    has ``bootstrap`` and ``stop()``, and ignores the terminal's Ctrl-C (the demo's to handle)."""
    if config.brokers == 1:
        return EmbeddedBroker(base / "broker", config.partitions).start()
    from odradek.server.local_cluster.local_cluster import LocalCluster

    props = {"num.partitions": str(config.partitions), "default.replication.factor": str(min(3, config.brokers)),
             "log.cleaner.backoff.ms": "5000"}
    cluster = LocalCluster(base / "cluster", config.brokers, props=props, log_level="WARNING", new_session=True)
    try:
        return cluster.start()
    except BaseException:
        cluster.stop()
        raise


def stream_time(bootstrap: str, partitions: int) -> int:
    """The newest record timestamp in the activity topics (ms; 0 when they are empty), from
    ListOffsets' MAX_TIMESTAMP: where the previous run's stream ended (the activity is produced
    in transactions, so this is its last commit marker's time, just after its last event)."""
    specs = {TopicPartition(t, p): -3 for t in (PAGE_VIEWS, SEARCHES) for p in range(partitions)}
    with AdminClient(bootstrap, client_id="odradek-demo") as admin:
        found = admin.list_offsets(specs)
    return max((o.timestamp for o in found.values() if o is not None), default=0)


def _spark(base: Path, console: Console):
    """The session, made on the main thread: py4j pins each Python thread to a JVM thread,
    and a data source registered from another thread was not found by the streaming
    writer (DATA_SOURCE_NOT_FOUND). The JVM it starts writes its standard error (the JDK's
    start-up warnings, Spark's errors) to ``<dir>/spark.log``, not into the progress bar.
    A line before and after: the JVM takes 10-20 s on two cores, often after the events are
    produced (plain lines, not a spinner: the producer's progress bar may be live)."""
    from odradek.spark.session import local_session

    started = time.monotonic()
    console.print(f"starting Spark (a local JVM; its log: {base / 'spark.log'}) ...", highlight=False)
    with _stderr_to(base / "spark.log"):
        spark = local_session("odradek-demo", shuffle_partitions=4)
    console.print(f"Spark is up ({time.monotonic() - started:.0f} s)")
    return spark


@contextmanager
def _stderr_to(path: Path):
    """File descriptor 2 points at ``path`` meanwhile: processes started then keep it."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


@contextmanager
def _phase(console: Console, text: str):
    """A spinner on a terminal; elsewhere (a pipe, a log) one line per phase, so that a
    reader sees what the demo is doing during its quiet minute of Spark work. Yields
    ``step(detail)``, which says what the phase does now: the spinner's text on a terminal,
    one more indented line elsewhere."""
    if console.is_terminal:
        with console.status(text) as status:
            yield lambda detail: status.update(f"{text}: {detail}")
    else:
        console.print(f"{text} ...")
        yield lambda detail: console.print(f"  {detail}", highlight=False)


def run(config: DemoConfig, console: Console | None = None, spark=None) -> dict:
    """Run the pipeline; returns the report's numbers (for tests). A given SparkSession is
    used and left running; else one is made, and stopped at the end."""
    console = console or Console()
    base = Path(config.directory).resolve()
    base.mkdir(parents=True, exist_ok=True)
    broker = None
    if config.bootstrap is None:
        what = "the embedded broker" if config.brokers == 1 else f"ZooKeeper and {config.brokers} brokers"
        with _phase(console, f"starting {what}"):
            broker = start_brokers(base, config)
    bootstrap = config.bootstrap or broker.bootstrap
    console.print(f"{'broker' if config.brokers == 1 else 'brokers'} at [bold]{bootstrap}[/]; demo state in {base}")
    own_spark = spark is None
    counter = streaming_job.RowCounter()
    sampler = None
    try:
        create_topics(bootstrap, config.partitions)
        sampler = LagSampler(bootstrap, [PAGE_VIEWS, SEARCHES], config.partitions, base / "checkpoints",
                             PAGE_VIEWS).start()
        generator = ActivityGenerator(config.members, seed=config.seed if config.seed is not None else time.time_ns())
        if config.duration or config.follow:
            produced, loads, spark = _run_live(config, console, bootstrap, base, generator, spark, counter)
        else:
            span = int(config.events / SIMULATED_EVENTS_PER_SECOND * 1000)
            after = stream_time(bootstrap, config.partitions)
            with ThreadPoolExecutor(1) as pool:  # events are produced while the JVM starts
                producing = pool.submit(produce, bootstrap, generator, config.events, console=console, span_ms=span,
                                        not_before_ms=after)
                spark = spark or _spark(base, console)
                produced = producing.result()
            loads = []
            _drain(console, spark, bootstrap, base, counter)
        loads.append(_load(console, spark, bootstrap, base))
        rerun = batch_loader.load(spark, bootstrap, [PAGE_VIEWS, SEARCHES], base / "warehouse")
        sampler.stop()
        with _phase(console, "reading the outputs back"):
            summary = report.summarize(spark, bootstrap, base)
        charts = report.write_charts(base, sampler.samples, counter.batches)
        report.print_report(console, base, produced, dict(counter.rows), dict(counter.dropped), loads, rerun,
                            summary, bootstrap, charts)
        return dict(summary, produced=produced.total, processed=dict(counter.rows), late=dict(counter.dropped),
                    loads=loads, rerun=rerun, charts=charts)
    finally:
        counter.stop()
        if sampler is not None:
            sampler.stop()
        if own_spark and spark is not None:
            spark.stop()
        if broker is not None:
            broker.stop()


def _drain(console: Console, spark, bootstrap: str, base: Path, counter) -> None:
    with _phase(console, "streaming job: processing what the topics hold (Trigger.AvailableNow)") as step:
        rows, dropped = streaming_job.run_available_now(spark, bootstrap, base, counter.batches, step)
    counter.rows.update(rows)
    counter.dropped.update(dropped)


def _load(console: Console, spark, bootstrap: str, base: Path) -> batch_loader.LoadResult:
    with _phase(console, "batch loader: loading new offset ranges into Parquet"):
        return batch_loader.load(spark, bootstrap, [PAGE_VIEWS, SEARCHES], base / "warehouse")


def _run_live(config: DemoConfig, console: Console, bootstrap: str, base: Path, generator, spark, counter):
    """Produce at the wall clock while the queries run; until done, or Ctrl-C."""
    stop = threading.Event()
    rate = config.events / config.duration if config.duration else FOLLOW_RATE
    count = None if config.follow else config.events
    result: dict = {}

    def producer() -> None:
        result["produced"] = produce(bootstrap, generator, count, console=console, rate=rate, stop=stop)

    thread = threading.Thread(target=producer, name="demo-producer", daemon=True)
    thread.start()
    spark = spark or _spark(base, console)
    counter.listen(spark)
    queries: dict = {}
    loads = []
    last_load = time.monotonic()
    with _first_interrupt_stops(stop, console), _web_console(config, console, bootstrap):
        streaming_job.start(spark, bootstrap, base, queries)
        while thread.is_alive() and not stop.is_set():
            thread.join(1.0)
            if config.follow and time.monotonic() - last_load > LOAD_EVERY:
                loads.append(batch_loader.load(spark, bootstrap, [PAGE_VIEWS, SEARCHES], base / "warehouse"))
                last_load = time.monotonic()
        stop.set()
        thread.join()
        streaming_job.stop_all(queries)
        counter.stop()
    _drain(console, spark, bootstrap, base, counter)
    return result.get("produced", ProduceResult()), loads, spark


def _web_console(config: DemoConfig, console: Console, bootstrap: str):
    """While following: ``odradek console`` for the demo's cluster, its address printed."""
    if not config.follow or config.console_port < 0:
        return nullcontext()
    from odradek.console.console_server import console_beside

    return console_beside(bootstrap, lambda text: console.print(text, highlight=False), port=config.console_port)


@contextmanager
def _first_interrupt_stops(stop: threading.Event, console: Console):
    """The first Ctrl-C sets ``stop`` (the demo then drains, loads and reports), a second
    one interrupts. PySpark's own handler would cancel every running Spark job instead."""
    def handler(signum, frame) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        console.print("stopping: draining the streams, loading, reporting (Ctrl-C again to quit)")

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
