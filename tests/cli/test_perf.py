"""``odradek perf produce|consume``: counts and report shapes (never the speeds themselves)."""

from __future__ import annotations

import json

import pytest

from odradek.cli.perf_cmd import percentiles
from odradek.client import AdminClient, NewTopic, TopicPartition


def test_produce_then_consume(cli, broker, topic_name):
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic(topic_name, 2, 1)])
    produced = cli("perf", "produce", "--topic", topic_name, "--num-records", "3000", "--record-size", "50",
                   "--throughput", "-1", "--producer-props", "linger.ms=5", "acks=1", "--output", "json")
    assert produced.code == 0, produced.err
    report = json.loads(produced.out)
    assert (report["records"], report["errors"], report["latency_samples"]) == (3000, 0, 3000)
    assert 0 <= report["p50_ms"] <= report["p95_ms"] <= report["p99_ms"] <= report["p999_ms"] <= report["max_latency_ms"]
    assert report["records_per_sec"] > 0 and report["mb_per_sec"] >= 0
    with AdminClient(broker.bootstrap) as admin:
        ends = admin.list_offsets({TopicPartition(topic_name, p): -1 for p in (0, 1)})
    assert sum(e.offset for e in ends.values()) == 3000

    consumed = cli("perf", "consume", "--topic", topic_name, "--messages", "3000", "--output", "json")
    assert consumed.code == 0, consumed.err
    summary = json.loads(consumed.out)
    assert (summary["records"], summary["bytes"], summary["timed_out"]) == (3000, 3000 * 50, False)
    assert summary["polls"] >= 1 and summary["poll_p50_ms"] <= summary["poll_max_ms"]

    short = cli("perf", "consume", "--topic", topic_name, "--messages", "5000", "--timeout", "1500")
    assert short.code == 0
    assert short.err == "WARNING: stopped after 3000 of 5000 records: no record for 1500 ms.\n"
    assert short.out.startswith("3000 records consumed (0.14 MB) in ")


def test_text_report_and_throttle(cli, broker, topic_name, tmp_path):
    payloads = tmp_path / "payloads.txt"
    payloads.write_text("alpha\nbeta\n\ngamma\n")
    result = cli("perf", "produce", "--topic", topic_name, "--num-records", "200", "--payload-file", str(payloads),
                 "--throughput", "5000")
    assert result.code == 0, result.err
    final = result.lines()[-1]
    assert final.startswith("200 records sent, ") and final.endswith(" ms 99.9th.")
    for part in ("records/sec (", "MB/sec)", "ms avg latency", "ms max latency", "ms 50th", "ms 95th", "ms 99th"):
        assert part in final
    values = cli("consume", "--topic", topic_name, "--from-beginning", "--max-messages", "200").lines()
    assert set(values) <= {"alpha", "beta", "gamma"} and len(values) == 200


@pytest.mark.parametrize("args, message", [
    (["produce", "--topic", "t", "--num-records", "0", "--record-size", "1", "--throughput", "-1"],
     "--num-records must be positive"),
    (["produce", "--topic", "t", "--num-records", "1", "--record-size", "0", "--throughput", "-1"],
     "--record-size must be positive"),
    (["produce", "--topic", "t", "--num-records", "1", "--payload-file", "/nonexistent/x", "--throughput", "-1"],
     "cannot read /nonexistent/x"),
    (["produce", "--topic", "t", "--num-records", "1", "--record-size", "1", "--throughput", "-1",
      "--producer-props", "acks"], "--producer-props needs KEY=VALUE"),
    (["consume", "--topic", "no-such-topic-here", "--messages", "1"], "Topic 'no-such-topic-here' does not exist"),
])
def test_errors(cli, args, message):
    result = cli("perf", *args)
    assert result.code == 1 and message in result.err and result.err.count("\n") == 1
    assert result.err.startswith(f"odradek perf {args[0]}: ")


def test_percentiles():
    assert percentiles([]) == [0.0, 0.0, 0.0, 0.0]
    samples = [float(i) for i in range(1, 1001)]
    assert percentiles(samples) == [501.0, 951.0, 991.0, 1000.0]
    assert percentiles([3.0, 1.0, 2.0], (0.0, 0.5, 1.0)) == [1.0, 2.0, 3.0]


def test_bootstrap_servers_among_the_client_properties_as_kafkas_perf_tools_take_it(broker, topic_name):
    from tests.cli.conftest import run_cli

    produced = run_cli("perf", "produce", "--topic", topic_name, "--num-records", "200", "--record-size", "10",
                       "--throughput", "-1", "--producer-props", f"bootstrap.servers={broker.bootstrap}", "acks=1",
                       "--output", "json")
    assert produced.code == 0, produced.err
    assert json.loads(produced.out)["records"] == 200
    consumed = run_cli("perf", "consume", "--topic", topic_name, "--messages", "200", "--output", "json",
                       "--consumer-props", f"bootstrap.servers={broker.bootstrap}")
    assert consumed.code == 0, consumed.err
    assert json.loads(consumed.out)["records"] == 200
