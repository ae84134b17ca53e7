"""The writers of the partition tests: idempotent ``acks=all`` producers that record, record by
record, what they were told (the history tests/server/cluster/jepsen_checker.py checks).

Each `Writer` runs a thread that sends ``b"<name>-<seq>"`` (seq 0, 1, 2, ...) to partition
``seq % partitions`` at ``rate`` records per second, and keeps every delivery report: the
acknowledged offset, or the error. Two clients, so the broker is held to both:
`ConfluentWriter` (librdkafka, ``enable.idempotence=true``) and `OdradekWriter` (odradek's
own producer, odradek/client/sync.py, ``enable_idempotence=True``). Their delivery timeout
outlasts any fault a test makes, so a record fails only when the cluster stays unavailable
longer than that.

A send the client refuses at once is a ``"failed"`` write. A fatal error of librdkafka's
idempotent producer (OUT_OF_ORDER_SEQUENCE_NUMBER: the broker lacks records it saw
acknowledged) is kept in ``fatal``; every send after it fails.

`Workload` runs writers together: ``start()``, ``wait_progress(n)`` (until each writer has
``n`` more acknowledgements than when it last looked: the cluster serves again), ``stop()``
(stop sending, wait up to ``flush_timeout`` for the reports still due, close the clients,
so that none outlives the test's network; a record with no report then is ``"unknown"``),
``history()``, the `Write`s of every writer, and ``first_ack_after(t)`` for failover times.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from confluent_kafka import KafkaError
from confluent_kafka import Producer as ConfluentProducer

from odradek.client.sync import Producer as OdradekProducer
from tests.server.cluster.jepsen_checker import Write

__all__ = ["ConfluentWriter", "OdradekWriter", "Workload", "Writer"]

# Delivery errors after which librdkafka's idempotent producer raises its fatal error.
ENDS_IDEMPOTENCE = (KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, KafkaError._FATAL)
DELIVERY_TIMEOUT_MS = 60000
REQUEST_TIMEOUT_MS = 5000


class Writer:
    """One producer and its history (module docstring); subclasses wrap a client."""

    def __init__(self, name: str, bootstrap: str, topic: str, partitions: int, rate: float) -> None:
        if "-" in name:
            raise ValueError(f"a writer's name has no '-': {name!r}")
        self.name, self.bootstrap, self.topic = name, bootstrap, topic
        self.partitions = partitions
        self.interval = 1.0 / rate
        self.sent = 0
        self.outcomes: dict[int, tuple[str, int | None]] = {}  # seq -> (outcome, offset)
        self.sent_at: dict[int, float] = {}  # seq -> time.monotonic() of the send
        self.acked_at: dict[int, float] = {}  # seq -> time.monotonic() of the acknowledgement
        self.errors: list[str] = []  # the first few error reports, for messages
        self.fatal: str | None = None  # the client's error that ended the producer, if any
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- the client --------------------------------------------------------------------------

    def send(self, seq: int, partition: int) -> None:
        raise NotImplementedError

    def serve(self) -> None:
        """Let the client run its delivery reports (librdkafka's poll)."""

    def close(self, timeout: float) -> None:
        """Wait up to ``timeout`` s for the reports still due, then close the client."""
        raise NotImplementedError

    # --- reports -----------------------------------------------------------------------------

    def report(self, seq: int, offset: int | None, error: object | None) -> None:
        """A delivery report. Lock-free on purpose: a report arrives on whichever thread the
        client calls back on (librdkafka's poll or flush, odradek's event loop), and single
        dict stores are atomic; readers see each report whole or not at all."""
        if error is None:
            self.acked_at[seq] = time.monotonic()
            self.outcomes[seq] = ("ok", offset)
        else:
            self.outcomes[seq] = ("failed", None)
            if len(self.errors) < 5:
                self.errors.append(f"{self.name}-{seq}: {error}")

    def failed_for_good(self, error: str) -> None:
        """The client can go on no more (module docstring); the first such error is kept."""
        if self.fatal is None:
            self.fatal = error
            self.errors.insert(0, f"{self.name}: {error}")

    def acked(self) -> int:
        return len(self.acked_at)

    def history(self) -> list[Write]:
        return [Write(self.name, seq, seq % self.partitions, *self.outcomes.get(seq, ("unknown", None)))
                for seq in range(self.sent)]

    # --- the sending thread ------------------------------------------------------------------

    def start(self) -> Writer:
        self._thread = threading.Thread(target=self._run, name=f"writer-{self.name}", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            seq = self.sent
            self.sent_at[seq] = time.monotonic()
            try:
                self.send(seq, seq % self.partitions)
            except Exception as e:  # noqa: BLE001 - refused before it left: it is a failed write
                self.report(seq, None, e)
            self.sent = seq + 1
            try:
                self.serve()
            except Exception as e:  # noqa: BLE001 - librdkafka's poll raises its fatal error
                self.failed_for_good(str(e))
            next_at += self.interval
            delay = next_at - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)
            else:
                next_at = time.monotonic()

    def stop(self, flush_timeout: float) -> None:
        """Stop sending; wait up to ``flush_timeout`` for the reports due; close the client."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
        self.close(flush_timeout)


class ConfluentWriter(Writer):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.producer = ConfluentProducer({
            "bootstrap.servers": self.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": DELIVERY_TIMEOUT_MS,
            "request.timeout.ms": REQUEST_TIMEOUT_MS,
            "retry.backoff.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000,
            "error_cb": self._on_error,
        })

    def _on_error(self, error) -> None:
        if error.fatal():
            self.failed_for_good(str(error))

    def send(self, seq: int, partition: int) -> None:
        def delivered(err, msg) -> None:
            if err is not None and (err.fatal() or err.code() in ENDS_IDEMPOTENCE):
                self.failed_for_good(str(err))  # (its error_cb is not always called: flush may fail first)
            self.report(seq, None if err else msg.offset(), err)

        while True:
            try:
                self.producer.produce(self.topic, value=f"{self.name}-{seq}".encode(), partition=partition,
                                      on_delivery=delivered)
                return
            except BufferError:  # the local queue is full: serve reports and try again
                self.producer.poll(0.1)

    def serve(self) -> None:
        self.producer.poll(0)

    def close(self, timeout: float) -> None:
        try:
            self.producer.flush(timeout)
        except Exception as e:  # noqa: BLE001 - seen after a fatal error: the rest is "unknown"
            self.errors.append(f"{self.name}: flush failed: {e!r}")
        finally:
            # What is still outstanding is dropped (reported failed: it may have been written),
            # then librdkafka's threads end now, not whenever the handle is collected: nothing
            # of a test's may outlive its network.
            self.producer.purge()
            self.producer.close()


class OdradekWriter(Writer):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.producer = OdradekProducer(self.bootstrap, acks="all", enable_idempotence=True, linger_ms=5,
                                        delivery_timeout_ms=DELIVERY_TIMEOUT_MS,
                                        request_timeout_ms=REQUEST_TIMEOUT_MS, retry_backoff_ms=100,
                                        metadata_max_age_ms=1000, allow_auto_create_topics=False)

    def send(self, seq: int, partition: int) -> None:
        def delivered(metadata, error) -> None:
            self.report(seq, None if error else metadata.offset, error)

        self.producer.send(self.topic, f"{self.name}-{seq}".encode(), partition=partition, callback=delivered)

    def close(self, timeout: float) -> None:
        try:
            self.producer.flush(timeout)
        except Exception as e:  # noqa: BLE001 - what is still due is "unknown" in the history
            self.errors.append(f"{self.name}: flush failed: {e!r}")
        finally:
            self.producer.close(0)


class Workload:
    """Writers run together (module docstring)."""

    def __init__(self, writers: Sequence[Writer]) -> None:
        self.writers = list(writers)
        self._seen = {w.name: 0 for w in self.writers}

    @classmethod
    def both_clients(cls, bootstrap: str, topic: str, partitions: int, rate: float = 100.0) -> Workload:
        return cls([ConfluentWriter("confluent", bootstrap, topic, partitions, rate),
                    OdradekWriter("odradek", bootstrap, topic, partitions, rate)])

    def start(self) -> Workload:
        for writer in self.writers:
            writer.start()
        return self

    def acked(self) -> int:
        return sum(w.acked() for w in self.writers)

    def wait_progress(self, more: int, timeout: float) -> None:
        """Until every writer has ``more`` acknowledgements beyond those seen at its last call;
        AssertionError (with the writers' first errors) after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        for writer in self.writers:
            want = self._seen[writer.name] + more
            while writer.acked() < want:
                if time.monotonic() > deadline:
                    raise AssertionError(f"writer {writer.name}: {writer.acked()} acknowledged, waited for "
                                         f"{want} for {timeout} s; its first errors: {writer.errors}")
                time.sleep(0.05)
        for writer in self.writers:
            self._seen[writer.name] = writer.acked()

    def stop(self, flush_timeout: float = DELIVERY_TIMEOUT_MS / 1000 + 10) -> None:
        for writer in self.writers:
            writer._stop.set()
        deadline = time.monotonic() + flush_timeout
        for writer in self.writers:
            try:
                writer.stop(max(deadline - time.monotonic(), 0.1))
            except Exception as e:  # noqa: BLE001 - the others are stopped all the same
                writer.errors.append(f"{writer.name}: stop failed: {e!r}")

    def history(self) -> list[Write]:
        return [write for writer in self.writers for write in writer.history()]

    def first_ack_after(self, moment: float) -> float | None:
        """When the first record sent after ``moment`` (time.monotonic()) was acknowledged."""
        times = []
        for writer in self.writers:
            for seq in range(writer.sent):  # by key: the writer's threads add to the dicts meanwhile
                acked = writer.acked_at.get(seq)
                if acked is not None and writer.sent_at.get(seq, 0.0) > moment:
                    times.append(acked)
        return min(times, default=None)

    def errors(self) -> list[str]:
        return [e for writer in self.writers for e in writer.errors]
