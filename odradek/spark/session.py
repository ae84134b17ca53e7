"""A quiet local SparkSession with the ``odradek`` format registered: for the demo, the tests
and the benchmarks.

What it sets, and why (measured on this project's machines, see PYSPARK.md):
- ``PYSPARK_PYTHON`` = this interpreter, so Python workers import odradek from the same
  environment (else Spark may start another Python without the packages);
- ``SPARK_LOCAL_IP`` and the driver's addresses on 127.0.0.1 (no traffic elsewhere);
- logs at ERROR through a log4j2 file, no console progress bar, no UI;
- ``-XX:TieredStopAtLevel=1`` when ``fast_start`` (the default): the JVM starts in about
  6 s instead of 7-12 s, at the price of slower long runs (benchmarks turn it off);
- few shuffle partitions: local jobs here are small;
- ``spark.python.authenticate.socketTimeout`` 120 s instead of 15 s: how long the JVM and a
  Python process it started (worker, planner, a streaming source's process) wait for each
  other's authentication on their socket. A machine busy with other work can take longer
  than 15 s to schedule a freshly started Python, and the job then fails though nothing is
  wrong; a real failure of such a process ends its socket at once, so waiting longer costs
  nothing. (The 10 s within which a streaming source's process must connect back at all,
  ``PythonWorkerFactory.createSimpleWorker``, is a constant of Spark's, with no setting.)

``register`` (``registration``, re-exported here) adds the data source explicitly: Spark's
own lookup of the top-level module ``pyspark_odradek`` misses an editable install
(``pip install -e``) and any worker Python without odradek.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from odradek.spark.registration import register

__all__ = ["local_session", "register"]

_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.spark.name = org.apache.spark
logger.spark.level = error
"""


def _log_config() -> Path:
    path = Path(tempfile.gettempdir()) / "odradek-spark-log4j2.properties"
    if not path.exists() or path.read_text() != _LOG4J2:
        path.write_text(_LOG4J2)
    return path


def local_session(app: str = "odradek", master: str = "local[2]", *, fast_start: bool = True,
                  shuffle_partitions: int = 4, conf: dict | None = None):
    """A SparkSession on this machine (``getOrCreate``: an existing one is returned)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    java = f"-Dlog4j.configurationFile=file:{_log_config()}"
    if fast_start:
        java += " -XX:TieredStopAtLevel=1"
    builder = (
        SparkSession.builder.master(master).appName(app)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.extraJavaOptions", java)
        .config("spark.executor.extraJavaOptions", java)
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.python.authenticate.socketTimeout", "120s")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.warehouse.dir", str(Path(tempfile.gettempdir()) / "odradek-spark-warehouse"))
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark
