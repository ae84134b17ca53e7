"""``odradek produce`` to ``odradek consume``: keys, headers, nulls, positions, JSON output,
groups, and the line-format errors."""

from __future__ import annotations

import json

import pytest
from kafka.partitioner.default import murmur2

from odradek.cli.produce_cmd import LineFormat
from odradek.client import AdminClient, NewTopic, Producer


def create(broker, topic: str, partitions: int) -> None:
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])


def test_round_trip_with_keys_lands_where_the_java_partitioner_puts_them(cli, broker, topic_name):
    create(broker, topic_name, 3)
    lines = [f"key{i % 5}:value {i}" for i in range(20)]
    produced = cli("produce", "--topic", topic_name, "--property", "parse.key=true",
                   "--property", "key.separator=:", stdin="\n".join(lines) + "\n")
    assert (produced.code, produced.out, produced.err) == (0, "", "")

    consumed = cli("consume", "--topic", topic_name, "--from-beginning", "--max-messages", "20",
                   "--property", "print.key=true", "--property", "print.partition=true",
                   "--property", "print.offset=true", "--property", "print.timestamp=true")
    assert consumed.code == 0, consumed.err
    assert consumed.err == "Processed a total of 20 messages\n"
    seen = []
    for line in consumed.lines():
        timestamp, partition, offset, key, value = line.split("\t")
        assert timestamp.startswith("CreateTime:") and int(timestamp.split(":")[1]) > 0
        partition = int(partition.removeprefix("Partition:"))
        assert partition == (murmur2(key.encode()) & 0x7FFFFFFF) % 3
        seen.append((partition, int(offset.removeprefix("Offset:")), key, value))
    assert sorted(f"{k}:{v}" for _, _, k, v in seen) == sorted(lines)
    for p in range(3):  # within a partition, in the order produced, offsets from 0
        mine = [(o, v) for q, o, _, v in seen if q == p]
        assert [o for o, _ in mine] == list(range(len(mine)))
        assert [v for _, v in mine] == [line.split(":", 1)[1] for line in lines
                                        if (murmur2(line.split(":")[0].encode()) & 0x7FFFFFFF) % 3 == p]


def test_headers_nulls_and_json_output(cli, broker, topic_name):
    create(broker, topic_name, 1)
    stdin = "h1:v1,h2:v2\tk1:plain\nNULL\tk2:NULL\nh3:NULL\tNULL:no key\r\n"
    produced = cli("produce", "--topic", topic_name, "--property", "parse.headers=true",
                   "--property", "parse.key=true", "--property", "key.separator=:",
                   "--property", "null.marker=NULL", stdin=stdin)
    assert produced.code == 0, produced.err
    text = cli("consume", "--topic", topic_name, "--from-beginning", "--max-messages", "3",
               "--property", "print.headers=true", "--property", "print.key=true")
    assert text.lines() == ["h1:v1,h2:v2\tk1\tplain", "NO_HEADERS\tk2\tnull", "h3:null\tnull\tno key"]

    as_json = cli("consume", "--topic", topic_name, "--from-beginning", "--max-messages", "3", "--output", "json")
    records = [json.loads(line) for line in as_json.lines()]
    assert [(r["offset"], r["key"], r["value"]) for r in records] == [(0, "k1", "plain"), (1, "k2", None),
                                                                        (2, None, "no key")]
    assert records[0]["headers"] == [{"key": "h1", "value": "v1"}, {"key": "h2", "value": "v2"}]
    assert records[2]["headers"] == [{"key": "h3", "value": None}]
    assert all(r["topic"] == topic_name and r["partition"] == 0 and r["timestamp_type"] == "CreateTime"
               for r in records)


def test_bytes_that_are_not_utf8(cli, broker, topic_name):
    create(broker, topic_name, 1)
    with Producer(broker.bootstrap) as producer:
        producer.send(topic_name, b"\xff\x00ok", key=b"\xfe").result(30)
    raw = cli("consume", "--topic", topic_name, "--from-beginning", "--max-messages", "1",
              "--property", "print.key=true")
    assert raw.out_bytes == b"\xfe\t\xff\x00ok\n"
    [line] = cli("consume", "--topic", topic_name, "--from-beginning", "--max-messages", "1",
                 "--output", "json").lines()
    record = json.loads(line)
    assert (record["key_base64"], record["value_base64"]) == ("/g==", "/wBvaw==")
    assert "key" not in record and "value" not in record


def test_partition_offset_and_timeout(cli, broker, topic_name):
    create(broker, topic_name, 2)
    with Producer(broker.bootstrap) as producer:
        for i in range(5):
            producer.send(topic_name, f"p1-{i}".encode(), partition=1)
        producer.flush()
    from_two = cli("consume", "--topic", topic_name, "--partition", "1", "--offset", "2", "--max-messages", "3",
                   "--timeout-ms", "30000")
    assert (from_two.code, from_two.lines()) == (0, ["p1-2", "p1-3", "p1-4"])
    assert from_two.err == "Processed a total of 3 messages\n"
    latest = cli("consume", "--topic", topic_name, "--partition", "1", "--timeout-ms", "200")
    assert (latest.code, latest.out) == (0, "")
    earliest = cli("consume", "--topic", topic_name, "--partition", "1", "--offset", "earliest",
                   "--max-messages", "1", "--property", "print.value=false", "--property", "print.offset=true")
    assert earliest.lines() == ["Offset:0"]
    missing = cli("consume", "--topic", topic_name, "--partition", "7", "--timeout-ms", "100")
    assert (missing.code, missing.err) == (1, f"odradek consume: topic {topic_name} has no partition 7 (it has 2)\n")


def test_include_regex_reads_several_topics(cli, broker, topic_name):
    for suffix in ("x", "y"):
        create(broker, f"{topic_name}-{suffix}", 1)
        cli("produce", "--topic", f"{topic_name}-{suffix}", stdin=f"from {suffix}\n")
    result = cli("consume", "--include", f"{topic_name}-.*", "--from-beginning", "--max-messages", "2",
                 "--output", "json")
    assert sorted((r["topic"], r["value"]) for r in map(json.loads, result.lines())) == [
        (f"{topic_name}-x", "from x"), (f"{topic_name}-y", "from y")]


def test_group_consumes_commits_and_resumes(cli, broker, topic_name):
    create(broker, topic_name, 2)
    cli("produce", "--topic", topic_name, stdin="".join(f"v{i}\n" for i in range(6)))
    group = "g-" + topic_name
    first = cli("consume", "--topic", topic_name, "--group", group, "--from-beginning", "--max-messages", "4")
    assert first.code == 0 and len(first.lines()) == 4, first.err
    with AdminClient(broker.bootstrap) as admin:
        committed = admin.list_group_offsets(group)
    assert sum(o.offset for o in committed.values()) == 4
    rest = cli("consume", "--topic", topic_name, "--group", group, "--max-messages", "2", "--timeout-ms", "30000")
    assert sorted(first.lines() + rest.lines()) == [f"v{i}" for i in range(6)]


def test_compression_and_acks_options(cli, broker, topic_name):
    create(broker, topic_name, 1)
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        result = cli("produce", "--topic", topic_name, "--compression-codec", codec, "--request-required-acks", "1",
                     "--sync", stdin=f"{codec} record\n")
        assert result.code == 0, result.err
    consumed = cli("consume", "--topic", topic_name, "--from-beginning", "--max-messages", "4")
    assert consumed.lines() == ["gzip record", "snappy record", "lz4 record", "zstd record"]


@pytest.mark.parametrize("args, stdin, message", [
    (["--property", "parse.key=true"], "a\tb\nno separator\n",
     "No key separator found on line number 2: 'no separator'"),
    (["--property", "parse.headers=true"], "no delimiter\n", "No headers delimiter found on line number 1"),
    (["--property", "parse.headers=true"], "h1\tvalue\n", "No header key separator found in pair 'h1'"),
    (["--property", "parse.key=maybe"], "x\n", "parse.key must be true or false"),
    (["--property", "colour=blue"], "x\n", "unknown --property 'colour'"),
    (["--producer-property", "acks=2"], "x\n", "acks must be"),
    (["--producer-property", "no.such.setting=1"], "x\n", "unknown producer property 'no.such.setting'"),
    (["--producer-property", "linger.ms=soon"], "x\n", "linger.ms must be a number"),
])
def test_producer_errors_are_one_line(cli, broker, topic_name, args, stdin, message):
    create(broker, topic_name, 1)
    result = cli("produce", "--topic", topic_name, *args, stdin=stdin)
    assert result.code == 1
    assert result.err.startswith("odradek produce: ") and result.err.count("\n") == 1
    assert message in result.err


def test_ignore_error_sends_the_whole_line(cli, broker, topic_name):
    create(broker, topic_name, 1)
    result = cli("produce", "--topic", topic_name, "--property", "parse.key=true",
                 "--property", "ignore.error=true", stdin="no separator here\n")
    assert result.code == 0
    consumed = cli("consume", "--topic", topic_name, "--from-beginning", "--max-messages", "1",
                   "--property", "print.key=true")
    assert consumed.lines() == ["null\tno separator here"]


@pytest.mark.parametrize("args, message", [
    (["--offset", "3"], "--offset needs --partition"),
    (["--partition", "0", "--offset", "3", "--from-beginning"], "cannot be used together"),
    (["--partition", "0", "--offset", "soon"], "--offset must be a non-negative number"),
    (["--group", "g", "--partition", "0"], "--group and --partition cannot be used together"),
    (["--max-messages", "0"], "--max-messages must be positive"),
    (["--property", "print.colour=true"], "unknown --property 'print.colour'"),
])
def test_consumer_option_errors(cli, broker, topic_name, args, message):
    create(broker, topic_name, 1)
    result = cli("consume", "--topic", topic_name, *args)
    assert result.code == 1
    assert message in result.err and result.err.count("\n") == 1


def test_consuming_an_unknown_topic_fails(cli, topic_name):
    result = cli("consume", "--topic", topic_name, "--timeout-ms", "100")
    assert (result.code, result.err) == (1, f"odradek consume: Topic '{topic_name}' does not exist\n")


def test_line_format_defaults_and_separators():
    plain = LineFormat.from_properties({})
    assert plain.parse(b"a\tb", 1) == (None, b"a\tb", None)
    keyed = LineFormat.from_properties({"parse.key": "true", "key.separator": "::"})
    assert keyed.parse(b"k::v::w", 1) == (b"k", b"v::w", None)
    headed = LineFormat.from_properties({"parse.headers": "true", "headers.delimiter": "|",
                                         "headers.separator": ";", "headers.key.separator": "="})
    assert headed.parse(b"a=1;b=|value", 1) == (None, b"value", [("a", b"1"), ("b", b"")])
