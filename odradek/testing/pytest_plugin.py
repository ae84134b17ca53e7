"""A pytest plugin for users' own tests: ``odradek_broker`` starts a real broker.

Installed with odradek (entry point ``pytest11``), so any project can write::

    def test_my_pipeline(odradek_broker):
        producer = KafkaProducer(bootstrap_servers=odradek_broker.bootstrap)

The broker listens on 127.0.0.1 with an ephemeral port and keeps its data in the test's
temporary directory. Mark a test with ``@pytest.mark.odradek_config(num_partitions=3)`` to
set broker configs (underscores for dots).
"""

from __future__ import annotations

import pytest

from odradek.testing.broker import InProcessBroker


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "odradek_config(**configs): broker configs for odradek_broker")


@pytest.fixture
def odradek_broker(request, tmp_path):
    marker = request.node.get_closest_marker("odradek_config")
    overrides = marker.kwargs if marker else {}
    with InProcessBroker(tmp_path / "odradek-data", **overrides) as broker:
        yield broker
