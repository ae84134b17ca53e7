"""The driver-side pieces that need no Spark: options, offsets, admission control, range
splitting, failure points."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.client import TopicPartition
from odradek.spark import failpoints
from odradek.spark.batch_reader import plan_ranges
from odradek.spark.offset_range import OffsetRange, split_ranges
from odradek.spark.offsets import from_offset_dict, offset_dict
from odradek.spark.options import parse_sink_options, parse_source_options
from odradek.spark.rate_limit import allot

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "a,b"}


def test_source_options_as_spark_hands_them_over():
    o = parse_source_options({**BASE, "startingoffsets": json.dumps({"a": {"0": 5, "1": -2}}),
                              "maxoffsetspertrigger": "100", "failondataloss": "False", "includeheaders": "true",
                              "minpartitions": "8"})
    assert o.subscribe == ("a", "b") and o.max_offsets_per_trigger == 100 and o.min_partitions == 8
    assert not o.fail_on_data_loss and o.include_headers
    assert o.starting.kind == "offsets" and o.starting.values == {TopicPartition("a", 0): 5, TopicPartition("a", 1): -2}
    assert parse_source_options({**BASE, "startingTimestamp": "1000",
                                 "startingOffsets": "latest"}).starting.timestamp == 1000  # timestamp wins
    assert parse_source_options({"bootstrap.servers": "h:1", "assign": '{"t": [1, 0]}'}).assign == (
        TopicPartition("t", 0), TopicPartition("t", 1))


@pytest.mark.parametrize("options, message", [
    ({"subscribe": "a"}, "kafka.bootstrap.servers"),
    ({**BASE, "subscribePattern": "x.*"}, "exactly one of"),
    ({"kafka.bootstrap.servers": "h:1"}, "exactly one of"),
    ({**BASE, "startingOffsets": "{not json"}, "startingOffsets"),
    ({**BASE, "startingOffsets": '{"a": {"zero": 1}}'}, "not a number"),
    ({**BASE, "startingOffsets": '{"a": {"0": -3}}'}, "not allowed"),
    ({**BASE, "endingOffsets": "earliest"}, "endingOffsets"),
    ({**BASE, "endingOffsets": '{"a": {"0": -2}}'}, "endingOffsets"),
    ({**BASE, "maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger"),
    ({**BASE, "failOnDataLoss": "maybe"}, "failOnDataLoss"),
    ({**BASE, "subscribe": None, "subscribePattern": "("}, "regular expression"),
    ({**BASE, "subscribe": None, "assign": '{"t": [-1]}'}, "assign"),
    ({**BASE, "startingOffsetsByTimestampStrategy": "closest"}, "Strategy"),
])
def test_bad_source_options_name_the_option(options, message):
    with pytest.raises(ValueError, match=message):
        parse_source_options({k: v for k, v in options.items() if v is not None})


def test_sink_options():
    o = parse_sink_options({"kafka.bootstrap.servers": "h:1", "topic": "out", "exactlyonce": "false"})
    assert o.topic == "out" and o.mode == "direct" and o.compression == "none"
    default = parse_sink_options({"kafka.bootstrap.servers": "h:1"})
    assert default.mode is None and default.transaction_timeout_ms == 900_000
    assert default.txn_id_prefix == "odradek-spark-"
    for value, mode in [("Transactional", "transactional"), ("true", "transactional"), ("staged", "staged")]:
        assert parse_sink_options({"kafka.bootstrap.servers": "h:1", "exactlyonce": value}).mode == mode
    o = parse_sink_options({"kafka.bootstrap.servers": "h:1", "transactional.id.prefix": "etl-",
                            "kafka.transaction.timeout.ms": "60000"})
    assert (o.txn_id_prefix, o.transaction_timeout_ms, dict(o.producer)) == ("etl-", 60_000,
                                                                             {"compression_type": "none"})
    with pytest.raises(ValueError, match="compression"):
        parse_sink_options({"kafka.bootstrap.servers": "h:1", "kafka.compression.type": "brotli"})
    with pytest.raises(ValueError, match="exactlyOnce"):
        parse_sink_options({"kafka.bootstrap.servers": "h:1", "exactlyonce": "maybe"})


def test_offsets_serialize_canonically():
    offsets = {TopicPartition("b", 10): 1, TopicPartition("a", 2): 3, TopicPartition("b", 9): 4}
    shuffled = dict(reversed(list(offsets.items())))
    assert json.dumps(offset_dict(offsets)) == json.dumps(offset_dict(shuffled)) == \
        '{"a": {"2": 3}, "b": {"9": 4, "10": 1}}'
    assert from_offset_dict(json.loads(json.dumps(offset_dict(offsets)))) == offsets


positions = st.dictionaries(st.integers(0, 6), st.tuples(st.integers(0, 10**6), st.integers(0, 10**4)), min_size=1)


@given(positions, st.integers(1, 5000))
def test_admission_control_is_a_strict_bound_shared_by_lag(parts, limit):
    start = {p: s for p, (s, _) in parts.items()}
    latest = {p: s + lag for p, (s, lag) in parts.items()}
    end = allot(start, latest, limit)
    lags = {p: latest[p] - start[p] for p in parts}
    taken = {p: end[p] - start[p] for p in parts}
    assert all(0 <= taken[p] <= lags[p] for p in parts)
    assert sum(taken.values()) == min(limit, sum(lags.values()))
    lagging = [p for p in parts if lags[p] > 0]
    if limit >= len(lagging):
        assert all(taken[p] >= 1 for p in lagging)  # nobody starves


def test_admission_control_example():
    assert allot({"a": 0, "b": 0, "c": 5}, {"a": 100, "b": 300, "c": 5}, 10) == {"a": 3, "b": 7, "c": 5}


ranges = st.lists(st.tuples(st.sampled_from("xyz"), st.integers(0, 3), st.integers(0, 100), st.integers(0, 50)),
                  max_size=6, unique_by=lambda r: r[:2])


@given(ranges, st.integers(1, 40), st.none() | st.integers(1, 60))
def test_split_ranges_cover_each_range_exactly(raw, min_partitions, max_records):
    original = [OffsetRange(t, p, s, s + n) for t, p, s, n in raw]
    pieces = split_ranges(original, min_partitions, max_records)
    if max_records:
        assert all(q.size <= max_records for q in pieces)
        assert len(pieces) >= sum(-(-r.size // max_records) for r in original)
    for r in original:
        mine = [q for q in pieces if (q.topic, q.partition) == (r.topic, r.partition)]
        covered = [o for q in mine for o in range(q.start, q.end)]
        assert covered == list(range(r.start, r.end))
    total = sum(r.size for r in original)
    assert len(pieces) >= min(min_partitions, total)
    assert all(q.size > 0 for q in pieces)


def test_failpoints_fire_only_where_named():
    failpoints.hit(None, "commit.mid_publish", 1)
    failpoints.hit("commit.mid_publish@2", "commit.mid_publish", 1)
    failpoints.hit("commit.after_intent@1", "commit.mid_publish", 1)
    with pytest.raises(failpoints.InjectedFailure, match="commit.mid_publish of batch 1"):
        failpoints.hit("commit.after_intent@0, commit.mid_publish@1", "commit.mid_publish", 1)
    failpoints.hit("commit.after_decision@1:hang", "commit.mid_commit", 1)  # another point: nothing


def test_failpoint_hang_marks_the_point_and_sleeps(tmp_path, monkeypatch):
    marker = tmp_path / "marker"
    monkeypatch.setenv("ODRADEK_FAILPOINT_MARKER", str(marker))

    def stop(seconds):
        raise TimeoutError("would sleep")

    monkeypatch.setattr(failpoints.time, "sleep", stop)
    with pytest.raises(TimeoutError):
        failpoints.hit("commit.after_decision@3:hang", "commit.after_decision", 3)
    assert marker.read_text() == "commit.after_decision@3\n"


def test_write_schemas():
    from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType

    from odradek.spark.schema import HEADERS, check_write_schema

    def schema(**columns):
        return StructType([StructField(name, kind) for name, kind in columns.items()])

    check_write_schema(schema(key=StringType(), value=BinaryType(), topic=StringType(), partition=IntegerType(),
                              headers=HEADERS), None)
    for bad, message in [(schema(key=StringType()), "needs a 'value' column"),
                         (schema(value=LongType()), "'value' must be binary or string"),
                         (schema(value=StringType(), partition=LongType()), "'partition' must be int"),
                         (schema(value=StringType(), headers=StringType()), "'headers' must be")]:
        with pytest.raises(ValueError, match=message):
            check_write_schema(bad, "t")
    with pytest.raises(ValueError, match="no topic"):
        check_write_schema(schema(value=StringType()), None)


def test_trigger_delay_options():
    o = parse_source_options({**BASE, "minOffsetsPerTrigger": "50", "maxTriggerDelay": "30s"})
    assert o.min_offsets_per_trigger == 50 and o.max_trigger_delay_ms == 30_000
    assert parse_source_options(BASE).max_trigger_delay_ms == 15 * 60_000
    assert parse_source_options({**BASE, "maxtriggerdelay": "250"}).max_trigger_delay_ms == 250
    assert parse_source_options({**BASE, "maxtriggerdelay": "2h"}).max_trigger_delay_ms == 7_200_000
    with pytest.raises(ValueError, match="maxTriggerDelay"):
        parse_source_options({**BASE, "maxTriggerDelay": "soon"})


class FakeOffsets:
    """Latest offsets as a test sets them; every partition starts at 0."""

    def __init__(self, latest):
        self.latest_offsets = latest

    def partitions(self):
        return list(self.latest_offsets)

    def latest(self, partitions):
        return dict(self.latest_offsets)

    def earliest(self, partitions):
        return {tp: 0 for tp in partitions}

    def close(self):
        pass


def test_min_offsets_per_trigger_waits_for_records_or_the_delay():
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from odradek.spark.stream_reader import StreamReader

    a0, a1 = TopicPartition("a", 0), TopicPartition("a", 1)
    reader = StreamReader(parse_source_options({**BASE, "minOffsetsPerTrigger": "10", "maxTriggerDelay": "5s"}))
    reader.offsets = FakeOffsets({a0: 3, a1: 0})
    now = [100.0]
    reader._clock = lambda: now[0]
    start = offset_dict({a0: 0, a1: 0})
    first = reader.latestOffset(start, ReadAllAvailable())
    assert from_offset_dict(first) == {a0: 3, a1: 0}  # the first trigger never waits
    reader.offsets.latest_offsets = {a0: 8, a1: 4}  # 9 new records: fewer than 10
    now[0] += 1
    assert reader.latestOffset(first, ReadAllAvailable()) == first
    reader.offsets.latest_offsets = {a0: 8, a1: 5}  # 10 new records: a micro-batch
    second = reader.latestOffset(first, ReadAllAvailable())
    assert from_offset_dict(second) == {a0: 8, a1: 5}
    reader.offsets.latest_offsets = {a0: 9, a1: 5}  # one record...
    now[0] += 4.9
    assert reader.latestOffset(second, ReadAllAvailable()) == second
    now[0] += 0.1  # ...goes out once maxTriggerDelay has passed since the last micro-batch
    assert from_offset_dict(reader.latestOffset(second, ReadAllAvailable())) == {a0: 9, a1: 5}


def test_max_records_per_partition_then_min_partitions():
    one = [OffsetRange("t", 0, 0, 300)]
    assert [(q.start, q.end) for q in split_ranges(one, None, 120)] == [(0, 100), (100, 200), (200, 300)]
    assert len(split_ranges(one, 6, 120)) == 6  # still fewer than minPartitions: cut again
    assert parse_source_options({**BASE, "maxRecordsPerPartition": "120"}).max_records_per_partition == 120


@pytest.mark.parametrize("option, value, message", [
    ("kafka.auto.offset.reset", "earliest", "'startingOffsets'"),
    ("kafka.enable.auto.commit", "true", "commits no offsets"),
    ("kafka.key.deserializer", "x", "keys are always read as bytes"),
    ("kafka.value.deserializer", "x", "values are always read as bytes"),
    ("kafka.interceptor.classes", "x", "interceptors are not supported"),
    ("kafka.security.protocol", "TLS", "security.protocol"),
    ("kafka.ssl.trustore.location", "/ca.pem", r"\['kafka.ssl.trustore.location'\] are not understood"),
    ("kafka.security.protocol", "SASL_PLAINTEXT", "sasl.mechanism=GSSAPI is not supported"),
    ("kafka.isolation.level", "serializable", "read_uncommitted or read_committed"),
    ("kafka.request.timeout.ms", "soon", "kafka.request.timeout.ms"),
    ("maxRecordsPerPartition", "0", "maxRecordsPerPartition"),
    ("kafkaConsumer.pollTimeoutMs", "-5", "pollTimeoutMs"),
])
def test_kafka_options_the_source_cannot_honour_are_refused(option, value, message):
    with pytest.raises(ValueError, match=message):
        parse_source_options({**BASE, option.lower(): value})


def test_kafka_options_reach_the_source_clients(caplog):
    o = parse_source_options({**BASE, "kafka.client.id": "reports", "kafka.request.timeout.ms": "5000",
                              "kafka.socket.connection.setup.timeout.ms": "700", "kafka.fetch.max.wait.ms": "50",
                              "kafka.default.api.timeout.ms": "3000", "kafka.security.protocol": "plaintext",
                              "kafkaconsumer.polltimeoutms": "9000", "fetchoffset.numretries": "0",
                              "fetchoffset.retryintervalms": "250", "kafka.group.id": "g"})
    cluster = {"client_id": "reports", "request_timeout_ms": 5000, "connect_timeout_ms": 700}
    assert dict(o.cluster_config) == cluster and o.api_timeout_ms == 3000
    assert (o.offset_retries, o.offset_retry_interval_ms) == (0, 250)
    fetch = o.fetch_config()
    assert (fetch.max_wait_ms, fetch.retry_timeout_ms, dict(fetch.cluster_config)) == (50, 9000, cluster)
    assert any("kafka.group.id" in r.getMessage() for r in caplog.records)
    assert o.isolation_level == 0 and fetch.isolation_level == 0
    committed = parse_source_options({**BASE, "kafka.isolation.level": "READ_COMMITTED"})
    assert committed.isolation_level == 1 and committed.fetch_config().isolation_level == 1


def test_kafka_options_reach_the_sink_producer():
    o = parse_sink_options({"kafka.bootstrap.servers": "h:1", "kafka.acks": "1", "kafka.linger.ms": "20",
                            "kafka.enable.idempotence": "false", "kafka.compression.type": "LZ4"})
    assert dict(o.producer) == {"acks": 1, "linger_ms": 20, "enable_idempotence": False, "compression_type": "lz4"}
    for option, message in [("kafka.key.serializer", "keys are written as bytes"),
                            ("kafka.security.protocol", "security.protocol"), ("kafka.acks", "must be all"),
                            ("kafka.transactional.id", "transactional.id.prefix"),
                            ("kafka.transaction.timeout.ms", "kafka.transaction.timeout.ms")]:
        with pytest.raises(ValueError, match=message):
            parse_sink_options({"kafka.bootstrap.servers": "h:1", option: "x"})


def test_latest_in_a_batch_starting_offsets_json_is_refused():
    class NoBroker:  # the check comes before any lookup
        def partitions(self):
            raise AssertionError("looked up partitions")

    o = parse_source_options({**BASE, "startingOffsets": json.dumps({"a": {"0": -1, "1": -2}})})
    with pytest.raises(ValueError, match="startingOffsets for a-0 can't be latest"):
        plan_ranges(NoBroker(), o)
