"""Storage benchmark: what the partition log costs against the machine's raw limits.

Run: ``.venv/bin/python bench/bench_storage.py`` (defaults finish in well under a minute;
``--large-mib 4096 --partitions 50000`` for a longer look). Four measurements:

1. append of 1 MiB batches through ``Log.append`` against plain ``os.write`` of the same
   bytes to a file, in the same run (page cache speed, no fsync in either);
2. the cost of a read at a random offset (locate + one pread of the region), in a small and
   a large log of 1 KiB batches: it should not grow with the size of the log;
3. recovery time after an unclean stop against the bytes written since the recovery point;
4. memory and open files for N partitions, created and then reloaded.

Wall-clock numbers on a shared machine are noisy; compare rows of the same run.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from odradek.records.batch import set_base_offset
from odradek.records.builder import BatchBuilder, BatchSpec
from odradek.storage.append_info import LogAppendInfo
from odradek.storage.clock import SystemClock
from odradek.storage.config import LogConfig
from odradek.storage.file_handle_cache import FileHandleCache
from odradek.storage.log import Log
from odradek.storage.log_manager import LogManager

MIB = 1024 * 1024
ROWS: list[tuple[str, str, str]] = []


def row(name: str, value: str, note: str = "") -> None:
    ROWS.append((name, value, note))
    print(f"  {name:<48} {value:>16}  {note}", flush=True)


def make_batch(records: int, value_size: int) -> bytearray:
    builder = BatchBuilder(BatchSpec(base_offset=0))
    value = os.urandom(value_size)
    ts = SystemClock().milliseconds()
    for i in range(records):
        builder.append(ts, b"key-%d" % i, value)
    return bytearray(builder.build())


def open_log(path: str, config: LogConfig, **kw) -> Log:
    return Log.open(path, "bench", 0, config, SystemClock(), FileHandleCache(256), **kw)


def fill(log: Log, batch: bytearray, count: int) -> None:
    """Append ``count`` copies of ``batch``, patching the base offset as a broker does."""
    records = int.from_bytes(batch[57:61], "big")
    for _ in range(count):
        base = log.log_end_offset
        set_base_offset(batch, 0, base)
        log.append(batch, LogAppendInfo(base, base + records - 1, 0, base + records - 1))


def bench_append(root: str, total_mib: int) -> None:
    print("append of 1 MiB batches", flush=True)
    batch = make_batch(1000, MIB // 1000 - 80)
    raw_path = os.path.join(root, "raw.bin")
    for label in ("warm-up", "measured"):
        fd = os.open(raw_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        start = time.perf_counter()
        for _ in range(total_mib):
            os.write(fd, batch)
        raw = time.perf_counter() - start
        os.close(fd)
        os.unlink(raw_path)
        path = os.path.join(root, f"append-{label}")
        log = open_log(path, LogConfig(segment_bytes=256 * MIB))
        start = time.perf_counter()
        fill(log, batch, total_mib)
        appended = time.perf_counter() - start
        log.abandon()
        shutil.rmtree(path)
    size = len(batch) * total_mib / 1e9
    row("raw os.write, 1 MiB writes", f"{size / raw:.2f} GB/s")
    row("Log.append, 1 MiB batches", f"{size / appended:.2f} GB/s",
        f"{appended / raw:.2f}x raw time, {appended / total_mib * 1e6:.0f} us/append")


def bench_reads(root: str, sizes_mib: list[int], reads: int) -> None:
    print("reads at random offsets (1 KiB batches, 16 MiB segments)", flush=True)
    batch = make_batch(10, 80)
    per_mib = MIB // len(batch)
    for size in sizes_mib:
        path = os.path.join(root, f"read-{size}")
        log = open_log(path, LogConfig(segment_bytes=16 * MIB))
        fill(log, batch, size * per_mib)
        rng = random.Random(1)
        end = log.log_end_offset
        offsets = [rng.randrange(end) for _ in range(reads)]
        for max_bytes, label in ((len(batch), "one batch"), (MIB, "1 MiB")):
            start = time.perf_counter()
            for offset in offsets:
                log.read(offset, max_bytes).read()
            took = time.perf_counter() - start
            row(f"read, {size} MiB log, {label}", f"{took / reads * 1e6:.1f} us/read",
                f"{len(log.segments)} segments")
        log.abandon()
        shutil.rmtree(path)


def bench_recovery(root: str, sizes_mib: list[int]) -> None:
    print("recovery after an unclean stop", flush=True)
    batch = make_batch(100, 160)  # ~16 KiB batches
    per_mib = MIB // len(batch)
    for size in sizes_mib:
        path = os.path.join(root, f"recover-{size}")
        log = open_log(path, LogConfig(segment_bytes=64 * MIB))
        fill(log, batch, 8 * per_mib)
        log.flush()
        point = log.recovery_point
        fill(log, batch, size * per_mib)
        log.abandon()
        start = time.perf_counter()
        again = open_log(path, LogConfig(segment_bytes=64 * MIB), recovery_point=point)
        took = time.perf_counter() - start
        assert again.log_end_offset == log.log_end_offset
        # Recovery starts at the segment holding the recovery point, so the 8 MiB flushed
        # before it in the same segment are scanned again in every row.
        rate = f"{size / took:.0f} MiB/s" if size else "rescans the 8 MiB flushed prefix"
        row(f"recover, {size} MiB unflushed", f"{took * 1000:.1f} ms", rate)
        again.abandon()
        shutil.rmtree(path)


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def bench_partitions(root: str, partitions: int) -> None:
    print(f"{partitions} partitions (one 1 KiB batch each, max 1024 open files)", flush=True)
    path = os.path.join(root, "partitions")
    batch = make_batch(10, 80)
    gc.collect()
    rss0, fds0 = rss_kib(), open_fds()
    manager = LogManager([path], LogConfig(), SystemClock(), max_open_files=1024)
    manager.startup()
    start = time.perf_counter()
    for p in range(partitions):
        fill(manager.get_or_create_log("bench", p), batch, 1)
    created = time.perf_counter() - start
    gc.collect()
    row("create + first append", f"{created / partitions * 1e6:.0f} us/partition")
    row("memory after create", f"{(rss_kib() - rss0) / partitions:.1f} KiB/partition",
        f"open files +{open_fds() - fds0}")
    manager.shutdown()
    del manager
    gc.collect()
    rss1 = rss_kib()
    start = time.perf_counter()
    manager = LogManager([path], LogConfig(), SystemClock(), max_open_files=1024)
    manager.startup()
    loaded = time.perf_counter() - start
    gc.collect()
    row("reload (clean shutdown)", f"{loaded / partitions * 1e6:.0f} us/partition",
        f"{loaded:.1f} s total")
    row("memory after reload", f"{max(rss_kib() - rss1, 0) / partitions:.1f} KiB/partition",
        f"open files +{open_fds() - fds0}")
    manager.shutdown()
    shutil.rmtree(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", help="directory for the logs (default: a temporary one)")
    parser.add_argument("--append-mib", type=int, default=256)
    parser.add_argument("--small-mib", type=int, default=16)
    parser.add_argument("--large-mib", type=int, default=256)
    parser.add_argument("--reads", type=int, default=5000)
    parser.add_argument("--recovery-mib", default="0,16,64,128")
    parser.add_argument("--partitions", type=int, default=10_000)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="bench-storage-", dir=args.dir)
    try:
        bench_append(root, args.append_mib)
        bench_reads(root, [args.small_mib, args.large_mib], args.reads)
        bench_recovery(root, [int(x) for x in args.recovery_mib.split(",")])
        bench_partitions(root, args.partitions)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    width = max(len(r[0]) for r in ROWS)
    print("\n" + "measurement".ljust(width) + "  " + "result".rjust(16) + "  note")
    print("-" * (width + 40))
    for name, value, note in ROWS:
        print(f"{name.ljust(width)}  {value:>16}  {note}")


if __name__ == "__main__":
    main()
