"""The PySpark data source ``odradek``: batch and streaming reads and writes of odradek
topics, with the options and schema of Spark's Kafka source (see ``options``).

- ``registration``: ``register(spark)``, the format ``odradek`` in a job's own session, with
  Spark's Python workers running a Python that has odradek;
- ``data_source``: the ``DataSource`` (also found by Spark as the top-level module
  ``pyspark_odradek`` where odradek is installed from a wheel);
- reading: ``batch_reader``, ``stream_reader`` (offsets, admission control, AvailableNow),
  ``offset_reader`` (partitions and offsets on the driver), ``offset_range`` (the unit of
  parallelism), ``range_reader`` + ``record_columns`` (executors fetch and decode into
  Arrow), ``rate_limit``;
- writing: ``writers`` (the three modes), ``record_writer`` (executors send), ``txn_sink``
  (the transactional sink, the streaming default), ``exactly_once`` + ``publisher`` (the
  staged sink), ``sink_log`` (both sinks' decisions), ``failpoints`` (their failure tests);
- ``kafka_params``: the ``kafka.*`` options, passed to odradek's clients or refused;
- ``lag``: Spark's Kafka lag metrics computed from a streaming progress report;
- ``client_pool``: odradek clients shared within a Python worker; ``reachability`` (waiting
  for the cluster at first contact) and ``errors`` (messages Spark shows in one line);
- ``session``: a quiet local SparkSession for the demo, tests and benchmarks.

Importing this package needs pyspark and pyarrow (``pip install odradek[spark]``).
"""

from odradek.spark.data_source import OdradekDataSource
from odradek.spark.errors import BrokersUnreachable
from odradek.spark.lag import offsets_behind_latest
from odradek.spark.registration import register

__all__ = ["OdradekDataSource", "BrokersUnreachable", "offsets_behind_latest", "register"]
