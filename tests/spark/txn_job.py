"""A Spark streaming job with the transactional sink, run as a child process by
``test_txn_sink`` so that the test can kill it hard (kill -9 of its process group: the
driver's JVM and every Python worker) and start it again on the same checkpoint.

    python -m tests.spark.txn_job BOOTSTRAP SOURCE TARGET CHECKPOINT [FAILPOINT]

It reads SOURCE from the earliest offset in micro-batches of 100 records, upper-cases the
values and writes them to TARGET (AvailableNow: it ends once it has read what SOURCE held at
its start). A FAILPOINT with ``:hang`` (``failpoints``) makes it stop at that point and
write the point's name to ``$ODRADEK_FAILPOINT_MARKER`` for the test to see.
"""

from __future__ import annotations

import sys


def main(bootstrap: str, source: str, target: str, checkpoint: str, failpoint: str = "") -> None:
    from pyspark.sql import functions as F

    from odradek.spark.session import local_session

    spark = local_session("odradek-txn-job", master="local[2,4]", shuffle_partitions=2)
    df = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", source).option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", "100").load()
          .select("key", F.upper(F.col("value").cast("string")).alias("value")))
    writer = (df.writeStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
              .option("topic", target).option("checkpointLocation", checkpoint).trigger(availableNow=True))
    if failpoint:
        writer = writer.option("failpoint", failpoint)
    query = writer.start()
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:])
