"""The tests' SparkSession (``local_session`` through ``conftest``) on a loaded machine:

- the JVM and the Python processes it starts wait 120 s, not Spark's 15 s, for each other on
  their socket (``spark.python.authenticate.socketTimeout``), which the Python side reads from
  ``SPARK_AUTH_SOCKET_TIMEOUT``;
- Spark's Python workers import the compiled pyspark of site-packages, not the source in
  ``pyspark.zip`` (``conftest._compiled_pyspark_home``): about 1 s of CPU less for every
  Python process Spark starts.
"""

from __future__ import annotations


def _in_a_worker(spark, probe) -> str:
    (answer,) = spark.sparkContext.parallelize([0], 1).mapPartitions(lambda _: [probe()]).collect()
    return answer


def test_python_processes_get_120_s_to_authenticate(spark):
    import os

    assert spark.sparkContext.getConf().get("spark.python.authenticate.socketTimeout") == "120s"
    assert _in_a_worker(spark, lambda: os.environ.get("SPARK_AUTH_SOCKET_TIMEOUT")) == "120"


def test_workers_import_the_compiled_pyspark(spark):
    def where() -> str:
        import pyspark

        return pyspark.__file__

    location = _in_a_worker(spark, where)
    assert ".zip" not in location and location.endswith("__init__.py"), location
