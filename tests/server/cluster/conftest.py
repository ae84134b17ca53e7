"""Fixtures of the cluster tests: a fresh chroot and cluster per test, on the session's
ZooKeeper (``zookeeper``, in ``tests/conftest.py``).

Every test here is marked ``cluster`` (deselect them with ``-m "not cluster"``). A failing test's
report carries the tail of each broker's output, and its ZooKeeper summary.
"""

from __future__ import annotations

import os
import uuid

import pytest

from tests.server.cluster.harness import Cluster


def pytest_configure(config):
    config.addinivalue_line("markers", "cluster: integration tests with ZooKeeper and broker processes")


def pytest_collection_modifyitems(config, items):
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.cluster)


@pytest.fixture
def make_cluster(zookeeper, tmp_path):
    """``make_cluster(props=None)`` -> a `Cluster` in its own chroot (start brokers with
    ``.start(ids)``); every cluster made is killed at the end of the test, pass or fail."""
    made: list[Cluster] = []

    def make(props: dict[str, str] | None = None) -> Cluster:
        chroot = f"/cluster-{uuid.uuid4().hex[:10]}"
        cluster = Cluster(zookeeper, tmp_path / f"cluster{len(made)}", chroot, props)
        made.append(cluster)
        return cluster

    make.clusters = made
    try:
        yield make
    finally:
        for cluster in made:
            cluster.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test's report gets each broker's output tail while the brokers still run."""
    outcome = yield
    report = outcome.get_result()
    make = getattr(item, "funcargs", {}).get("make_cluster")
    if not report.failed or make is None:
        return
    for cluster in make.clusters:
        try:
            report.sections.append(("cluster", cluster.describe()))
        except Exception:  # noqa: BLE001 - a report must not break
            pass
        for node in cluster.nodes.values():
            report.sections.append((f"broker {node.broker_id} output (tail)", node.output(3000)))
