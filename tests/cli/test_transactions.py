"""``odradek transactions`` (kafka-transactions.sh), ``odradek produce --transactional-id`` and
``odradek consume --isolation-level read_committed`` against a real broker."""

from __future__ import annotations

import json

import pytest

from odradek.client import AdminClient, NewTopic, Producer


def create(broker, topic: str, partitions: int = 1) -> None:
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])


def read(cli, topic: str, isolation: str, *extra: str) -> list[str]:
    result = cli("consume", "--topic", topic, "--from-beginning", "--isolation-level", isolation,
                 "--timeout-ms", "1500", *extra)
    assert result.code == 0, result.err
    return result.lines()


def rows(result) -> list[dict]:
    assert result.code == 0, result.err
    return [json.loads(line) for line in result.lines()]


def test_produce_in_transactions_then_list_and_describe_them(cli, broker, topic_name):
    create(broker, topic_name, 2)
    tid = topic_name + "-console"
    lines = "".join(f"line-{i}\n" for i in range(7))
    produced = cli("produce", "--topic", topic_name, "--transactional-id", tid, "--transaction-size", "3",
                   stdin=lines)
    assert produced.code == 0, produced.err
    assert sorted(read(cli, topic_name, "read_committed")) == sorted(f"line-{i}" for i in range(7))

    listed = rows(cli("transactions", "list", "--output", "json"))
    mine = [r for r in listed if r["TransactionalId"] == tid]
    assert len(mine) == 1 and mine[0]["TransactionState"] == "CompleteCommit"
    assert rows(cli("transactions", "--list", "--output", "json")) == listed  # the flag form
    assert tid in cli("transactions", "list").out  # the table form

    described = rows(cli("transactions", "describe", "--transactional-id", tid, "--output", "json"))
    assert described[0]["TransactionalId"] == tid and described[0]["TransactionState"] == "CompleteCommit"
    assert described[0]["ProducerId"] == mine[0]["ProducerId"]
    table = cli("transactions", "--describe", "--transactional-id", tid)
    assert table.code == 0 and "TransactionTimeoutMs" in table.out

    missing = cli("transactions", "describe", "--transactional-id", tid + "-nobody")
    assert missing.code == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in missing.err


def test_a_transaction_aborted_from_the_command_line(cli, broker, topic_name):
    create(broker, topic_name)
    stuck = Producer(broker.bootstrap, transactional_id=topic_name + "-stuck")
    try:
        stuck.init_transactions()
        stuck.begin_transaction()
        stuck.send(topic_name, b"stuck")
        stuck.flush()
        with Producer(broker.bootstrap) as plain:
            plain.send(topic_name, b"behind").result()
        assert read(cli, topic_name, "read_committed") == []  # held at the open transaction
        assert sorted(read(cli, topic_name, "read_uncommitted")) == ["behind", "stuck"]

        producers = rows(cli("transactions", "describe-producers", "--topic", topic_name, "--partition", "0",
                             "--output", "json"))
        open_one = [p for p in producers if p["CurrentTransactionStartOffset"] is not None]
        assert len(open_one) == 1 and open_one[0]["CurrentTransactionStartOffset"] == 0
        hanging = cli("transactions", "find-hanging", "--topic", topic_name, "--max-transaction-timeout", "0",
                      "--output", "json")
        assert hanging.code == 0 and hanging.lines() == []  # its coordinator knows it: not hanging

        aborted = cli("transactions", "abort", "--topic", topic_name, "--partition", "0", "--start-offset", "0")
        assert aborted.code == 0, aborted.err
        assert "Aborted" in aborted.out
        assert read(cli, topic_name, "read_committed") == ["behind"]
        producers = rows(cli("transactions", "--describe-producers", "--topic", topic_name, "--partition", "0",
                             "--output", "json"))
        assert all(p["CurrentTransactionStartOffset"] is None for p in producers)
    finally:
        stuck.close()


def test_console_producer_aborts_nothing_when_it_commits_per_record(cli, broker, topic_name):
    create(broker, topic_name)
    produced = cli("produce", "--topic", topic_name, "--transactional-id", topic_name + "-1",
                   "--transaction-size", "1", "--property", "parse.key=true", "--property", "key.separator=:",
                   stdin="k1:a\nk2:b\n")
    assert produced.code == 0, produced.err
    assert read(cli, topic_name, "read_committed", "--property", "print.key=true") == ["k1\ta", "k2\tb"]


@pytest.mark.parametrize("args, message", [
    ((), "give one action"),
    (("list", "--describe"), "give one action, not list and describe"),
    (("describe",), "--transactional-id"),
    (("describe-producers", "--topic", "t"), "--topic and --partition"),
    (("abort", "--topic", "t", "--partition", "0"), "--start-offset"),
    (("find-hanging",), "--broker-id or --topic"),
])
def test_option_errors(cli, args, message):
    result = cli("transactions", *args)
    assert result.code == 1 and message in result.err, result.err


def test_transaction_size_needs_a_transactional_id(cli, topic_name):
    result = cli("produce", "--topic", topic_name, "--transaction-size", "5", stdin="x\n")
    assert result.code == 1 and "--transactional-id" in result.err


def test_perf_produce_in_transactions(cli, broker, topic_name):
    create(broker, topic_name)
    tid = topic_name + "-perf"
    result = cli("perf", "produce", "--topic", topic_name, "--num-records", "3000", "--record-size", "20",
                 "--throughput", "-1", "--transactional-id", tid, "--transaction-duration-ms", "20", "--output", "json")
    assert result.code == 0, result.err
    assert len(read(cli, topic_name, "read_committed")) == 3000
    listed = rows(cli("transactions", "list", "--output", "json"))
    assert [r["TransactionState"] for r in listed if r["TransactionalId"] == tid] == ["CompleteCommit"]
