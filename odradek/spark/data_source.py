"""``OdradekDataSource``: the ``odradek`` format of Spark's Python Data Source API.

    spark.read.format("odradek").option("kafka.bootstrap.servers", "127.0.0.1:9092")
         .option("subscribe", "page_views").load()

It is registered by name without a ``spark.dataSource.register`` call: Spark imports every
top-level module named ``pyspark_<name>`` that has a ``DefaultSource``, and odradek installs
``pyspark_odradek`` (see ``session.register`` for checkouts where that lookup misses it).
The reading side and options are Spark's Kafka source's (``options``, ``schema``); Spark
keeps the name ``kafka`` for its own connector, hence ``odradek``.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from odradek.spark.batch_reader import BatchReader
from odradek.spark.options import parse_sink_options, parse_source_options
from odradek.spark.schema import read_schema
from odradek.spark.stream_reader import StreamReader
from odradek.spark.writers import BatchWriter, StreamWriter

__all__ = ["OdradekDataSource"]


class OdradekDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "odradek"

    def schema(self) -> StructType:
        include = str(dict(self.options).get("includeheaders", dict(self.options).get("includeHeaders", "false")))
        return read_schema(include.strip().lower() == "true")

    def reader(self, schema: StructType) -> BatchReader:
        return BatchReader(parse_source_options(self.options))

    def streamReader(self, schema: StructType) -> StreamReader:
        return StreamReader(parse_source_options(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> BatchWriter:
        if overwrite:  # as Spark's Kafka sink: records cannot be taken back out of a topic
            raise ValueError("save mode 'overwrite' is not allowed for the odradek sink: allowed save modes are "
                             "'append' and 'errorifexists' (the default)")
        return BatchWriter(parse_sink_options(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> StreamWriter:
        return StreamWriter(parse_sink_options(self.options), schema)
