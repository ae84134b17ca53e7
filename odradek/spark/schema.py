"""The schemas of Spark's Kafka source, which odradek's source keeps so that jobs port by
changing only the format name.

Read (``read_schema``)::

    key binary, value binary, topic string, partition int, offset long,
    timestamp timestamp, timestampType int [, headers array<struct<key string, value binary>>]

``timestampType`` is 0 for CreateTime and 1 for LogAppendTime; ``headers`` is there only
with ``includeHeaders=true`` and is null for a record without headers. Arrow batches handed
to Spark must match ``arrow_schema`` exactly (timestamps are ``timestamp[us, tz=UTC]``).

Write: a DataFrame with a ``value`` column (binary or string) and optional ``key`` (binary
or string), ``topic`` (string), ``partition`` (int) and ``headers`` (as above) columns;
``check_write_schema`` says what is wrong with one that does not fit.

The schemas are built in Python (``StructType.fromDDL`` would need a live session).
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType, BinaryType, IntegerType, LongType, StringType, StructField, StructType, TimestampType,
)

__all__ = ["read_schema", "arrow_schema", "HEADERS", "check_write_schema", "WRITE_COLUMNS"]

HEADERS = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))

_FIELDS = [
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
]

WRITE_COLUMNS = ("key", "value", "topic", "partition", "headers")


def read_schema(include_headers: bool = False) -> StructType:
    fields = list(_FIELDS)
    if include_headers:
        fields.append(StructField("headers", HEADERS))
    return StructType(fields)


def arrow_schema(include_headers: bool = False) -> pa.Schema:
    return to_arrow_schema(read_schema(include_headers), timezone="UTC")


def check_write_schema(schema: StructType, topic_option: str | None) -> None:
    """Raise ValueError when ``schema`` cannot be written to odradek."""
    types = {f.name: f.dataType for f in schema.fields}
    if "value" not in types:
        raise ValueError("the DataFrame to write needs a 'value' column (binary or string)")
    for name in ("key", "value"):
        if name in types and not isinstance(types[name], (BinaryType, StringType)):
            raise ValueError(f"column '{name}' must be binary or string, not {types[name].simpleString()}")
    if "topic" in types and not isinstance(types["topic"], StringType):
        raise ValueError(f"column 'topic' must be string, not {types['topic'].simpleString()}")
    if "partition" in types and not isinstance(types["partition"], IntegerType):
        raise ValueError(f"column 'partition' must be int, not {types['partition'].simpleString()}")
    if "headers" in types and types["headers"].simpleString() != HEADERS.simpleString():
        raise ValueError("column 'headers' must be array<struct<key:string,value:binary>>")
    if topic_option is None and "topic" not in types:
        raise ValueError("no topic to write to: set the 'topic' option or give a 'topic' column")
