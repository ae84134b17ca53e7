"""``odradek consume``: the console consumer (``kafka-console-consumer.sh``): records of a
topic to standard output, one per line.

    odradek consume --topic T --from-beginning --property print.key=true --max-messages 10
    odradek consume --topic T --partition 0 --offset 42 --output json

Where reading starts: ``--partition P --offset N|earliest|latest`` reads one partition from
there; otherwise every partition of the topic (or of the topics ``--include`` matches) from
the end, or from the start with ``--from-beginning``, without joining any group. With
``--group G`` the consumer joins the group (subscribing to the topic, or to the
``--include`` pattern), reads the partitions the group gives it from the group's committed
offsets (``--from-beginning`` then only applies where nothing is committed) and commits
what it printed. It stops after ``--max-messages`` records, after ``--timeout-ms`` without
a record, or at Ctrl-C or SIGTERM (within 2 s, even with its brokers gone:
``cli/stop_signals.py``), and says on standard error how many records it printed.

Line format: Kafka's ``DefaultMessageFormatter`` (``cli/message_formatter.py``), set with
``--property print.key=true`` (``print.timestamp``, ``print.partition``, ``print.offset``,
``print.headers``, ``print.value``, ``key.separator``, ``line.separator``, ...) or a
``--formatter-config`` properties file (``--property`` wins), for example::

    CreateTime:1700000000000<TAB>Partition:0<TAB>Offset:42<TAB>key<TAB>value

``--formatter`` takes Kafka's class names: ``kafka.tools.DefaultMessageFormatter`` (the
default) or ``kafka.tools.NoOpMessageFormatter`` (prints nothing; the count is still given),
or their ``org.apache.kafka.tools.consumer`` names.

``--output json``: one JSON object per record and line, with ``topic``, ``partition``,
``offset``, ``timestamp``, ``timestamp_type``, ``key``, ``value`` and ``headers``
(``[{"key": name, "value": ...}]``). Keys and values are UTF-8 text, or null; bytes that are
not UTF-8 appear base64-encoded under ``key_base64``/``value_base64`` instead.
"""

from __future__ import annotations

import argparse
import re
import sys
import time

from odradek.cli.common import (
    CommandError,
    add_bootstrap,
    bootstrap_from,
    check_reachable,
    client_config,
    json_bytes,
    parse_pairs,
    read_properties,
    run_command,
)
from odradek.cli.message_formatter import RecordFormat
from odradek.cli.stop_signals import StopSignals, finish, run_until_stopped

_POLL_MS = 500  # one poll's wait; --timeout-ms and Ctrl-C are checked between polls


def add_parser(sub) -> None:
    p = sub.add_parser("consume", help="print records of a topic (console consumer)",
                       description=__doc__.replace("``", ""), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bootstrap(p, "--consumer.config", "consumer")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", help="the topic to read")
    which.add_argument("--include", "--whitelist", metavar="REGEX", help="read every topic this regex matches")
    p.add_argument("--group", help="consume as a member of this consumer group (committing offsets)")
    p.add_argument("--from-beginning", action="store_true", help="start at the earliest offset, not the end")
    p.add_argument("--partition", type=int, help="read only this partition")
    p.add_argument("--offset", default=None, metavar="N|earliest|latest",
                   help="with --partition: where to start (default latest)")
    p.add_argument("--max-messages", type=int, metavar="N", help="stop after N records")
    p.add_argument("--timeout-ms", type=int, metavar="MS", help="stop after MS milliseconds without a record")
    p.add_argument("--property", action="append", default=[], metavar="NAME=VALUE",
                   help="output settings (print.key, print.timestamp, print.offset, print.partition, "
                        "print.headers, print.value, key.separator, ...), repeatable")
    p.add_argument("--formatter", default="kafka.tools.DefaultMessageFormatter", metavar="CLASS",
                   help="kafka.tools.DefaultMessageFormatter (the default) or kafka.tools.NoOpMessageFormatter")
    p.add_argument("--formatter-config", metavar="FILE", help="a properties file of output settings")
    p.add_argument("--consumer-property", action="append", default=[], metavar="NAME=VALUE",
                   help="a consumer setting with Kafka's name, repeatable")
    p.add_argument("--isolation-level", choices=("read_uncommitted", "read_committed"),
                   help="read_committed skips records of aborted transactions")
    p.add_argument("--output", choices=("text", "json"), default="text",
                   help="text (Kafka's format, default) or json (one object per line)")


def json_line(topic: str, partition: int, record, timestamp_type: str) -> bytes:
    """One record as a JSON object on one line (see the module doc)."""
    import json

    doc = {"topic": topic, "partition": partition, "offset": record.offset, "timestamp": record.timestamp,
           "timestamp_type": timestamp_type if record.timestamp >= 0 else None}
    json_bytes(doc, "key", record.key)
    json_bytes(doc, "value", record.value)
    headers = []
    for name, value in record.headers:
        header = {"key": name}
        json_bytes(header, "value", value)
        headers.append(header)
    doc["headers"] = headers
    return (json.dumps(doc, separators=(",", ":"), ensure_ascii=False) + "\n").encode()


def run(args) -> int:
    return run_command("consume", _run, args)


def _check_options(args) -> None:
    if args.partition is not None and args.include:
        raise CommandError("--partition goes with --topic, not --include")
    if args.offset is not None and args.partition is None:
        raise CommandError("--offset needs --partition")
    if args.offset is not None and args.from_beginning:
        raise CommandError("--from-beginning and --offset cannot be used together")
    if args.group and args.partition is not None:
        raise CommandError("--group and --partition cannot be used together")
    if args.offset is not None and args.offset not in ("earliest", "latest") and not args.offset.isdigit():
        raise CommandError(f"--offset must be a non-negative number, earliest or latest, not {args.offset!r}")
    if args.max_messages is not None and args.max_messages <= 0:
        raise CommandError("--max-messages must be positive")
    if args.timeout_ms is not None and args.timeout_ms < 0:
        raise CommandError("--timeout-ms must not be negative")


def _consumer_settings(args) -> tuple[str, dict]:
    from odradek.client import AsyncConsumer

    props = read_properties(args.command_config)
    props.update(parse_pairs(args.consumer_property, "--consumer-property"))
    bootstrap = bootstrap_from(args, props)
    # As Kafka's console consumer: the group may come from --group, --consumer-property or
    # the --consumer.config file, and wherever it comes from the consumer joins it.
    if args.group and props.get("group.id", args.group) != args.group:
        raise CommandError("the group ids given with --group and in the consumer properties differ")
    args.group = args.group or props.get("group.id")
    if args.group:
        props["group.id"] = args.group
    if args.isolation_level:
        props["isolation.level"] = args.isolation_level
    props.setdefault("auto.offset.reset", "earliest" if args.from_beginning else "latest")
    props.setdefault("client.id", "odradek-console-consumer")
    return bootstrap, client_config(AsyncConsumer, props, "consumer")


def _run(args) -> int:
    props = read_properties(args.formatter_config)
    props.update(parse_pairs(args.property, "--property", strip_values=False))
    record_format = RecordFormat.from_properties(props, args.formatter)
    bootstrap, config = _consumer_settings(args)
    _check_options(args)
    check_reachable(bootstrap)
    with StopSignals() as stop:
        count = _consume(bootstrap, config, args, record_format, stop)
    print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0


def _consume(bootstrap: str, config: dict, args, record_format: RecordFormat, stop: StopSignals) -> int:
    """Start, print records until told to stop, then commit (with --group) and close; the
    number of records printed. A signal ends the start at once and bounds the last steps
    in time (``cli/stop_signals.py``)."""
    started = run_until_stopped(lambda: _started(bootstrap, config, args, record_format), stop)
    if started is None:  # a signal during the start: nothing printed, nothing to commit
        return 0
    consumer, types = started
    count = 0
    committing = False
    try:
        count = _print_records(consumer, args, record_format, types, stop)
        committing = bool(args.group)
    finally:
        def last_steps() -> None:
            try:
                if committing:
                    consumer.commit()
            finally:
                consumer.close()

        finish(last_steps, stop, "commit its offsets and leave its group" if committing else "close")
    return count


def _started(bootstrap: str, config: dict, args, record_format: RecordFormat):
    """A consumer subscribed or positioned (``_start``), and the topics' timestamp types."""
    from odradek.client import Consumer

    consumer = Consumer(bootstrap, **config)
    try:
        topics = _start(consumer, args)
        return consumer, _timestamp_types(bootstrap, topics, args, record_format)
    except BaseException:
        consumer.close()
        raise


def _start(consumer, args) -> list[str]:
    """Subscribe (with --group: the group assigns partitions and its committed offsets say
    where to start) or assign and position the consumer; the topics it reads."""
    from odradek.client import TopicPartition

    existing = consumer.topics()
    if args.topic:
        if args.topic not in existing:
            raise CommandError(f"Topic '{args.topic}' does not exist")
        topics = [args.topic]
    else:
        try:
            regex = re.compile(args.include)
        except re.error as e:
            raise CommandError(f"--include {args.include!r} is not a valid regex: {e}") from None
        topics = sorted(t for t in existing if regex.fullmatch(t) and not t.startswith("__"))
    if args.group:
        if args.topic:
            consumer.subscribe([args.topic])
        else:
            consumer.subscribe(pattern=args.include)
        return topics
    if args.partition is not None:
        count = len(consumer.partitions_for_topic(args.topic))
        if not 0 <= args.partition < count:
            raise CommandError(f"topic {args.topic} has no partition {args.partition} (it has {count})")
        partitions = [TopicPartition(args.topic, args.partition)]
    else:
        partitions = [TopicPartition(t, p) for t in topics for p in consumer.partitions_for_topic(t)]
    consumer.assign(partitions)
    if args.offset is not None and args.offset.isdigit():
        consumer.seek(partitions[0], int(args.offset))
    elif args.offset == "earliest" or args.from_beginning:
        consumer.seek_to_beginning(*partitions)
    else:
        consumer.seek_to_end(*partitions)
    return topics


def _timestamp_types(bootstrap: str, topics: list[str], args, record_format: RecordFormat) -> dict[str, str]:
    """Each topic's ``message.timestamp.type`` (CreateTime or LogAppendTime), asked only when
    timestamps are printed: the records themselves do not say."""
    types = {t: "CreateTime" for t in topics}
    if not topics or (args.output == "text" and "print.timestamp" not in record_format.flags):
        return types
    from odradek.client import AdminClient, ConfigResource, KafkaError, ResourceType

    try:
        with AdminClient(bootstrap) as admin:
            found = admin.describe_configs([ConfigResource(ResourceType.TOPIC, t) for t in topics])
    except KafkaError:
        return types  # keep CreateTime, the default, rather than fail the whole command
    for resource, entries in found.items():
        entry = entries.get("message.timestamp.type")
        if entry is not None and entry.value in ("CreateTime", "LogAppendTime"):
            types[resource.name] = entry.value
    return types


def _print_records(consumer, args, record_format: RecordFormat, types: dict[str, str], stop) -> int:
    out = getattr(sys.stdout, "buffer", None)
    write = out.write if out is not None else (lambda b: sys.stdout.write(b.decode("utf-8", "replace")))
    sys.stdout.flush()
    wanted = args.max_messages
    count = 0
    last_record = time.monotonic()
    while (wanted is None or count < wanted) and not stop.is_set():
        wait = _POLL_MS
        if args.timeout_ms is not None:
            idle_ms = (time.monotonic() - last_record) * 1000
            if idle_ms >= args.timeout_ms:
                break
            wait = min(wait, args.timeout_ms - idle_ms)
        batch = consumer.poll(wait, None if wanted is None else wanted - count)
        if not batch:
            continue
        last_record = time.monotonic()
        for (topic, partition), records in batch.items():
            ts_type = types.get(topic, "CreateTime")
            for record in records:
                if args.output == "json":
                    write(json_line(topic, partition, record, ts_type))
                else:
                    write(record_format.line(partition, record, ts_type))
                count += 1
        (out or sys.stdout).flush()
    return count
