"""The streaming query the sink tests run (in the test's process, or as ``txn_job``'s child):
SOURCE read from the earliest offset in micro-batches of 100 records, values upper-cased,
written to TARGET through the odradek sink, AvailableNow (it ends once it has read what
SOURCE held at its start)."""

from __future__ import annotations


def start_upper_case_stream(spark, bootstrap: str, source: str, target: str, checkpoint: str,
                            failpoint: str | None = None, **sink_options):
    """Start the query on ``checkpoint``; ``failpoint`` (``odradek.spark.failpoints``) and
    ``sink_options`` (e.g. ``exactlyOnce="staged"``) go to the sink. Returns the StreamingQuery."""
    from pyspark.sql import functions as F

    df = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", source).option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", "100").load()
          .select("key", F.upper(F.col("value").cast("string")).alias("value")))
    writer = (df.writeStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
              .option("topic", target).option("checkpointLocation", checkpoint).trigger(availableNow=True))
    for key, value in sink_options.items():
        writer = writer.option(key, value)
    if failpoint:
        writer = writer.option("failpoint", failpoint)
    return writer.start()


def run_upper_case_stream(spark, bootstrap: str, source: str, target: str, checkpoint: str,
                          failpoint: str | None = None, **sink_options):
    """``start_upper_case_stream`` and wait (at most 300 s) until the query ends, by itself or
    by a failure (not raised: see the returned query's ``exception()``)."""
    query = start_upper_case_stream(spark, bootstrap, source, target, checkpoint, failpoint, **sink_options)
    try:
        query.awaitTermination(300)
    except Exception:  # noqa: BLE001 - the caller checks query.exception()
        pass
    return query
