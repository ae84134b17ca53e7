"""``OdradekDataSource``: the ``odradek`` format of Spark's Python Data Source API.

    spark.read.format("odradek").option("kafka.bootstrap.servers", "127.0.0.1:9092")
         .option("subscribe", "page_views").load()

A job makes the format known with ``odradek.spark.register(spark)`` (``registration``: it
also makes Spark's Python workers run an interpreter that has odradek). Spark finds it by
itself only where its lookup, run in a Python worker, sees the top-level module
``pyspark_odradek`` with its ``DefaultSource``: odradek installed from a wheel, and workers
running a Python that has it. The reading side and options are Spark's Kafka source's
(``options``, ``schema``); Spark keeps the name ``kafka`` for its own connector, hence
``odradek``.

Save modes of a batch write: only Append works. Spark's Kafka sink takes Append and
ErrorIfExists (its default) and refuses Overwrite and Ignore (``KafkaSourceProvider.createRelation``),
but for a Python data source Spark's ``DataFrameWriter.save`` refuses ErrorIfExists and
Ignore itself, before the source is asked (UNSUPPORTED_DATA_SOURCE_SAVE_MODE: "cannot be
written in the ErrorIfExists mode. Please use either the Append or Overwrite mode"), and
``writer(schema, overwrite=True)`` refuses Overwrite, as Spark's Kafka sink does: records
cannot be taken back out of a topic. So ``df.write.format("odradek")...save()`` needs
``.mode("append")``.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from odradek.spark.batch_reader import BatchReader
from odradek.spark.errors import SaveModeError
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
            raise SaveModeError(
                "save mode Overwrite is not allowed for the odradek sink (records cannot be taken back out of a "
                "topic): write with mode(\"append\"), the one save mode a batch write to odradek takes (Spark's "
                "Kafka sink also takes ErrorIfExists, but Spark refuses that mode, its default, for every Python "
                "data source)")
        return BatchWriter(parse_sink_options(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> StreamWriter:
        return StreamWriter(parse_sink_options(self.options), schema)
