"""The cluster harness itself: ZooKeeper, registration, signals, restarts, log reading and
clean-up (no broker process outlives its test). These hold whatever the controller does."""

from __future__ import annotations

import os
import struct

import pytest

from tests.server.cluster.harness import BrokerNode, log_batches, wait_until

pytestmark = pytest.mark.timeout(120)


def batch(base: int, count: int, payload: bytes = b"x") -> bytes:
    """A fake v2 batch frame: the fields log_batches reads, and ``payload`` as the rest."""
    body = struct.pack(">ibi", 0, 2, 0) + struct.pack(">hi", 0, count - 1) + payload
    return struct.pack(">qi", base, len(body)) + body


def test_log_batches_frames_whole_batches_and_cuts_a_partial_tail():
    data = batch(0, 3) + batch(3, 1, b"yy") + batch(4, 2)[:-1]
    assert [(b, last) for b, last, _ in log_batches(data)] == [(0, 2), (3, 3)]
    assert log_batches(b"") == [] and log_batches(b"\0" * 64) == []


def test_partition_log_concatenates_segments_in_offset_order(tmp_path):
    node = BrokerNode(7, tmp_path, "127.0.0.1:1/x", {})
    d = node.partition_dir("t", 0)
    d.mkdir(parents=True)
    (d / f"{10:020d}.log").write_bytes(batch(10, 5) + b"\0" * 100)  # reserved space after the data
    (d / f"{0:020d}.log").write_bytes(batch(0, 10))
    (d / f"{0:020d}.index").write_bytes(b"junk")
    assert node.partition_log("t", 0) == batch(0, 10) + batch(10, 5)
    assert node.log_end_offset("t", 0) == 15
    (tmp_path / "data" / "t-1.0123abcd-delete").mkdir()
    (tmp_path / "data" / "t-other-0").mkdir()
    assert [p.name for p in node.partition_dirs("t")] == ["t-0", "t-1.0123abcd-delete"]


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_brokers_register_pause_kill_restart_and_close(make_cluster):
    cluster = make_cluster().start([11, 12], controller=False)
    assert cluster.registered_ids() == [11, 12]
    registration = cluster.read_json("/brokers/ids/11")
    assert registration["endpoints"] == [f"PLAINTEXT://127.0.0.1:{cluster[11].port}"]
    assert cluster.broker_epoch(11) > 0

    # Paused only once its start-up is over: a session lost while the broker is still
    # starting (installing its controller watches) fails that start: odradek does not retry it.
    wait_until(lambda: "odradek broker 12 ready" in cluster[12].output(), 30, "broker 12 to finish starting")
    cluster[12].pause()
    cluster.wait_unregistered(12)  # its session ends while it is stopped
    cluster[12].resume()
    cluster.wait_registered(12, timeout=30)  # and it registers again

    port, first_pid = cluster[11].port, cluster[11].pid
    cluster[11].kill()
    assert not cluster[11].alive
    cluster.wait_unregistered(11)
    cluster.restart(11)
    assert cluster[11].pid != first_pid and cluster[11].port == port
    assert cluster[11].starts == 2 and cluster[11].log_path.name == "broker-2.log"

    assert cluster[11].terminate(timeout=30) == 0
    pids = [cluster[12].pid]
    cluster[12].pause()
    cluster.close()  # a paused broker is killed too
    assert not any(_running(pid) for pid in pids)
    assert not cluster[12].alive


def test_a_broker_that_cannot_start_fails_fast_with_its_output(make_cluster):
    cluster = make_cluster({"log.segment.bytes": "not-a-number"})
    with pytest.raises(AssertionError, match="log.segment.bytes"):
        cluster.start([21], controller=False, timeout=30)


def test_children_die_with_the_test_process(zookeeper, tmp_path):
    """PR_SET_PDEATHSIG: a broker started by a process that dies is killed by the kernel."""
    import subprocess
    import sys

    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from tests.server.cluster.harness import BrokerNode\n"
        f"node = BrokerNode(31, Path({str(tmp_path)!r}), {zookeeper.hosts + '/orphan'!r}, {{}})\n"
        "node.launch()\n"
        "print(node.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              cwd=os.path.dirname(__file__) + "/../../..")
    child = int(parent.stdout.readline())
    assert _running(child)
    parent.kill()
    parent.wait()
    wait_until(lambda: not _running(child), 10, "the orphaned broker to be killed")


def test_verifying_producer_and_replica_bytes_on_one_broker(make_cluster):
    """The tools the failover tests rely on, where no failover is involved: one broker."""
    from tests.server.cluster.cluster_clients import VerifyingProducer, create_topic

    cluster = make_cluster().start([41])  # with its controller: CreateTopics needs one
    create_topic(cluster.bootstrap, "solo", 2, 1)
    cluster.wait_topic_ready("solo", 2)
    with VerifyingProducer(cluster.bootstrap, "solo", 2, rate=400) as producer:
        producer.wait_acked(200)
    assert producer.failed == []
    read = producer.verify(cluster.bootstrap)
    for p in range(2):
        acked = producer.acked[p]
        assert [off for off, _ in acked] == list(range(len(acked)))
        assert len(read[p]) == len(acked)
        assert cluster[41].log_end_offset("solo", p) == len(acked)
        assert cluster.wait_replicas_identical("solo", p, [41], timeout=5)
    # verify() catches an acknowledged record that is missing or not where it was acknowledged.
    last_offset, last_seq = producer.acked[0][-1]
    producer.acked[0].append((last_offset + 1, last_seq + 1))
    with pytest.raises(AssertionError, match="was acknowledged at offset"):
        producer.verify(cluster.bootstrap)
    producer.acked[0][-1] = (last_offset, last_seq - 1)
    with pytest.raises(AssertionError, match="was acknowledged at offset"):
        producer.verify(cluster.bootstrap)
