"""``odradek demo [--events N] [--duration S] [--follow] [--bootstrap-server HOST:PORT]``:
the activity-stream pipeline, end to end (see ``odradek.demo.pipeline``).

The activity-stream pipeline, end to end: it starts a broker of its own unless given one, produces a synthetic activity stream, runs
a PySpark streaming job and a batch loader, and prints a report. Needs ``odradek[spark]``
(pyspark, pyarrow) and Java.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from odradek.cli.common import CommandError as CliError


def add_parser(sub) -> None:
    p = sub.add_parser("demo", help="run the activity-stream pipeline demo",
                       description=__doc__.split("\n\n", 1)[1].replace("``", ""),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--events", type=int, default=20_000, metavar="N", help="events to produce (default 20000)")
    p.add_argument("--duration", type=float, default=0.0, metavar="S",
                   help="spread the events over S seconds while the streaming job runs (default: at once)")
    p.add_argument("--follow", action="store_true",
                   help="keep producing and streaming until Ctrl-C, then report")
    p.add_argument("--bootstrap-server", metavar="HOST:PORT", help="use this broker instead of an embedded one")
    p.add_argument("--dir", default="data/demo", metavar="PATH",
                   help="where the broker data, checkpoints and warehouse live (default data/demo)")
    p.add_argument("--members", type=int, default=1000, help="members of the synthetic site (default 1000)")


def run(args) -> int:
    if args.events <= 0 or args.duration < 0 or args.members <= 0:
        raise CliError("--events and --members must be positive, --duration not negative")
    try:
        from odradek.demo.pipeline import DemoConfig, run as run_pipeline
    except ImportError as e:
        raise CliError(f"the demo needs the spark extra (pip install 'odradek[spark]'): {e}") from None
    config = DemoConfig(events=args.events, duration=args.duration, follow=args.follow,
                        bootstrap=args.bootstrap_server, directory=Path(args.dir), members=args.members)
    run_pipeline(config)
    return 0
