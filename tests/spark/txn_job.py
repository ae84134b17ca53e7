"""A Spark streaming job with the transactional sink, run as a child process by
``test_txn_sink`` so that the test can kill it hard (kill -9 of its process group: the
driver's JVM and every Python worker); the test then runs the same query on the same
checkpoint in its own SparkSession (``upper_case_stream``).

    python -m tests.spark.txn_job BOOTSTRAP SOURCE TARGET CHECKPOINT [FAILPOINT]

It runs ``upper_case_stream``'s query: SOURCE from the earliest offset in micro-batches of
100 records, values upper-cased, into TARGET (AvailableNow: it ends once it has read what
SOURCE held at its start). A FAILPOINT with ``:hang`` (``failpoints``) makes it stop at that point and
write the point's name to ``$ODRADEK_FAILPOINT_MARKER`` for the test to see.
"""

from __future__ import annotations

import sys


def main(bootstrap: str, source: str, target: str, checkpoint: str, failpoint: str = "") -> None:
    from odradek.spark.session import local_session
    from tests.spark.upper_case_stream import start_upper_case_stream

    spark = local_session("odradek-txn-job", master="local[2,4]", shuffle_partitions=2)
    query = start_upper_case_stream(spark, bootstrap, source, target, checkpoint, failpoint)
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:])
