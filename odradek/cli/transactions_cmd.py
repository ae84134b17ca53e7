"""``odradek transactions``: list, describe and abort transactions (``kafka-transactions.sh``).

    odradek transactions list [--state S] [--producer-id N] [--duration-filter MS]
    odradek transactions describe --transactional-id ID
    odradek transactions describe-producers --topic T --partition P
    odradek transactions abort --topic T --partition P --start-offset N
    odradek transactions abort --topic T --partition P --producer-id N --producer-epoch E --coordinator-epoch C
    odradek transactions find-hanging (--broker-id N | --topic T [--partition P]) [--max-transaction-timeout MIN]

The action may also be given as a flag: ``--list``, ``--describe``, ``--describe-producers``,
``--abort``, ``--find-hanging``. The columns are kafka-transactions.sh's.

``list`` asks every broker for the transactional ids it coordinates; ``describe`` shows one
id's state at its coordinator, its producer id and epoch, and the partitions of its open
transaction; ``describe-producers`` the producers a partition's leader knows and the first
offset of each one's open transaction. A *hanging* transaction is open on a partition while
no coordinator knows it (it holds read_committed consumers at its first offset for good):
``find-hanging`` lists those older than ``--max-transaction-timeout`` minutes (15), and
``abort`` writes the ABORT marker the coordinator never wrote.
"""

from __future__ import annotations

import argparse
import time

from odradek.cli.common import (
    CommandError,
    add_bootstrap,
    add_output,
    admin_client,
    print_json,
    print_table,
    run_command,
)

ACTIONS = ("list", "describe", "describe-producers", "abort", "find-hanging")


def add_parser(sub) -> None:
    p = sub.add_parser("transactions", help="list, describe and abort transactions",
                       description=__doc__.replace("``", ""), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_bootstrap(p)
    p.add_argument("action", nargs="?", choices=ACTIONS, help="what to do (or give it as a flag)")
    for action in ACTIONS:
        p.add_argument(f"--{action}", dest="flag_action", action="append_const", const=action,
                       help=f"the same as the {action} action")
    p.add_argument("--transactional-id", metavar="ID", help="describe: the transactional id")
    p.add_argument("--topic", metavar="TOPIC", help="describe-producers, abort, find-hanging: the topic")
    p.add_argument("--partition", type=int, metavar="P", help="describe-producers, abort, find-hanging: the partition")
    p.add_argument("--start-offset", type=int, metavar="N", help="abort: the first offset of the transaction")
    p.add_argument("--producer-id", type=int, metavar="N", help="abort: the producer id; list: only this producer")
    p.add_argument("--producer-epoch", type=int, metavar="E", help="abort: the producer epoch")
    p.add_argument("--coordinator-epoch", type=int, metavar="C", help="abort: the coordinator epoch")
    p.add_argument("--state", action="append", default=[], metavar="STATE",
                   help="list: only transactions in this state (Ongoing, CompleteCommit, ...), repeatable")
    p.add_argument("--duration-filter", type=int, default=-1, metavar="MS",
                   help="list: only transactions open longer than MS milliseconds")
    p.add_argument("--broker-id", type=int, metavar="N", help="find-hanging: every partition this broker leads")
    p.add_argument("--max-transaction-timeout", type=int, default=15, metavar="MINUTES",
                   help="find-hanging: transactions open longer than this may hang (default 15)")
    add_output(p)


def run(args) -> int:
    return run_command("transactions", _run, args)


def _action(args) -> str:
    chosen = list(dict.fromkeys(([args.action] if args.action else []) + (args.flag_action or [])))
    if len(chosen) != 1:
        raise CommandError(f"give one action: {', '.join(ACTIONS)}" if not chosen
                           else f"give one action, not {' and '.join(chosen)}")
    return chosen[0]


def _run(args) -> int:
    action = _action(args)
    if action == "describe" and not args.transactional_id:
        raise CommandError("describe needs --transactional-id")
    if action in ("describe-producers", "abort") and (args.topic is None or args.partition is None):
        raise CommandError(f"{action} needs --topic and --partition")
    if action == "find-hanging" and (args.broker_id is None) == (args.topic is None):
        raise CommandError("find-hanging needs --broker-id or --topic (one of them)")
    with admin_client(args) as admin:
        return {"list": _list, "describe": _describe, "describe-producers": _describe_producers,
                "abort": _abort, "find-hanging": _find_hanging}[action](admin, args)


def _show(args, columns, rows) -> None:
    if args.output == "json":
        for row in rows:
            print_json(dict(zip(columns, row)))
    else:
        print_table(columns, rows)


def _list(admin, args) -> int:
    producer_ids = [args.producer_id] if args.producer_id is not None else []
    listed = admin.list_transactions(states=args.state, producer_ids=producer_ids, duration_ms=args.duration_filter)
    _show(args, ("TransactionalId", "Coordinator", "ProducerId", "TransactionState"),
          [(t.transactional_id, t.coordinator_id, t.producer_id, t.state) for t in listed])
    return 0


def _describe(admin, args) -> int:
    d = admin.describe_transactions([args.transactional_id])[args.transactional_id]
    now = int(time.time() * 1000)
    duration = now - d.start_time_ms if d.start_time_ms >= 0 else None
    partitions = ",".join(str(tp) for tp in d.partitions)
    _show(args, ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                 "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions"),
          [(d.coordinator_id, d.transactional_id, d.producer_id, d.producer_epoch, d.state,
            d.transaction_timeout_ms, d.start_time_ms if d.start_time_ms >= 0 else None, duration, partitions)])
    return 0


def _describe_producers(admin, args) -> int:
    from odradek.client import TopicPartition

    tp = TopicPartition(args.topic, args.partition)
    producers = admin.describe_producers([tp])[tp]
    _show(args, ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                 "CurrentTransactionStartOffset"),
          [(s.producer_id, s.producer_epoch, s.coordinator_epoch, s.last_sequence, s.last_timestamp,
            s.current_txn_start_offset if s.current_txn_start_offset >= 0 else None) for s in producers])
    return 0


def _abort(admin, args) -> int:
    from odradek.client import TopicPartition

    tp = TopicPartition(args.topic, args.partition)
    by_producer = (args.producer_id, args.producer_epoch, args.coordinator_epoch)
    if args.start_offset is not None:
        if any(v is not None for v in by_producer):
            raise CommandError("abort takes --start-offset or --producer-id/--producer-epoch/--coordinator-epoch")
        state = admin.abort_transaction_at(tp, args.start_offset)
        print(f"Aborted the transaction of producer {state.producer_id} (epoch {state.producer_epoch}) "
              f"started at offset {args.start_offset} of {tp}")
        return 0
    if any(v is None for v in by_producer):
        raise CommandError("abort needs --start-offset, or all of --producer-id, --producer-epoch "
                           "and --coordinator-epoch")
    admin.abort_transaction(tp, *by_producer)
    print(f"Aborted the transaction of producer {args.producer_id} (epoch {args.producer_epoch}) on {tp}")
    return 0


def _find_hanging(admin, args) -> int:
    from odradek.client import TopicPartition

    if args.topic is not None:
        count = len(admin.describe_topics([args.topic])[args.topic].partitions)
        partitions = [TopicPartition(args.topic, p) for p in range(count)
                      if args.partition is None or p == args.partition]
    else:
        partitions = [TopicPartition(t.name, p.partition)
                      for t in admin.describe_topics().values() for p in t.partitions if p.leader == args.broker_id]
    now = int(time.time() * 1000)
    hanging = admin.find_hanging_transactions(partitions, args.max_transaction_timeout * 60_000, now)
    _show(args, ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                 "LastTimestamp", "Duration(min)"),
          [(tp.topic, tp.partition, s.producer_id, s.producer_epoch, s.coordinator_epoch, s.current_txn_start_offset,
            s.last_timestamp, (now - s.last_timestamp) // 60_000) for tp, s in hanging])
    return 0
