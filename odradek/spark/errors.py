"""Errors of the ``odradek`` data source whose one-line message is all a Spark user needs:
what failed and what to set. Spark shows them without a Python traceback.

How Spark shows a Python exception: the Python worker that raised it (a driver-side planner
process, the long-lived streaming source process, or an executor's worker) formats it with
``pyspark.util.handle_worker_exception`` and the JVM wraps that text in its own error
(PYTHON_DATA_SOURCE_ERROR on the driver, PYTHON_EXCEPTION in a failed task). The text is the
whole traceback unless the worker's environment has ``SPARK_HIDE_TRACEBACK`` (what Spark's
``spark.sql.execution.pyspark.udf.hideTraceback.enabled`` sets for every worker), in which
case it is the last line only: ``odradek.spark.errors.BrokersUnreachable: ...``.

A ``OneLineError`` created inside a Spark Python worker (``SPARK_PYTHON_RUNTIME`` is
``PYTHON_WORKER`` there) sets ``SPARK_HIDE_TRACEBACK`` in that worker only. Every kind of
worker exits right after reporting an exception, so the setting reaches no other error;
odradek never catches a ``OneLineError`` it raised, so one created is one reported.
Anywhere else (the driver's own process, tests) nothing is changed.
"""

from __future__ import annotations

import os

__all__ = ["OneLineError", "BrokersUnreachable", "SaveModeError"]


class OneLineError(Exception):
    """An error reported by its message alone (one line: no newline in it)."""

    def __init__(self, message: str) -> None:
        if "\n" in message:
            raise ValueError(f"a OneLineError's message must be one line: {message!r}")
        super().__init__(message)
        if os.environ.get("SPARK_PYTHON_RUNTIME") == "PYTHON_WORKER":
            os.environ["SPARK_HIDE_TRACEBACK"] = "1"


class BrokersUnreachable(OneLineError):
    """No bootstrap server accepted a connection within the timeout an option sets (see
    ``reachability``)."""

    def __init__(self, bootstrap: str, timeout_ms: int, option: str, errors: list[str]) -> None:
        self.bootstrap = bootstrap
        why = "; ".join(errors) or "no attempt finished in time"
        super().__init__(f"cannot reach the Kafka bootstrap servers {bootstrap} within {timeout_ms} ms "
                         f"(option '{option}'): {why}")


class SaveModeError(OneLineError, ValueError):
    """A batch write in a save mode the sink does not take (see ``data_source``)."""
