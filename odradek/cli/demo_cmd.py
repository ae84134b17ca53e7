"""``odradek demo [--events N] [--duration S] [--follow] [--bootstrap-server HOST:PORT | --brokers N]``:
the activity-stream pipeline, end to end (see ``odradek.demo.pipeline``).

The activity-stream pipeline, end to end: it starts a broker of its own unless given one, produces a synthetic activity stream, runs
a PySpark streaming job and a batch loader, and prints a report. Needs ``odradek[demo]``
(pyspark, pyarrow, matplotlib) and Java.
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
    p.add_argument("--brokers", type=int, default=1, metavar="N",
                   help="run on a local cluster of N brokers and ZooKeeper of its own (default 1: one broker)")
    p.add_argument("--dir", metavar="PATH",
                   help="where the broker data, checkpoints and warehouse live (default data/demo; with "
                        "--brokers, data/demo-cluster: the streams' checkpoints belong to one cluster)")
    p.add_argument("--members", type=int, default=1000, help="members of the synthetic site (default 1000)")
    p.add_argument("--console-port", type=int, default=0, metavar="PORT",
                   help="with --follow, the web console's port on 127.0.0.1 (default 0: a free one; -1: no console)")


def run(args) -> int:
    if args.events <= 0 or args.duration < 0 or args.members <= 0 or args.brokers <= 0:
        raise CliError("--events, --members and --brokers must be positive, --duration not negative")
    if args.brokers > 1:
        from odradek.server.local_cluster.zookeeper_server import environment_note

        if args.bootstrap_server:
            raise CliError("--brokers starts a cluster of the demo's own; with --bootstrap-server, leave it out")
        if environment_note():
            raise CliError(environment_note())
    try:
        from odradek.demo.pipeline import DemoConfig, run as run_pipeline
    except ImportError as e:
        raise CliError(f"the demo needs the demo extra (pip install 'odradek[demo]'): {e}") from None
    directory = Path(args.dir or ("data/demo" if args.brokers == 1 else "data/demo-cluster"))
    config = DemoConfig(events=args.events, duration=args.duration, follow=args.follow,
                        bootstrap=args.bootstrap_server, directory=directory, members=args.members,
                        brokers=args.brokers, console_port=args.console_port)
    run_pipeline(config)
    return 0
