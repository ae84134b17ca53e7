"""``odradek mirror``: copy topics from one cluster to another, exactly once (MirrorMaker 2's
exactly-once source, in one process).

    odradek mirror --source 127.0.0.1:9092 --target 127.0.0.1:9192 --topics 'orders|payments'
    odradek mirror --source A:9092 --target B:9092 --topics 'events.*' --group-id dc1-to-dc2 \\
        --sync-topic-configs --refresh-topics-interval-seconds 60 --commit-interval-ms 200

Every source topic whose whole name matches --topics (a regex; commas separate alternatives)
is created on the target with the source's partition count and topic configs (those set on
the source topic, less MirrorMaker 2's config.properties.exclude list), and its records are
copied with their keys, values, headers and timestamps, each to the partition with the same
number. Topics and partitions added on the source later are found every
--refresh-topics-interval-seconds.

Exactly once: records are written in transactions (transactional.id = --transactional-id-prefix
followed by --group-id), each also committing the source positions it reached as offsets of
the consumer group --group-id on the TARGET cluster. A mirror stopped in any way, even
kill -9, and started again with the same --group-id resumes from those positions: the target
holds every source record once, for readers at isolation.level=read_committed. The source is
read at read_committed too: records of aborted source transactions are not copied.

Topics keep their names, so the source and the target must be two clusters: a mirror of a
cluster into itself (the same cluster id) is refused. A source topic that another odradek
mirror copies in from the target is left out (with a warning), so that mirrors both ways
between two clusters do not copy records round and round.

The lag (source end offset less mirrored position, per topic) is logged every
--reporting-interval ms; Ctrl-C or SIGTERM commits what was copied and prints a summary.
On a terminal, standard error also shows the catch-up as a bar: the records this run has
mirrored of those it has mirrored plus the lag, as of the last lag look-up (--no-progress:
none; with standard error not a terminal, the log lines alone).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from odradek.cli.common import CommandError, check_reachable, client_config, print_table, read_properties, run_command
from odradek.cli.progress import add_no_progress, count_bar

_BAR_REFRESH_S = 0.5  # how often the catch-up bar reads the mirror's progress

# Client settings the mirror sets itself: a file may not change them.
_MIRROR_OWN = {
    "consumer": {"group_id": "the mirror reads assigned partitions, without a source-side group",
                 "isolation_level": "the mirror reads at read_committed",
                 "enable_auto_commit": "positions are committed on the target"},
    "producer": {"transactional_id": "it is --transactional-id-prefix followed by --group-id",
                 "enable_idempotence": "the mirror's producer is transactional",
                 "allow_auto_create_topics": "the mirror creates target topics with the source's configs"},
}

_FLAGS = {"group_id": "--group-id", "refresh_topics_interval_s": "--refresh-topics-interval-seconds",
          "commit_interval_ms": "--commit-interval-ms", "reporting_interval_ms": "--reporting-interval",
          "replication_factor": "--replication-factor"}


def add_parser(sub) -> None:
    p = sub.add_parser("mirror", help="copy topics from one cluster to another, exactly once",
                       description=__doc__.split("\n\n", 1)[1].replace("``", ""),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--source", metavar="HOST:PORT", help="the source cluster's bootstrap servers "
                   "(default: bootstrap.servers of --consumer.config)")
    p.add_argument("--target", metavar="HOST:PORT", help="the target cluster's bootstrap servers "
                   "(default: bootstrap.servers of --producer.config)")
    p.add_argument("--topics", metavar="REGEX", help="the topics to mirror: a regex their whole name matches")
    p.add_argument("--group-id", default="odradek-mirror", metavar="G",
                   help="the consumer group on the target cluster that holds the mirrored positions (default odradek-mirror)")
    p.add_argument("--transactional-id-prefix", default="odradek-mirror-", metavar="P",
                   help="the target producer's transactional.id is P followed by the group id (default odradek-mirror-)")
    p.add_argument("--sync-topic-configs", action="store_true",
                   help="also keep the configs of existing target topics in step with the source (sync.topic.configs.enabled)")
    p.add_argument("--refresh-topics-interval-seconds", type=float, default=600.0, metavar="S",
                   help="how often to look for new source topics and partitions (default 600, as MirrorMaker 2)")
    p.add_argument("--commit-interval-ms", type=int, default=500, metavar="MS",
                   help="how long a transaction collects records before it commits (default 500)")
    p.add_argument("--reporting-interval", type=int, default=5000, metavar="MS",
                   help="how often to log the lag, in ms (default 5000)")
    p.add_argument("--replication-factor", type=int, default=-1, metavar="N",
                   help="replication factor of topics created on the target (default -1: the target's default)")
    p.add_argument("--consumer.config", dest="consumer_config", metavar="FILE",
                   help="a properties file of source consumer settings (Kafka's names)")
    p.add_argument("--producer.config", dest="producer_config", metavar="FILE",
                   help="a properties file of target producer settings (Kafka's names)")
    p.add_argument("--log-level", default="INFO", metavar="LEVEL", help="the mirror's log level (default INFO)")
    add_no_progress(p)


def run(args) -> int:
    return run_command("mirror", _run, args)


def _run(args) -> int:
    from odradek.cli.broker_cmd import log_level
    from odradek.mirror import MirrorConfig

    try:
        config = MirrorConfig(**_settings(args))
    except ValueError as e:  # said with the flags' names
        message = str(e)
        for field, flag in _FLAGS.items():
            message = message.replace(field, flag)
        raise CommandError(message) from None
    try:
        level = log_level(args.log_level)
    except argparse.ArgumentTypeError as e:
        raise CommandError(f"--log-level: {e}") from None
    check_reachable(config.source)
    check_reachable(config.target)
    _configure_logging(level)
    progress = asyncio.run(_mirror(config, show_progress=not args.no_progress))
    _print_summary(config, progress)
    return 0


def _settings(args) -> dict:
    """MirrorConfig's arguments from the command line; CommandError for a missing or refused one."""
    from odradek.client import AsyncConsumer, AsyncProducer
    from odradek.client.topic_filter import Whitelist

    consumer_props = read_properties(args.consumer_config)
    producer_props = read_properties(args.producer_config)
    source = args.source or consumer_props.pop("bootstrap.servers", None)
    target = args.target or producer_props.pop("bootstrap.servers", None)
    consumer_props.pop("bootstrap.servers", None)
    producer_props.pop("bootstrap.servers", None)
    missing = [flag for flag, value in (("--source", source), ("--target", target), ("--topics", args.topics))
               if not value]
    if missing:
        raise CommandError(f"Missing required option(s): {', '.join(missing)}")
    try:
        Whitelist(args.topics)
    except ValueError as e:
        raise CommandError(f"--topics: {e}") from None
    return {
        "source": source, "target": target, "topics": args.topics, "group_id": args.group_id,
        "transactional_id_prefix": args.transactional_id_prefix, "sync_topic_configs": args.sync_topic_configs,
        "refresh_topics_interval_s": args.refresh_topics_interval_seconds,
        "commit_interval_ms": args.commit_interval_ms, "reporting_interval_ms": args.reporting_interval,
        "replication_factor": args.replication_factor,
        "consumer_config": _own_checked("consumer", client_config(AsyncConsumer, consumer_props, "consumer")),
        "producer_config": _own_checked("producer", client_config(AsyncProducer, producer_props, "producer")),
    }


def _own_checked(what: str, settings: dict) -> dict:
    for name in settings:
        if name in _MIRROR_OWN[what]:
            raise CommandError(f"{what} property {name.replace('_', '.')} cannot be set: {_MIRROR_OWN[what][name]}")
    return settings


class _CurrentStderr(logging.StreamHandler):
    """A handler writing to whatever ``sys.stderr`` is when a record is logged: while the
    catch-up bar is drawn, the bar's stand-in, which prints the line above the bar."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def _configure_logging(level: int) -> None:
    logging.basicConfig(level=logging.WARNING, handlers=[_CurrentStderr()],
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("odradek.mirror").setLevel(level)


async def _mirror(config, show_progress: bool = True):
    from odradek.mirror import MirrorError, MirrorMaker

    mirror = MirrorMaker(config)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, mirror.stop)
    with count_bar("mirroring", "records", enabled=show_progress) as bar:
        drawing = asyncio.ensure_future(_draw_catch_up(mirror.progress, bar))
        try:
            return await mirror.run()
        except MirrorError as e:
            raise CommandError(str(e)) from None
        finally:
            drawing.cancel()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)


def catch_up(progress, started: dict) -> tuple[int, int, int | None]:
    """``(mirrored, total, lag)`` of this run: records mirrored since each partition's first
    position in ``started`` (filled in here as partitions appear), and mirrored plus the lag
    of the partitions whose source end is known; the lag is None until one is."""
    mirrored = lag = 0
    known = False
    for tp, p in progress.partitions.items():
        first = started.setdefault(tp, p.position)
        mirrored += max(p.position - first, 0)
        known = known or p.lag is not None
        lag += p.lag or 0
    return mirrored, mirrored + lag, lag if known else None


async def _draw_catch_up(progress, bar) -> None:
    if bar.disable:
        return
    task = bar.add_task("catch-up", total=None, note="")
    started: dict = {}
    while True:
        mirrored, total, lag = catch_up(progress, started)
        bar.update(task, completed=mirrored, total=total or None, note="lag ?" if lag is None else f"lag {lag:,}")
        await asyncio.sleep(_BAR_REFRESH_S)


def _print_summary(config, progress) -> None:
    print(f"Mirrored {progress.copied} records from {config.source} to {config.target} "
          f"(group {config.group_id} on the target)")
    rows = [(t.topic, t.partitions, t.copied, t.end, t.position, t.lag) for t in progress.topics().values()]
    print_table(("TOPIC", "PARTITIONS", "RECORDS-COPIED", "SOURCE-END-OFFSET", "MIRRORED-POSITION", "LAG"), rows)
