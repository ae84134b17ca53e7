"""The PySpark data source ``odradek``: batch and streaming reads and writes of odradek
topics, with the options and schema of Spark's Kafka source (see ``options``).

- ``data_source``: the ``DataSource`` (registered as ``odradek`` through the top-level
  module ``pyspark_odradek``);
- reading: ``batch_reader``, ``stream_reader`` (offsets, admission control, AvailableNow),
  ``offset_reader`` (partitions and offsets on the driver), ``offset_range`` (the unit of
  parallelism), ``range_reader`` + ``record_columns`` (executors fetch and decode into
  Arrow), ``rate_limit``;
- writing: ``writers`` (the three modes), ``record_writer`` (executors send), ``txn_sink``
  (the transactional sink, the streaming default), ``exactly_once`` + ``publisher`` (the
  staged sink), ``sink_log`` (both sinks' decisions), ``failpoints`` (their failure tests);
- ``kafka_params``: the ``kafka.*`` options, passed to odradek's clients or refused;
- ``lag``: Spark's Kafka lag metrics computed from a streaming progress report;
- ``client_pool``: odradek clients shared within a Python worker;
- ``session``: a quiet local SparkSession for the demo, tests and benchmarks.

Importing this package needs pyspark and pyarrow (``pip install odradek[spark]``).
"""

from odradek.spark.data_source import OdradekDataSource
from odradek.spark.lag import offsets_behind_latest

__all__ = ["OdradekDataSource", "offsets_behind_latest"]
