"""The C client: kcat on librdkafka, as producer and consumer of 100-byte records.

Debian's kcat 1.7.1 links librdkafka 2.0.2, which misreads the ApiVersions response Tansu 0.6
sends (it writes top-level tagged fields even at their defaults). confluent-kafka's wheel
bundles librdkafka 2.16 under a mangled name, so ``librdkafka_shim`` makes a directory with a
``librdkafka.so.1`` link to it and kcat runs with that on ``LD_LIBRARY_PATH``: the same kcat,
the librdkafka the targets in issue 8 were measured with, for both brokers.

Producer settings (the issue's): linger 5 ms, batches of up to 1 MB, one record per line of a
prepared file (``-l``; a line is the value, its newline the delimiter). kcat exits once every
record is acknowledged (it flushes on exit). The consumer reads from the beginning and exits
at the end of every partition (``-e``), printing one byte per record, which is counted.

Consumer settings: 4 MiB per partition per fetch, and two settings that keep librdkafka's
prefetching from making the client the bottleneck when a broker answers fast (measured for
issue 8; the same settings for both brokers):

- ``fetch.queue.backoff.ms=10``: once more than ``queued.min.messages`` are queued,
  librdkafka postpones the partition's next fetch by this long, 1000 ms by default. A broker
  that answers a 4 MiB fetch in 3 ms fills the queue past 100,000 within a few fetches, and
  kcat then sat idle for a second in a 1-2 s run (``-d fetch``: "Enqueue ... qlen 71051",
  then the next fetch 1.0 s later). A slower broker never triggered it.
- ``queued.min.messages=20000`` (default 100,000): librdkafka allocates one op per message on
  its broker thread (``rd_kafka_op_new_fetch_msg`` -> ``calloc``) and kcat frees it on the
  main thread (``rd_kafka_consume_cb`` -> ``free``), both in the broker thread's glibc malloc
  arena. While the broker thread parses the next response as the main thread drains the
  previous one, the two take turns on that arena's lock (``futex`` waits in
  ``__lll_lock_wait_private``: 15k against a broker answering in 3 ms, 187 against one
  answering in 12 ms) and kcat used 150-165% CPU to consume slower. With a queue target below
  one 4 MiB fetch (~36,000 records), the broker thread waits while the main thread drains, as
  it does anyway behind a slow broker: kcat is back at ~100% CPU.

``BENCH_KCAT_PRELOAD`` (a path, e.g. Debian's ``/usr/lib/x86_64-linux-gnu/libjemalloc.so.2``)
runs kcat, for both brokers, on an allocator with per-thread caches instead; it is off by
default, and a run that used it says so in its versions (``kcat LD_PRELOAD``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

PRODUCER_CONFIG = {"linger.ms": "5", "batch.size": "1000000", "batch.num.messages": "1000000",
                   "queue.buffering.max.messages": "2000000",
                   "queue.buffering.max.kbytes": "2097152", "compression.codec": "none"}
CONSUMER_CONFIG = {"fetch.message.max.bytes": "4194304", "fetch.wait.max.ms": "100",
                   "queued.max.messages.kbytes": "262144", "fetch.queue.backoff.ms": "10",
                   "queued.min.messages": "20000"}
PRELOAD_ENV = "BENCH_KCAT_PRELOAD"


@dataclass(frozen=True)
class ClientRun:
    """One client process: wall seconds, its own CPU seconds, records it handled."""

    seconds: float
    client_cpu_s: float
    records: int


def kcat_binary() -> str:
    path = shutil.which("kcat") or shutil.which("kafkacat")
    if path is None:
        raise RuntimeError("kcat is not installed (apt-get install kcat)")
    return path


def librdkafka_shim(work_dir: Path) -> Path | None:
    """A directory holding librdkafka.so.1 -> confluent-kafka's bundled librdkafka, or None."""
    try:
        import confluent_kafka
    except ImportError:
        return None
    libs = Path(confluent_kafka.__file__).parent.parent / "confluent_kafka.libs"
    found = sorted(libs.glob("librdkafka*.so*")) if libs.is_dir() else []
    if not found:
        return None
    shim = Path(work_dir) / "librdkafka-shim"
    shim.mkdir(parents=True, exist_ok=True)
    link = shim / "librdkafka.so.1"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(found[0])
    return shim


def kcat_env(shim: Path | None) -> dict[str, str]:
    """The environment kcat runs in: the shim on LD_LIBRARY_PATH, and ``BENCH_KCAT_PRELOAD``
    (if set) as LD_PRELOAD."""
    env = dict(os.environ)
    if shim is not None:
        env["LD_LIBRARY_PATH"] = str(shim)
    if os.environ.get(PRELOAD_ENV):
        env["LD_PRELOAD"] = os.environ[PRELOAD_ENV]
    return env


def versions(shim: Path | None) -> dict[str, str]:
    """kcat's version and the librdkafka it runs on, from ``kcat -V``
    (``Version 1.7.1 (JSON, ..., librdkafka 2.16.0 builtin.features=...)``), and the
    allocator preloaded into it, if any."""
    words = subprocess.run([kcat_binary(), "-V"], capture_output=True, text=True,
                           env=kcat_env(shim)).stdout.split()

    def after(word: str) -> str:
        return words[words.index(word) + 1].rstrip(",)") if word in words[:-1] else "unknown"

    out = {"kcat": after("Version"), "librdkafka (kcat)": after("librdkafka")}
    if os.environ.get(PRELOAD_ENV):
        out["kcat LD_PRELOAD"] = os.environ[PRELOAD_ENV]
    return out


def records_file(path: Path, count: int, size: int = 100) -> Path:
    """``count`` lines of ``size`` bytes (plus the newline kcat splits on); reused if present."""
    expected = count * (size + 1)
    if path.exists() and path.stat().st_size == expected:
        return path
    line = (b"%0*d" % (size, 0))[:size] + b"\n"
    block = line * 10_000
    with open(path, "wb") as f:
        for _ in range(count // 10_000):
            f.write(block)
        f.write(line * (count % 10_000))
    return path


class Kcat:
    def __init__(self, shim: Path | None) -> None:
        self.binary = kcat_binary()
        self.env = kcat_env(shim)

    def _run(self, args: list[str], count_stdout: bool) -> tuple[float, float, int, str]:
        begin = time.perf_counter()
        proc = subprocess.Popen([self.binary, *args], env=self.env, stdout=subprocess.PIPE
                                if count_stdout else subprocess.DEVNULL, stderr=subprocess.PIPE)
        counted, errors = [0], []
        readers = [threading.Thread(target=lambda: errors.append(proc.stderr.read()), daemon=True)]
        if count_stdout:
            def count():
                while chunk := proc.stdout.read(1 << 16):
                    counted[0] += len(chunk)
            readers.append(threading.Thread(target=count, daemon=True))
        for t in readers:
            t.start()
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - begin
        proc.returncode = os.waitstatus_to_exitcode(status)
        for t in readers:
            t.join(30)
        stderr = errors[0].decode(errors="replace") if errors else ""
        if proc.returncode != 0:
            raise RuntimeError(f"kcat {' '.join(args[:6])} failed ({proc.returncode}): {stderr[-2000:]}")
        return seconds, usage.ru_utime + usage.ru_stime, counted[0], stderr

    def produce(self, bootstrap: str, topic: str, path: Path, records: int, acks: str,
                partition: int | None = None, extra: dict[str, str] | None = None) -> ClientRun:
        args = ["-P", "-b", bootstrap, "-t", topic, "-X", f"acks={acks}", "-l", str(path)]
        if partition is not None:
            args[5:5] = ["-p", str(partition)]
        for k, v in {**PRODUCER_CONFIG, **(extra or {})}.items():
            args += ["-X", f"{k}={v}"]
        # kcat exits 0 even when some deliveries failed: the caller checks the high watermarks.
        seconds, cpu, _, _ = self._run(args, count_stdout=False)
        return ClientRun(seconds, cpu, records)

    def consume(self, bootstrap: str, topic: str, expected: int) -> ClientRun:
        args = ["-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q", "-f", "x",
                "-c", str(expected)]
        for k, v in CONSUMER_CONFIG.items():
            args += ["-X", f"{k}={v}"]
        seconds, cpu, counted, _ = self._run(args, count_stdout=True)
        if counted != expected:
            raise RuntimeError(f"kcat consumed {counted} records of {topic}, expected {expected}")
        return ClientRun(seconds, cpu, counted)
