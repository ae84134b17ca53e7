#!/usr/bin/env python3
"""A/B: odradek at two revisions side by side, the same clients, alternating runs.

  .venv/bin/python bench/ab.py [REV] [--against REV2] [--workloads produce,produce8,consume,bandwidth,fetch]
                                   [--reps N] [--records N] [--client-quota KEY=VALUE] [--authorizer]

B is the git revision REV (HEAD~3, a sha, a branch; default BASELINE, 7c6971c); A is this checkout's working tree as it
is now, uncommitted changes included, or the revision REV2 with --against. Each revision is
checked out as a detached git worktree under bench/results/ab/<sha[:12]>/ with its C
extensions built there; the worktrees are KEPT for the next run (--prune removes them). The
working tree's own extensions are used as they are (a warning names any older than its .c).

Both brokers run at the same time on 127.0.0.1 ephemeral ports, each from its own tree, data
under bench/results/ab/run-*/ (deleted at the end, also on failure or Ctrl-C). Every
workload warms each broker up once, then runs --reps times per broker in the order A,B, B,A,
A,B, ... Reported per workload: the broker's CPU seconds per million records (per GB for
bandwidth) and the client's throughput, median and range per side, and B/A of the medians,
with the noise (CPU other processes used); in the terminal and in
bench/results/ab-<time>.json. Trust the CPU column: throughput is often the client's limit.

The CPU budget: broker CPU per record must stay at or below BASELINE's (7c6971c, the broker
before the cluster work; bench/README.md, "CPU budget against 7c6971c"). When B is BASELINE,
the summary ends with one budget line per workload: A's CPU per unit over BASELINE's (A/B of
the medians) and whether A is within it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import signal
import statistics
import sys
import threading
import time
import traceback
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench.harness import machine, revision  # noqa: E402
from bench.harness.ab_workloads import RUNNERS, Clients  # noqa: E402
from bench.harness.brokers import REPO, TreeBroker  # noqa: E402
from bench.harness.comparison import Comparison  # noqa: E402
from bench.harness.kcat import versions  # noqa: E402
from bench.harness.measure import noise_share  # noqa: E402

WORKLOADS = tuple(RUNNERS)
DEFAULT_WORKLOADS = ("produce", "consume", "bandwidth", "fetch")  # produce8 on request
SIDES = ("A", "B")
# Broker CPU per record (per GB) must stay at or below this revision's: the default side B.
BASELINE = "7c6971c"
MIB = 1 << 20
RESULTS = REPO / "bench" / "results"
METRICS = ("cpu_per_unit", "throughput")


# --- command line --------------------------------------------------------------------------
def _workloads(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown workloads {unknown}; known: {', '.join(WORKLOADS)}")
    return names


def _positive(text: str) -> int:
    value = int(float(text))
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def _quotas(text: str) -> dict[str, float]:
    try:
        return {k.strip(): float(v) for k, v in (x.split("=", 1) for x in text.split(",") if x.strip())}
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE[,KEY=VALUE...], got {text!r}") from None


def set_client_quotas(brokers: list, quotas: dict[str, float]) -> None:
    """``quotas`` as every client's default (``/config/clients/<default>``) on each broker,
    through AlterClientQuotas with odradek's admin client (a revision older than client quotas
    refuses it, and the run stops)."""
    from odradek.client.admin_quotas import ClientQuotaAlteration
    from odradek.client.sync import AdminClient

    for broker in brokers:
        admin = AdminClient(broker.bootstrap)
        try:
            result = admin.alter_client_quotas([ClientQuotaAlteration({"client-id": None}, list(quotas.items()))])
        finally:
            admin.close()
        errors = [e for e in result.values() if e is not None]
        if errors:
            raise RuntimeError(f"{broker.name}: AlterClientQuotas refused: {errors}")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Worktrees are kept under bench/results/ab/ for reuse; --prune removes them. "
               "Wrap a run in `flock /tmp/bench.lock` on a shared machine.")
    p.add_argument("rev", nargs="?", metavar="REV",
                   help=f"git revision of side B (default: the CPU budget's baseline, {BASELINE})")
    p.add_argument("--against", metavar="REV2",
                   help="git revision of side A (default: the working tree, uncommitted changes included)")
    p.add_argument("--workloads", type=_workloads, default=DEFAULT_WORKLOADS,
                   help=f"comma list of: {', '.join(WORKLOADS)} (default: {','.join(DEFAULT_WORKLOADS)})")
    p.add_argument("--reps", type=_positive, default=6, help="measured runs per broker and workload (default 6)")
    p.add_argument("--records", type=_positive, default=1_000_000,
                   help="100-byte records per kcat produce / consume run (default 1,000,000)")
    p.add_argument("--bandwidth-mib", type=_positive, default=256,
                   help="MiB of ~1 MiB batches per bandwidth run (default 256)")
    p.add_argument("--client-quota", type=_quotas, default={}, metavar="KEY=VALUE[,...]",
                   help="client quotas every client gets (/config/clients/<default>) on both brokers "
                        "before measuring, e.g. request_percentage=1000000 (set high: never reached)")
    p.add_argument("--authorizer", action="store_true",
                   help="run both brokers with Kafka's ACL authorizer on, the clients (User:ANONYMOUS) "
                        "allowed as super.users: every request is authorized")
    p.add_argument("--prune", action="store_true",
                   help="remove the worktrees kept under bench/results/ab/ and exit")
    args = p.parse_args(argv)
    if args.prune and (args.rev or args.against):
        p.error("--prune takes no revisions")
    if not args.prune and not args.rev:
        args.rev = BASELINE
    return args



# --- summary -------------------------------------------------------------------------------
def spread(values: list[float]) -> dict | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "n": len(values)}


def summarize(runs: dict[str, list[dict]], cores: int) -> dict:
    """Per side: median and range of each headline metric, of the client's busy share and of
    the noise; ``ratio``: B's median over A's, per metric (None if a side has no runs)."""
    sides = {}
    for side in SIDES:
        rs = runs.get(side, [])
        sides[side] = {m: spread([r.get(m) for r in rs]) for m in METRICS}
        sides[side]["client_busy"] = spread([r["client_cpu_s"] / r["wall_s"] for r in rs
                                             if r.get("wall_s")])
        sides[side]["noise"] = spread([noise_share(r, cores) for r in rs])
    ratio = {}
    for m in METRICS:
        a, b = sides["A"][m], sides["B"][m]
        ratio[m] = b["median"] / a["median"] if a and b and a["median"] else None
    noise = spread([noise_share(r, cores) for side in SIDES for r in runs.get(side, [])])
    return {"sides": sides, "ratio": ratio, "noise": noise}


def budget(results: dict, baseline_sha: str) -> list[str]:
    """One line per workload measured when side B is the baseline commit ``baseline_sha``:
    A's broker CPU per unit as a multiple of the baseline's (A/B of the medians, the inverse
    of the table's B/A) and whether that is within the budget (at most 1.00x); none when B is
    another revision."""
    if results["sides"]["B"]["sha"] != baseline_sha:
        return []
    lines = []
    for w in results["workloads"].values():
        ratio = w["summary"]["ratio"]["cpu_per_unit"]
        if not ratio:
            continue
        over = 1 / ratio
        verdict = "within" if over <= 1 else f"over by {100 * (over - 1):.0f}%"
        lines.append(f"CPU budget ({BASELINE}): {w['title']}: A uses {over:.2f}x the baseline's "
                     f"{w['cost_unit']}, {verdict}")
    return lines


def overall_noise(results: dict) -> dict | None:
    cores = results["machine"]["cores"]
    return spread([noise_share(r, cores) for w in results["workloads"].values()
                   for runs in w["runs"].values() for r in runs])


def _num(x: float | None, unit: str = "") -> str:
    if x is None:
        return "-"
    if unit == "rec/s":
        return f"{x / 1e3:,.0f}k"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:#.3g}"


def table(results: dict) -> Table:
    a, b = results["sides"]["A"], results["sides"]["B"]
    t = Table(title=f"A/B: A = {_side_label(a)}, B = {_side_label(b)}; medians of "
                    f"{results['config']['reps']} alternating runs per side",
              caption="B/A < 1.00x on CPU: B costs the broker less. noise: CPU other processes "
                      "used, as a share of the machine (median, max over the runs).",
              title_justify="left")
    for i, h in enumerate(["workload", "metric", "A median", "A min-max", "B median",
                           "B min-max", "B/A", "noise"]):
        t.add_column(h, justify="left" if i < 2 else "right")
    for w in results["workloads"].values():
        s = w["summary"]
        noise = s["noise"]
        for metric, unit in (("cpu_per_unit", w["cost_unit"]), ("throughput", w["unit"])):
            cells = []
            for side in SIDES:
                sp = s["sides"][side][metric] or {}
                u = w["unit"] if metric == "throughput" else ""
                cells += [_num(sp.get("median"), u),
                          f"{_num(sp.get('min'), u)}-{_num(sp.get('max'), u)}" if sp else "-"]
            r = s["ratio"][metric]
            t.add_row(_workload_cell(w, results["config"]["reps"]) if metric == "cpu_per_unit"
                      else "", unit, *cells,
                      "-" if r is None else f"{r:.2f}x",
                      f"{100 * noise['median']:.0f}%, {100 * noise['max']:.0f}%"
                      if noise and metric == "cpu_per_unit" else "")
    return t


def _workload_cell(w: dict, reps: int) -> str:
    """The title, and the runs per side when a failure or Ctrl-C cut the workload short."""
    counts = [(w["summary"]["sides"][side]["cpu_per_unit"] or {}).get("n", 0) for side in SIDES]
    return w["title"] if counts == [reps] * len(SIDES) else f"{w['title']} ({'+'.join(map(str, counts))} runs)"


def _side_label(side: dict) -> str:
    dirty = f" + {len(side['dirty'])} uncommitted" if side["dirty"] else ""
    return f"{side['label']} ({side['sha'][:12]}{dirty})"


def show(results: dict, console: Console) -> None:
    console.print(table(results))
    noise = results.get("noise")
    if noise:
        console.print(f"noise over the run: median {100 * noise['median']:.0f}%, "
                      f"range {100 * noise['min']:.0f}-{100 * noise['max']:.0f}% of the machine")
    for line in results.get("budget", []):
        console.print(line)
    for side, stale in results.get("stale_extensions", {}).items():
        if stale:
            console.print(f"[yellow]{side}: C extensions older than their sources: {', '.join(stale)}")
    for e in results.get("errors", []):
        console.print(f"[red]{e['workload']} failed: {e['error']}")


# --- the run -------------------------------------------------------------------------------
def trees(args: argparse.Namespace) -> dict[str, revision.Tree]:
    root = revision.ROOT  # read now, not at import: tests point it elsewhere
    a = revision.working_tree() if args.against is None else revision.checkout(args.against, root)
    return {"A": a, "B": revision.checkout(args.rev, root)}


# --authorizer: the clients connect over PLAINTEXT as User:ANONYMOUS, allowed everything
AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:ANONYMOUS"}


def start_brokers(sides: dict[str, revision.Tree], work_dir: Path, brokers: list, **props: str) -> None:
    """One broker per side (``props``: more broker properties), appended to ``brokers`` before
    it starts, so the caller's cleanup also stops one whose start (or whose neighbour's)
    failed halfway."""
    for name, tree in sides.items():
        broker = TreeBroker(name, tree.path, work_dir / f"data-{name}", **props)
        brokers.append(broker)
        broker.start()


def measure_all(args, sides, work_dir: Path, brokers: list, console: Console, results: dict) -> None:
    clients = Clients(args, work_dir)
    results["machine"] = machine.describe(work_dir, REPO, versions(clients.shim))
    start_brokers(sides, work_dir, brokers, **(AUTHORIZER if args.authorizer else {}))
    if args.client_quota:
        set_client_quotas(brokers, args.client_quota)
    for name in args.workloads:
        begin, clients.current = time.perf_counter(), None
        try:
            comp = RUNNERS[name](clients, brokers)
        except BaseException as e:
            # The runs finished before a failure or Ctrl-C are still measurements: keep them.
            record(results, name, clients.current, begin)
            if not isinstance(e, Exception):
                raise
            results["errors"].append({"workload": name, "error": repr(e),
                                      "traceback": traceback.format_exc()})
            console.log(f"[red]{name} failed: {e!r}")
            continue
        ratio = record(results, name, comp, begin)["summary"]["ratio"]["cpu_per_unit"]
        console.log(f"{name}: B/A broker CPU {ratio:.3f}" if ratio else f"{name}: done")


def record(results: dict, name: str, comp: Comparison | None, begin: float) -> dict | None:
    """``comp``'s runs and summary under ``results["workloads"][name]`` (if it has runs)."""
    if comp is None or not comp.runs:
        return None
    entry = results["workloads"][name] = {
        "title": comp.title, "client": comp.client, "unit": comp.unit,
        "cost_unit": comp.cost_unit, "runs": comp.runs, "seconds": time.perf_counter() - begin,
        "summary": summarize(comp.runs, results["machine"]["cores"])}
    return entry


def cleanup(brokers: list, work_dir: Path, console: Console, spared: frozenset = frozenset()) -> None:
    """Stop the brokers, then any client process of ours still running (a kcat cut short by
    Ctrl-C) but the ``spared`` ones, then delete the brokers' data."""
    for broker in brokers:
        try:
            broker.stop()
        except Exception as e:  # noqa: BLE001 - keep stopping the others
            console.log(f"stopping broker {broker.name}: {e!r}")
    stop_children(spared)
    shutil.rmtree(work_dir, ignore_errors=True)


def children() -> frozenset[int]:
    """The processes this process started that still run (from /proc's parent pids)."""
    me = os.getpid()
    kids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_bytes()
            except OSError:
                continue
            if int(stat[stat.rindex(b")") + 2:].split()[1]) == me:
                kids.add(int(entry.name))
    return frozenset(kids)


def stop_children(spared: frozenset = frozenset(), grace: float = 5.0) -> None:
    """SIGTERM, then SIGKILL, to this process's children but ``spared``: ``run_ab`` spares
    those that ran before it began (a caller's own, e.g. a test session's Spark JVM)."""
    kids = sorted(children() - spared)
    for pid in kids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for pid in kids:
        while time.monotonic() < deadline and _reap(pid) is None:
            time.sleep(0.05)
        if _reap(pid) is None:
            _signal(pid, signal.SIGKILL)
            _reap(pid, block=True)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _reap(pid: int, block: bool = False) -> int | None:
    """The pid once it has exited (and is reaped), else None."""
    try:
        done, _ = os.waitpid(pid, 0 if block else os.WNOHANG)
    except ChildProcessError:
        return pid  # already reaped elsewhere
    return done or None


def run_ab(args: argparse.Namespace, console: Console, results_dir: Path = RESULTS) -> dict:
    """Build the trees, run the workloads, write and return the results (also when a
    workload failed or the run was interrupted; the brokers and their data are gone after)."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    spared = children()
    sides = trees(args)
    for name, tree in sides.items():
        found = revision.imported_from(tree.path)
        if found != tree.path / "odradek":
            raise revision.RevisionError(f"{name}: {tree.path} imports odradek from {found}")
    results = {"date": stamp, "sides": {n: t.to_json() for n, t in sides.items()},
               "config": {"reps": args.reps, "records": args.records, "client_quota": args.client_quota,
                          "authorizer": args.authorizer,
                          "bandwidth_mib": args.bandwidth_mib, "workloads": list(args.workloads)},
               "stale_extensions": {n: revision.stale_extensions(t.path) for n, t in sides.items()},
               "machine": {"cores": os.cpu_count()}, "workloads": {}, "errors": []}
    work_dir = revision.ROOT / f"run-{stamp}-{os.getpid()}"
    work_dir.mkdir(parents=True)
    brokers: list = []
    try:
        measure_all(args, sides, work_dir, brokers, console, results)
    except KeyboardInterrupt:
        results["errors"].append({"workload": "-", "error": "interrupted"})
        console.print("[yellow]interrupted: reporting what was measured")
    finally:
        with _signals_ignored():  # a second Ctrl-C must not leave brokers or data behind
            cleanup(brokers, work_dir, console, spared)
    results["noise"] = overall_noise(results)
    results["budget"] = budget(results, revision.resolve(BASELINE))
    results_dir.mkdir(parents=True, exist_ok=True)
    results["path"] = str(results_dir / f"ab-{stamp}.json")
    Path(results["path"]).write_text(json.dumps(results, indent=1, default=str))
    return results


@contextmanager
def _signals_ignored():
    main = threading.current_thread() is threading.main_thread()
    saved = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)
             } if main else {}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv=None) -> int:
    args = parse_args(argv)
    console = Console() if Console().is_terminal else Console(width=160)
    if args.prune:
        for path in revision.prune(revision.ROOT):
            console.print(f"removed worktree {path}")
        return 0
    signal.signal(signal.SIGTERM, _interrupt)  # `kill` and `timeout` clean up like Ctrl-C
    try:
        results = run_ab(args, console)
    except KeyboardInterrupt:  # while checking out or building: no broker was started yet
        return 130
    except revision.RevisionError as e:
        console.print(f"[red]{e}")
        return 2
    show(results, console)
    console.print(f"results: {results['path']}")
    return 1 if results["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
