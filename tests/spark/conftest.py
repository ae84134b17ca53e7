"""Fixtures of the Spark tests: ONE SparkSession for all of them (local[2]; a JVM start
costs 7-12 s and the first Python worker 10 s more), one broker, fresh topic names.

The session is ``local[2,4]``: two cores, and a failed task is retried up to 4 times, as
on a cluster (plain ``local[2]`` never retries a task, and the sink's tests inject task
failures that a retry must absorb).
"""

from __future__ import annotations

import itertools
import logging
import uuid

import pytest

from odradek.client import AdminClient, NewTopic
from odradek.testing.broker import InProcessBroker

_names = itertools.count()

for _name in ("kafka", "py4j"):
    logging.getLogger(_name).setLevel(logging.CRITICAL)


@pytest.fixture(scope="session")
def spark():
    from odradek.spark.session import local_session

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
