#!/usr/bin/env python3
"""Benchmark odradek against Tansu and the machine's limits: ``.venv/bin/python bench/run.py``.

``--quick`` finishes in under 3 minutes; the default full run takes longer (see
bench/README.md). Results: a table in the terminal, ``bench/results/latest.json``, PNG plots
in ``bench/results/``, and the README section in ``bench/results/performance.md``
(``--update-readme`` also writes it into bench/README.md). ``--report-only`` redraws all of
that from an existing JSON file without measuring.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console  # noqa: E402

from bench.harness import markdown, plots, report, results  # noqa: E402
from bench.harness.config import WORKLOADS, parse_size_mib, preset  # noqa: E402

BENCH = Path(__file__).resolve().parent


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(float(x)) for x in text.split(",") if x.strip())


def _sizes(text: str) -> tuple[int, ...]:
    return tuple(parse_size_mib(x) for x in text.split(",") if x.strip())


def _workloads(text: str) -> tuple[str, ...]:
    names = tuple(x.strip() for x in text.split(",") if x.strip())
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown workloads {unknown}; known: {', '.join(WORKLOADS)}")
    return names


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes, 3 reps: under 3 minutes")
    p.add_argument("--workloads", type=_workloads, help=f"comma list of: {', '.join(WORKLOADS)}")
    p.add_argument("--profile", action="store_true", help="add the py-spy profiles (full runs have them)")
    p.add_argument("--reps", type=int, help="alternating runs per broker and workload")
    p.add_argument("--records", type=int, help="100-byte records per kcat run")
    p.add_argument("--producers", type=int, help="kcat producer processes per produce run")
    p.add_argument("--bandwidth-mib", type=int, help="MiB per raw produce/consume run")
    p.add_argument("--latency-rates", type=_ints, help="records/s, comma list")
    p.add_argument("--latency-seconds", type=float)
    p.add_argument("--partition-counts", type=_ints, help="comma list, e.g. 10,1000,10000")
    p.add_argument("--log-sizes", type=_sizes, dest="log_sizes_mib", help="e.g. 1G,20G")
    p.add_argument("--peer-log-cap", type=parse_size_mib, dest="peer_log_cap_mib",
                   help="largest log size Tansu (in memory) runs, e.g. 1G")
    p.add_argument("--keep-work", action="store_true", default=None,
                   help="keep the brokers' data in bench/results/work after the run")
    p.add_argument("--update-readme", action="store_true", help="write the section into bench/README.md (and its summary into README.md)")
    p.add_argument("--report-only", type=Path, metavar="JSON", help="render an existing results file")
    return p.parse_args(argv)


def render(res: dict, console: Console, update_readme: bool) -> None:
    out_dir = BENCH / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    report.show(res, console)
    text = markdown.section(res)
    (out_dir / "performance.md").write_text(text + "\n")
    if update_readme:
        markdown.update_readme(BENCH / "README.md", text)
        # The top-level README's Performance section: the short form, between its markers.
        if not markdown.update_readme(BENCH.parent / "README.md", markdown.summary(res),
                                      append_if_missing=False):
            console.print("[yellow]README.md has no bench:results markers: not updated")
    for path in plots.write_all(res, out_dir):
        console.print(f"plot: {path}")


def main(argv=None) -> int:
    args = parse_args(argv)
    console = Console()
    if not console.is_terminal:
        console = Console(width=160)  # logs and pipes: keep the tables readable
    if args.report_only:
        render(results.read(args.report_only), console, args.update_readme)
        return 0
    from bench.harness.session import Session  # imports the brokers' and clients' modules

    workloads = args.workloads
    if args.profile and workloads is None:
        workloads = preset(args.quick).workloads + ("profile",)
    config = preset(args.quick, reps=args.reps, records=args.records, producers=args.producers,
                    bandwidth_mib=args.bandwidth_mib, latency_rates=args.latency_rates,
                    latency_seconds=args.latency_seconds, partition_counts=args.partition_counts,
                    log_sizes_mib=args.log_sizes_mib, peer_log_cap_mib=args.peer_log_cap_mib,
                    workloads=workloads, keep_work=args.keep_work)
    begin = time.perf_counter()
    session = Session(config, console)
    try:
        session.run()
    except KeyboardInterrupt:
        console.print("[yellow]interrupted: reporting what was measured")
    res = results.collect(session)
    res["timings"]["total"] = time.perf_counter() - begin
    path = results.write(res, session.results_dir)
    render(res, console, args.update_readme)
    console.print(f"results: {path} ({res['timings']['total']:.0f} s)")
    return 1 if res["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
