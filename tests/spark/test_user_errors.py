"""What a job's author sees when a write or a read cannot go ahead, through the shared session:

- save modes: Spark refuses ErrorIfExists (its default) and Ignore for every Python data
  source; odradek refuses Overwrite with a message that says to use Append and does not
  claim any other mode works; Append writes;
- a cluster that does not answer (a port where nothing listens): reads fail after
  ``kafka.default.api.timeout.ms``, writes after ``kafka.max.block.ms`` (here 1.5 s, so that
  the tests are quick), each with one line naming the bootstrap servers and the option
  inside Spark's error, and no Python traceback. Writes both in the default mode (the
  executors find the cluster down) and the transactional one (the driver does, first); a
  streaming query fails the same way (the long-lived source process finds it down).
"""

from __future__ import annotations

import socket

import pytest
from pyspark.errors import AnalysisException

TIMEOUT_MS = 1500


@pytest.fixture
def down_bootstrap():
    """host:port where nothing listens: a port bound (so no one else takes it) but not listening."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{sock.getsockname()[1]}"


def _rows(spark):
    return spark.createDataFrame([("k1", "v1"), ("k2", "v2")], "key string, value string")


@pytest.mark.parametrize("mode", [None, "errorifexists", "ignore"])
def test_modes_spark_refuses(spark, bootstrap, new_topic, mode):
    writer = _rows(spark).write.format("odradek").option("kafka.bootstrap.servers", bootstrap)
    writer = writer.option("topic", new_topic(1))
    with pytest.raises(AnalysisException, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE") as refused:
        (writer if mode is None else writer.mode(mode)).save()
    assert '"odradek" cannot be written in the' in str(refused.value)


def test_overwrite_is_refused_in_one_line_pointing_at_append(spark, bootstrap, new_topic):
    topic = new_topic(1)
    writer = _rows(spark).write.format("odradek").option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
    with pytest.raises(AnalysisException) as refused:
        writer.mode("overwrite").save()
    message = str(refused.value)
    assert "odradek.spark.errors.SaveModeError: save mode Overwrite is not allowed for the odradek sink" in message
    assert 'write with mode("append"), the one save mode a batch write to odradek takes' in message
    assert "Traceback" not in message
    assert "allowed save modes are" not in message.lower()  # no mode Spark refuses is offered
    writer.mode("append").save()
    read = spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    assert sorted(r["value"] for r in read.load().collect()) == [b"v1", b"v2"]


def _one_line(message: str, bootstrap: str, option: str) -> None:
    """``message`` (Spark's) carries odradek's one line, and no traceback."""
    assert "Traceback" not in message, message
    (line,) = [text for text in message.splitlines() if "BrokersUnreachable" in text]
    expected = (f"odradek.spark.errors.BrokersUnreachable: cannot reach the Kafka bootstrap servers {bootstrap} "
                f"within {TIMEOUT_MS} ms (option '{option}'): {bootstrap}: Connection refused")
    assert line.endswith(expected), message


def test_read_from_a_cluster_that_does_not_answer(spark, down_bootstrap):
    read = (spark.read.format("odradek").option("kafka.bootstrap.servers", down_bootstrap)
            .option("subscribe", "events").option("kafka.default.api.timeout.ms", str(TIMEOUT_MS)))
    with pytest.raises(Exception) as failed:
        read.load().count()
    _one_line(str(failed.value), down_bootstrap, "kafka.default.api.timeout.ms")


@pytest.mark.parametrize("exactly_once", ["false", "transactional"])
def test_write_to_a_cluster_that_does_not_answer(spark, down_bootstrap, exactly_once):
    writer = (_rows(spark).write.format("odradek").option("kafka.bootstrap.servers", down_bootstrap)
              .option("topic", "events").option("exactlyOnce", exactly_once)
              .option("kafka.max.block.ms", str(TIMEOUT_MS)).mode("append"))
    with pytest.raises(Exception) as failed:
        writer.save()
    _one_line(str(failed.value), down_bootstrap, "kafka.max.block.ms")


def test_stream_from_a_cluster_that_does_not_answer(spark, down_bootstrap, checkpoint):
    stream = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", down_bootstrap)
              .option("subscribe", "events").option("kafka.default.api.timeout.ms", str(TIMEOUT_MS)).load())
    query = stream.writeStream.format("noop").option("checkpointLocation", checkpoint).start()
    try:
        with pytest.raises(Exception) as failed:
            query.awaitTermination(120)
    finally:
        query.stop()
    _one_line(str(failed.value), down_bootstrap, "kafka.default.api.timeout.ms")
