"""A pytest plugin for users' own tests: ``odradek_broker`` starts a real broker,
``odradek_cluster`` a real ZooKeeper-mode cluster.

Installed with odradek (entry point ``pytest11``), so any project can write::

    def test_my_pipeline(odradek_broker):
        producer = KafkaProducer(bootstrap_servers=odradek_broker.bootstrap)

The broker listens on 127.0.0.1 with an ephemeral port and keeps its data in the test's
temporary directory. Mark a test with ``@pytest.mark.odradek_config(num_partitions=3)`` to
set broker configs (underscores for dots).

``odradek_cluster`` is a `LocalCluster` (odradek/server/local_cluster/local_cluster.py): N
broker processes (ids 1..N, default 3) in a ZooKeeper chroot of their own, on one ZooKeeper per
test session (``odradek_zookeeper``; Debian's package, skipped where it is missing), with
`QUICK_PROPS` (odradek/testing/local_cluster.py) so that a killed broker is noticed in
seconds. Failover helpers: ``kill(id)`` (kill -9), ``pause(id)`` / ``resume(id)`` (SIGSTOP /
SIGCONT), ``terminate(id)`` (controlled shutdown), ``restart(id)``, ``controller_id()``,
``leader(topic, partition)``, ``wait_for_leader(...)``; ``bootstrap`` lists every broker. Configure it with
``@pytest.mark.odradek_cluster_config(brokers=5, min_insync_replicas=2)``. Every process is
killed at the end of the test, and by the kernel if the test run itself dies; a failed test's
report carries each broker's output.
"""

from __future__ import annotations

import uuid

import pytest

from odradek.testing.broker import InProcessBroker


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "odradek_config(**configs): broker configs for odradek_broker")
    config.addinivalue_line("markers", "odradek_cluster_config(brokers=3, **configs): "
                                       "the size and broker configs of odradek_cluster")


@pytest.fixture
def odradek_broker(request, tmp_path):
    marker = request.node.get_closest_marker("odradek_config")
    overrides = marker.kwargs if marker else {}
    with InProcessBroker(tmp_path / "odradek-data", **overrides) as broker:
        yield broker


@pytest.fixture(scope="session")
def odradek_zookeeper(tmp_path_factory):
    """A standalone ZooKeeper on 127.0.0.1 for the session (``hosts``: its address)."""
    from odradek.server.local_cluster.zookeeper_server import ZooKeeperServer, environment_note

    note = environment_note()
    if note:
        pytest.skip(note)
    with ZooKeeperServer(tmp_path_factory.mktemp("odradek-zookeeper")) as server:
        yield server


@pytest.fixture
def odradek_cluster(request, tmp_path, odradek_zookeeper):
    from odradek.testing.local_cluster import QUICK_PROPS, LocalCluster

    marker = request.node.get_closest_marker("odradek_cluster_config")
    configs = dict(marker.kwargs) if marker else {}
    brokers = configs.pop("brokers", 3)
    props = {**QUICK_PROPS, **{key.replace("_", "."): str(value) for key, value in configs.items()}}
    cluster = LocalCluster(tmp_path / "odradek-cluster", brokers, props=props, zookeeper=odradek_zookeeper,
                           chroot=f"/odradek-{uuid.uuid4().hex[:12]}")
    try:
        yield cluster.start()
    finally:
        cluster.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test's report gets each broker's output tail (while the brokers still run)."""
    outcome = yield
    report = outcome.get_result()
    cluster = getattr(item, "funcargs", {}).get("odradek_cluster")
    if not report.failed or cluster is None:
        return
    try:
        report.sections.append(("odradek cluster", cluster.describe()))
    except Exception:  # noqa: BLE001 - a report must not break
        pass
    for node in cluster.nodes.values():
        report.sections.append((f"odradek broker {node.broker_id} output (tail)", node.output(3000)))
