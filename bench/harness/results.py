"""A run's results as one JSON document: ``bench/results/latest.json`` (and a dated copy).

Layout::

    {"machine": {...date, cpu, cores, kernel, versions...}, "config": {...RunConfig...},
     "limits": {...machine_limits.measure...},
     "comparisons": [Comparison.to_json(): key, title, kind, unit, cost_unit, runs
                     {broker: [metrics per run]}, median {broker: {metric: value}},
                     ratio {metric: odradek/tansu}],
     "profiles": {"produce_100b": profiler.summarize(...) + busy, ...},
     "errors": [{"workload", "error", "traceback"}], "timings": {workload: seconds}}
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path


def collect(session) -> dict:
    config = {k: (str(v) if isinstance(v, Path) else v)
              for k, v in dataclasses.asdict(session.config).items()}
    return {"machine": session.machine, "config": config, "limits": session.limits,
            "comparisons": [c.to_json() for c in session.comparisons],
            "profiles": session.profiles, "errors": session.errors, "timings": session.timings}


def write(results: dict, results_dir: Path) -> Path:
    results_dir.mkdir(parents=True, exist_ok=True)
    text = json.dumps(results, indent=1, default=str)
    latest = results_dir / "latest.json"
    latest.write_text(text)
    stamp = results["machine"]["date"].replace(" UTC", "Z").replace(" ", "T").replace(":", "")
    (results_dir / f"run-{results['config']['mode']}-{stamp}.json").write_text(text)
    return latest


def read(path: Path) -> dict:
    return json.loads(Path(path).read_text())
