"""One benchmark run: the brokers, the clients, the workloads in order, and what they found.

The session starts the two main brokers side by side (odradek with default settings, data on
disk under ``work_dir``; Tansu in memory), runs the selected workloads (``WORKLOADS``, in that
order), and collects ``comparisons``, ``limits`` and ``profiles``. Workloads that need another
broker configuration or an empty broker get one from ``fresh_odradek`` / ``fresh_tansu`` and
hand it back with ``discard``. A workload that fails is recorded in ``errors`` and the run goes
on with the next; every broker process is stopped at the end, whatever happened.
"""

from __future__ import annotations

import shutil
import time
import traceback
from pathlib import Path

from rich.console import Console

from . import kcat as kcat_module
from . import machine, machine_limits
from .brokers import REPO, OdradekBroker, TansuBroker, tansu_version
from .comparison import Comparison
from .config import RunConfig
from .workloads.consume import consume_100b, consume_bandwidth
from .workloads.end_to_end import end_to_end_latency
from .workloads.group_commit import group_commit
from .workloads.log_size import log_size
from .workloads.partitions import partition_scale
from .workloads.produce import produce_100b, produce_bandwidth
from .workloads.profile import profiles


def limits(session) -> None:
    cfg = session.config
    session.limits = machine_limits.measure(session.work_dir / "limits", cfg.limits_mib,
                                            cfg.fsync_count)
    session.log(f"limits: {session.limits}")


WORKLOADS = {
    "limits": [limits],
    "produce": [produce_100b],
    "bandwidth": [produce_bandwidth],
    "consume": [consume_100b, consume_bandwidth],
    "latency": [end_to_end_latency],
    "group_commit": [group_commit],
    "partitions": [partition_scale],
    "log_size": [log_size],
    "profile": [profiles],
}


class Session:
    def __init__(self, config: RunConfig, console: Console | None = None) -> None:
        self.config = config
        self.console = console or Console()
        self.work_dir = (REPO / config.work_dir).resolve()
        self.results_dir = (REPO / config.results_dir).resolve()
        self.comparisons: list[Comparison] = []
        self.limits: dict = {}
        self.profiles: dict = {}
        self.errors: list[dict] = []
        self.timings: dict[str, float] = {}
        self._brokers: list = []
        self._main: dict = {}
        shutil.rmtree(self.work_dir, ignore_errors=True)
        self.work_dir.mkdir(parents=True)
        self.results_dir.mkdir(parents=True, exist_ok=True)
        self.shim = kcat_module.librdkafka_shim(self.work_dir)
        self.kcat = kcat_module.Kcat(self.shim)
        self.versions = {**kcat_module.versions(self.shim), "tansu": tansu_version()}
        self.machine = machine.describe(self.work_dir, REPO, self.versions)

    # --- brokers ------------------------------------------------------------------------
    def main_odradek(self) -> OdradekBroker:
        if "odradek" not in self._main:
            self._main["odradek"] = self._track(OdradekBroker(self.work_dir / "odradek-main").start())
        return self._main["odradek"]

    def main_tansu(self) -> TansuBroker:
        if "tansu" not in self._main:
            self._main["tansu"] = self._track(TansuBroker(self.work_dir / "tansu-main").start())
        return self._main["tansu"]

    def main_brokers(self) -> list:
        return [self.main_odradek(), self.main_tansu()]

    def recycle_tansu(self) -> None:
        """A new main Tansu: its memory engine keeps every byte it was sent until it exits."""
        old = self._main.pop("tansu", None)
        if old is not None:
            self.discard(old)

    def fresh_odradek(self, name: str, **overrides: str) -> OdradekBroker:
        return self._track(OdradekBroker(self.work_dir / f"odradek-{name}", **overrides).start())

    def fresh_tansu(self, name: str) -> TansuBroker:
        return self._track(TansuBroker(self.work_dir / f"tansu-{name}").start())

    def _track(self, broker):
        self._brokers.append(broker)
        return broker

    def discard(self, broker) -> None:
        broker.wipe()
        if broker in self._brokers:
            self._brokers.remove(broker)

    def stop_all(self) -> None:
        for broker in list(self._brokers):
            try:
                broker.stop()
            except Exception as e:  # noqa: BLE001 - keep stopping the others
                self.log(f"stopping {broker.name}: {e}")
        self._brokers.clear()
        self._main.clear()

    # --- helpers for workloads -------------------------------------------------------------
    def records_file(self, count: int) -> Path:
        return kcat_module.records_file(self.work_dir / f"records-{count}.txt", count)

    def log(self, message: str) -> None:
        self.console.log(message)

    def show(self, comp: Comparison) -> None:
        parts = []
        for broker in comp.runs:
            t, c = comp.median(broker, "throughput"), comp.median(broker, "cpu_per_unit")
            parts.append(f"{broker} {t:,.3g} {comp.unit}, {c:.3g} {comp.cost_unit}")
        self.log(f"{comp.title}: " + "; ".join(parts))

    # --- the run ---------------------------------------------------------------------------
    def run(self) -> None:
        try:
            for name, fns in WORKLOADS.items():
                if name not in self.config.workloads:
                    continue
                begin = time.perf_counter()
                for fn in fns:
                    try:
                        fn(self)
                    except Exception as e:  # noqa: BLE001 - recorded, the run goes on
                        self.errors.append({"workload": fn.__name__, "error": repr(e),
                                            "traceback": traceback.format_exc()})
                        self.log(f"[red]{fn.__name__} failed: {e!r}")
                self.timings[name] = time.perf_counter() - begin
                if name in ("bandwidth", "consume", "group_commit"):
                    self.recycle_tansu()
        finally:
            self.stop_all()
            if not self.config.keep_work:
                # Broker data (gigabytes) would otherwise sit in the tree for every grep to read.
                shutil.rmtree(self.work_dir, ignore_errors=True)
