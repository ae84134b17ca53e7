"""``odradek leader-election``: move partition leadership (``kafka-leader-election.sh``).

    odradek leader-election --bootstrap-server H:P --election-type PREFERRED --all-topic-partitions
    odradek leader-election --election-type UNCLEAN --topic T --partition P
    odradek leader-election --election-type PREFERRED --path-to-json-file partitions.json

PREFERRED gives each partition back to its preferred replica (the first of its assignment)
where that replica is live and in sync; UNCLEAN gives a partition without a live leader any
live replica, in sync or not: records the lost leader had and that replica lacks are gone.
Exactly one of ``--all-topic-partitions``, ``--topic`` (with ``--partition``) and
``--path-to-json-file`` says which partitions; the file is Kafka's:

    {"partitions": [{"topic": "foo", "partition": 1}, {"topic": "foobar", "partition": 2}]}

The output is the Kafka tool's: "Successfully completed leader election (PREFERRED) for
partitions t-0, t-1", "Valid replica already elected for partitions ...", and per failure
"Error completing leader election (PREFERRED) for partition: t-0: <error>" (exit status 1).
With ``--all-topic-partitions`` the partitions that need no election are not listed.
"""

from __future__ import annotations

import argparse
import json

from odradek.cli.common import CommandError, add_bootstrap, admin_client, read_properties, run_command

ELECTION_TYPES = ("PREFERRED", "UNCLEAN")
DEFAULT_TIMEOUT_MS = 30_000  # the Kafka tool's default.api.timeout.ms
_CHOICES = ("--topic", "--all-topic-partitions", "--path-to-json-file")


def add_parser(sub) -> None:
    p = sub.add_parser("leader-election", help="elect preferred or unclean partition leaders",
                       description=__doc__.replace("``", ""), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bootstrap(p, config_flag="--admin.config")
    p.add_argument("--election-type", type=str.upper, choices=ELECTION_TYPES, metavar="PREFERRED|UNCLEAN",
                   help="PREFERRED: back to the preferred replica; UNCLEAN: any live replica of a leaderless partition")
    p.add_argument("--all-topic-partitions", action="store_true", help="every partition of the cluster")
    p.add_argument("--topic", metavar="TOPIC", help="the topic of the one partition to elect (with --partition)")
    p.add_argument("--partition", type=int, metavar="P", help="the partition of --topic")
    p.add_argument("--path-to-json-file", metavar="FILE", help='the partitions, as {"partitions": [{"topic": ..., "partition": ...}]}')


def run(args) -> int:
    return run_command("leader-election", _run, args)


def _run(args) -> int:
    partitions = _partitions(args)
    timeout_ms = None if "default.api.timeout.ms" in read_properties(args.command_config) else DEFAULT_TIMEOUT_MS
    from odradek.client import KafkaTimeoutError

    with admin_client(args) as admin:
        try:
            results = admin.elect_leaders(args.election_type, partitions, timeout_ms=timeout_ms)
        except KafkaTimeoutError:
            print("Timeout waiting for election results")
            raise CommandError("Timeout waiting for election results") from None
    return _report(args.election_type, results)


def _partitions(args):
    """The requested partitions, None for all; checks the flags as the Kafka tool does."""
    if args.election_type is None:
        raise CommandError("Missing required option(s): --election-type")
    given = [args.topic is not None, args.all_topic_partitions, args.path_to_json_file is not None]
    if sum(given) != 1:
        raise CommandError(f"One and only one of the following options is required: {', '.join(_CHOICES)}")
    if args.topic is not None and args.partition is None:
        raise CommandError("Missing required option(s): --partition")
    if args.topic is None and args.partition is not None:
        raise CommandError("Option --partition is only allowed if --topic is used")
    if args.topic is not None:
        return [(args.topic, args.partition)]
    if args.path_to_json_file is not None:
        return read_election_file(args.path_to_json_file)
    return None


def read_election_file(path: str) -> list[tuple[str, int]]:
    """Kafka's replica election JSON (see the module docstring) as ``(topic, partition)``s."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise CommandError(f"cannot read {path}: {e.strerror}") from None
    if not text.strip():
        raise CommandError("Replica election data is empty")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as e:
        raise CommandError(f"{path} is not JSON: {e}") from None
    if not isinstance(document, dict) or "partitions" not in document:
        raise CommandError('Replica election data is missing "partitions" field')
    entries = document["partitions"]
    if not isinstance(entries, list):
        raise CommandError('"partitions" must be a list of {"topic": ..., "partition": ...}')
    partitions = []
    for entry in entries:
        if (not isinstance(entry, dict) or not isinstance(entry.get("topic"), str)
                or not isinstance(entry.get("partition"), int) or isinstance(entry.get("partition"), bool)):
            raise CommandError(f'each entry needs a "topic" string and a "partition" number, not {entry!r}')
        partitions.append((entry["topic"], entry["partition"]))
    duplicates = sorted({tp for tp in partitions if partitions.count(tp) > 1})
    if duplicates:
        raise CommandError("Replica election data contains duplicate partitions: "
                           + ",".join(f"{t}-{p}" for t, p in duplicates))
    return partitions


def _report(election_type: str, results: dict) -> int:
    """Kafka's three kinds of lines; a failure makes the command fail."""
    from odradek.protocol.generated.error_codes import ErrorCode

    ordered = sorted(results.items())
    succeeded = [tp for tp, e in ordered if e is None]
    noop = [tp for tp, e in ordered if e is not None and e.code == ErrorCode.ELECTION_NOT_NEEDED]
    failed = [(tp, e) for tp, e in ordered if e is not None and e.code != ErrorCode.ELECTION_NOT_NEEDED]
    if succeeded:
        print(f"Successfully completed leader election ({election_type}) for partitions "
              + ", ".join(str(tp) for tp in succeeded))
    if noop:
        print("Valid replica already elected for partitions " + ", ".join(str(tp) for tp in noop))
    for tp, error in failed:
        name = getattr(error.code, "name", f"error {error.code}")
        detail = f"{name}: {error.message}" if error.message else name
        print(f"Error completing leader election ({election_type}) for partition: {tp}: {detail}")
    if failed:
        raise CommandError(f"{len(failed)} replica(s) could not be elected")
    return 0
