"""Spark finds Python data sources by this module name: ``pyspark_<name>`` with a
``DefaultSource``. It makes ``spark.read.format("odradek")`` work without registering."""

from odradek.spark.data_source import OdradekDataSource as DefaultSource

__all__ = ["DefaultSource"]
