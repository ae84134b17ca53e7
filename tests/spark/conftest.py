"""Fixtures of the Spark tests: ONE SparkSession for all of them (local[2]; a JVM start
costs 7-12 s and the first Python worker 10 s more), one broker, fresh topic names.

The session is ``local[2,4]``: two cores, and a failed task is retried up to 4 times, as
on a cluster (plain ``local[2]`` never retries a task, and the sink's tests inject task
failures that a retry must absorb).

Every Python process Spark starts (a daemon per worker module, the long-lived process of each
streaming query's source, a ``txn_job`` child's) would import pyspark from
``$SPARK_HOME/python/lib/pyspark.zip``, which Spark puts first on its ``PYTHONPATH``: source
that is compiled anew in every process (no ``.pyc`` in the zip), about 1 s of CPU each, many
seconds on a loaded machine. ``_compiled_pyspark_home`` points ``SPARK_HOME`` at the installed
package's ``bin`` and ``jars`` without that zip, so the workers import the compiled package
from site-packages, the same files. It matters for more than time: the process of a streaming
query's source must connect back to the JVM within 10 s of its start
(``PythonWorkerFactory.createSimpleWorker``, a constant, no setting), and on a loaded machine
a slow import is how it misses that ("Python worker failed to connect back"). The other
socket timeout, ``spark.python.authenticate.socketTimeout``, ``local_session`` raises.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import tempfile
import uuid
from pathlib import Path

import pytest

from odradek.client import AdminClient, NewTopic
from odradek.testing.broker import InProcessBroker

_names = itertools.count()

for _name in ("kafka", "py4j"):
    logging.getLogger(_name).setLevel(logging.CRITICAL)


def _compiled_pyspark_home() -> None:
    """``SPARK_HOME`` = a directory of links to the pip-installed pyspark's ``bin`` and
    ``jars``, without ``python/lib/pyspark.zip`` (see the module's docstring); left alone when
    ``SPARK_HOME`` is set or pyspark is laid out otherwise. Set in ``os.environ``, so the jobs
    the tests start as child processes (``txn_job``) have it too."""
    import pyspark

    package = Path(pyspark.__file__).parent
    if "SPARK_HOME" in os.environ or not (package / "python" / "lib" / "pyspark.zip").exists():
        return
    digest = hashlib.sha1(str(package).encode()).hexdigest()[:10]  # one per installation
    home = Path(tempfile.gettempdir()) / f"odradek-spark-home-{digest}"
    home.mkdir(exist_ok=True)
    for name in ("bin", "jars"):
        link = home / name
        if not link.is_symlink() or link.resolve() != (package / name).resolve():
            tmp = home / f".{name}-{os.getpid()}"
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(package / name)
            tmp.replace(link)  # atomic: xdist workers may do this at the same time
    os.environ["SPARK_HOME"] = str(home)


@pytest.fixture(scope="session")
def spark():
    from odradek.spark.session import local_session

    _compiled_pyspark_home()
    session = local_session("odradek-tests", master="local[2,4]", shuffle_partitions=2)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    with InProcessBroker(tmp_path_factory.mktemp("spark-broker") / "data") as b:
        yield b


@pytest.fixture
def bootstrap(broker) -> str:
    return broker.bootstrap


@pytest.fixture
def new_topic(bootstrap):
    """``new_topic(partitions=2, **configs)`` creates a topic no other test uses; its name."""
    def create(partitions: int = 2, **configs) -> str:
        name = f"s{next(_names)}-{uuid.uuid4().hex[:6]}"
        with AdminClient(bootstrap) as admin:
            admin.create_topics([NewTopic(name, partitions, 1, configs={k.replace("_", "."): str(v)
                                                                         for k, v in configs.items()})])
        return name

    return create


@pytest.fixture
def checkpoint(tmp_path):
    return str(tmp_path / "checkpoint")
