"""``register(spark)``: the ``odradek`` format in a job's own SparkSession, with Spark's Python
workers able to run it.

    spark = SparkSession.builder.master("local[2]").getOrCreate()
    odradek.spark.register(spark)

Spark runs a Python data source in Python processes it starts itself: the driver-side
planning (schema, partitions and offsets, the writers' commit) and the executors' reads and
writes. It starts them with the interpreter named by ``PYSPARK_PYTHON`` as it was when the
SparkContext started (``SparkContext.pythonExec``), else ``python3`` from the PATH. A job run
as ``.venv/bin/python job.py`` without activating the virtualenv (or from an IDE, cron, a
service) gets the system's Python there, which has neither odradek nor pyarrow: the job then
fails with DATA_SOURCE_NOT_FOUND (Spark's lookup of ``pyspark_odradek`` ran in that Python)
or ModuleNotFoundError in a worker. ``spark-submit job.py`` runs the driver itself with that
``python3`` unless ``PYSPARK_PYTHON`` (or ``--conf spark.pyspark.python``) says otherwise, and
there ``import odradek`` already fails, before any of this can help.

What ``register`` does:
- ``PYSPARK_PYTHON`` unset: Spark's workers run this interpreter, ``sys.executable``. It is
  set as the context's ``pythonExec``, which Spark reads each time it wraps a Python function
  (the data source registered next among them; UDFs defined later too, as ``PYSPARK_PYTHON``
  would have done), and as ``PYSPARK_PYTHON`` for SparkContexts this process starts later.
- ``PYSPARK_PYTHON`` set: the user's choice is kept. With a local master, an interpreter other
  than this one is asked first whether it imports odradek and pyarrow, and a ``RuntimeError``
  says in one line what to set when it does not. (On a cluster the executors' Python is on
  other machines: not checked.)
- then ``spark.dataSource.register(OdradekDataSource)``. A source Spark's own lookup found
  already under that name (odradek installed from a wheel) is kept: Spark refuses to replace
  it (DATA_SOURCE_ALREADY_EXISTS), and it runs in the Python that found it.

Spark Connect sessions have no SparkContext here: the data source runs in the server's
Python, so only the registration is done.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

__all__ = ["register", "worker_python"]

_IMPORTS = "import odradek, pyarrow"


def register(spark) -> None:
    """Make ``format("odradek")`` known to ``spark``, its Python workers running a Python
    that has odradek (see the module docstring); harmless when done already."""
    from odradek.spark.data_source import OdradekDataSource

    context = _classic_context(spark)
    if context is not None:
        context.pythonExec = worker_python(context.master)
    try:
        spark.dataSource.register(OdradekDataSource)
    except Exception as e:  # noqa: BLE001 - found by Spark's lookup already: that one stays
        if "ALREADY_EXISTS" not in str(e):
            raise


def worker_python(master: str = "local") -> str:
    """The Python that Spark's workers are to run: ``PYSPARK_PYTHON``, checked when the
    master is local, else this interpreter (and ``PYSPARK_PYTHON`` is set to it)."""
    chosen = os.environ.get("PYSPARK_PYTHON")
    if not chosen:
        os.environ["PYSPARK_PYTHON"] = sys.executable
        return sys.executable
    if master.startswith("local") and not _same_interpreter(chosen):
        _check(chosen)
    return chosen


def _classic_context(spark):
    """The session's SparkContext; None for Spark Connect sessions, which have none."""
    try:
        return spark.sparkContext
    except Exception:  # noqa: BLE001 - pyspark raises its own NotImplemented error under Connect
        return None


def _same_interpreter(name: str) -> bool:
    found = shutil.which(name)
    return found is not None and os.path.abspath(found) == os.path.abspath(sys.executable)


def _check(python: str) -> None:
    """Refuse, in one line, a ``python`` that cannot import odradek and pyarrow."""
    try:
        result = subprocess.run([python, "-c", _IMPORTS], capture_output=True, text=True, timeout=120)
    except OSError as e:  # not found, not executable
        failure = str(e)
    else:
        if result.returncode == 0:
            return
        lines = result.stderr.strip().splitlines()
        failure = lines[-1] if lines else f"exit status {result.returncode}"
    raise RuntimeError(f"Spark's Python workers would run {python} (PYSPARK_PYTHON), which cannot "
                       f"'{_IMPORTS}' ({failure}): set PYSPARK_PYTHON to a Python that has odradek[spark] "
                       f"installed, e.g. PYSPARK_PYTHON={sys.executable}, or leave it unset")
