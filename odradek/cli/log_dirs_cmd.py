"""``odradek log-dirs``: brokers' log directories and what they hold (``kafka-log-dirs.sh``).

    odradek log-dirs --describe --bootstrap-server H:P [--broker-list 1,2] [--topic-list a,b]

Asks each broker (every broker of the cluster, or those of ``--broker-list``) for its log
directories (DescribeLogDirs) and prints the Kafka tool's lines, then its JSON on one line::

    Querying brokers for log directories information
    Received log directory information from brokers 1,2
    {"version":1,"brokers":[{"broker":1,"logDirs":[{"logDir":"/data/a","error":null,
     "partitions":[{"partition":"t-0","size":1024,"offsetLag":0,"isFuture":false}]}]}]}

A failed directory has ``"error"`` set to the name of Kafka's exception
(``org.apache.kafka.common.errors.KafkaStorageException``) and no partitions.
``--topic-list`` keeps only those topics' partitions. A broker id the cluster does not have
is refused, as Kafka refuses it.
"""

from __future__ import annotations

import argparse
import json

from odradek.cli.common import CommandError, add_bootstrap, admin_client, run_command

# Kafka's exception class for each error code a log directory may answer.
_EXCEPTIONS = {"KAFKA_STORAGE_ERROR": "org.apache.kafka.common.errors.KafkaStorageException",
               "UNKNOWN_SERVER_ERROR": "org.apache.kafka.common.errors.UnknownServerException"}


def add_parser(sub) -> None:
    p = sub.add_parser("log-dirs", help="describe the brokers' log directories",
                       description=__doc__.replace("``", ""), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bootstrap(p)
    p.add_argument("--describe", action="store_true", help="describe the log directories of the brokers")
    p.add_argument("--broker-list", default="", metavar="1,2,3",
                   help="the brokers to query (default: every broker of the cluster)")
    p.add_argument("--topic-list", default="", metavar="T1,T2",
                   help="the topics to show (default: every topic)")


def run(args) -> int:
    return run_command("log-dirs", _run, args)


def _ids(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise CommandError(f"--broker-list: {text!r} is not broker ids separated by commas") from None


def _run(args) -> int:
    if not args.describe:
        raise CommandError("Missing required argument \"[describe]\"")
    wanted = _ids(args.broker_list)
    topics = {t.strip() for t in args.topic_list.split(",") if t.strip()}
    with admin_client(args) as admin:
        cluster = sorted(b.node_id for b in admin.describe_cluster().brokers)
        unknown = sorted(set(wanted) - set(cluster))
        if unknown:
            raise CommandError(f"ERROR: The given brokers do not exist from --broker-list: "
                               f"{_join(unknown)}. Current existent brokers: {_join(cluster)}")
        brokers = sorted(set(wanted)) if wanted else cluster
        print("Querying brokers for log directories information")
        described = admin.describe_log_dirs(brokers)
    print(f"Received log directory information from brokers {_join(brokers)}")
    print(json.dumps(as_kafka_json(described, topics), separators=(",", ":")))
    return 0


def as_kafka_json(described: dict, topics: set[str]) -> dict:
    """kafka-log-dirs.sh's document for ``{broker: {log_dir: LogDirDescription}}``."""
    return {"version": 1, "brokers": [
        {"broker": broker, "logDirs": [
            {"logDir": log_dir, "error": _error_name(d.error), "partitions": [
                {"partition": f"{tp.topic}-{tp.partition}", "size": r.size, "offsetLag": r.offset_lag,
                 "isFuture": r.is_future}
                for tp, r in sorted(d.replicas.items()) if not topics or tp.topic in topics]}
            for log_dir, d in dirs.items()]}
        for broker, dirs in described.items()]}


def _error_name(error) -> str | None:
    if error is None:
        return None
    name = getattr(error.code, "name", str(error.code))
    return _EXCEPTIONS.get(name, name)


def _join(ids) -> str:
    return ",".join(str(i) for i in ids)
