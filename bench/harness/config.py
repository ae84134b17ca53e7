"""What one run measures and how much: the ``--quick`` and full presets, and their flags.

Sizes are chosen so ``--quick`` finishes in under 3 minutes on the 2-core machine and a full
run in about 15-25; every size can be overridden from the command line (``bench/run.py -h``).
The issue's log sizes (1 GB vs 20 GB) are ``--log-sizes 1G,20G``; the defaults stay small so a
default run stays short.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

WORKLOADS = ("limits", "produce", "bandwidth", "consume", "latency", "partitions", "log_size",
             "group_commit", "profile")


@dataclass(frozen=True)
class RunConfig:
    mode: str = "full"
    reps: int = 5  # alternating runs per broker and workload
    records: int = 1_000_000  # 100-byte records per kcat run
    producers: int = 1  # kcat producer processes per run (the records are split among them)
    bandwidth_mib: int = 1024  # MiB of 1 MiB batches per raw produce / consume run
    window: int = 8  # raw produce requests in flight
    fetch_max_mib: int = 32  # max bytes of one raw Fetch
    latency_rates: tuple[int, ...] = (10_000, 50_000, 100_000, 200_000, 350_000, 500_000)
    latency_seconds: float = 10.0
    partition_counts: tuple[int, ...] = (10, 1_000, 10_000)
    partition_requests: int = 1_000  # raw Produce requests spread over all partitions
    log_sizes_mib: tuple[int, ...] = (1024, 4096)
    peer_log_cap_mib: int = 1024  # Tansu keeps its log in memory: larger sizes run odradek only
    log_append_mib: int = 256  # measured append at the end of each log size
    random_reads: int = 2_000
    group_commit_mib: int = 512
    limits_mib: int = 1024
    fsync_count: int = 500
    workloads: tuple[str, ...] = WORKLOADS
    work_dir: Path = Path("bench/results/work")  # broker data; removed after the run
    keep_work: bool = False
    results_dir: Path = Path("bench/results")
    extra: dict = field(default_factory=dict)


# The quick rates reach ~half of the kcat maximum (0.7-1.1M rec/s here, with noise), so the
# "p99 at half max" target gets a verdict from a quick run too.
QUICK = RunConfig(
    mode="quick", reps=3, records=400_000, bandwidth_mib=256,
    latency_rates=(10_000, 100_000, 350_000, 500_000),
    latency_seconds=3.0, partition_counts=(10, 1_000), partition_requests=200,
    log_sizes_mib=(64, 256), peer_log_cap_mib=256, log_append_mib=32, random_reads=300,
    group_commit_mib=128, limits_mib=256, fsync_count=200,
    workloads=tuple(w for w in WORKLOADS if w != "profile"))


def preset(quick: bool, **overrides) -> RunConfig:
    base = QUICK if quick else RunConfig()
    return replace(base, **{k: v for k, v in overrides.items() if v is not None})


def parse_size_mib(text: str) -> int:
    """``"512M"``, ``"1G"``, ``"20G"`` or a plain number of MiB."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    if t.endswith("G"):
        return int(float(t[:-1]) * 1024)
    if t.endswith("M"):
        return int(float(t[:-1]))
    return int(t)
