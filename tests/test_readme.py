"""Every code block of README.md runs as printed (against test brokers and clusters, not 127.0.0.1:9092).

Each fenced block is claimed by exactly one test below, which says how it is run; a block no
test claims fails ``test_every_block_is_run``, so a new example cannot go untested.
"""

from __future__ import annotations

import ast
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from odradek.server.local_cluster.zookeeper_server import zookeeper_installed
from odradek.testing.broker import InProcessBroker
from tests.conftest import ROOT

README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"^```(\w*)\n(.*?)^```", README, flags=re.S | re.M)
VENV_BIN = Path(sys.executable).parent
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def _block(marker: str) -> str:
    found = [text for _, text in BLOCKS if marker in text]
    assert len(found) == 1, f"expected one README block containing {marker!r}, found {len(found)}"
    return found[0]


# The marker that identifies each block, and the test that runs it.
CLAIMS = {
    "./scripts/demo.sh": "test_the_two_commands",
    "data in /tmp/odradek-logs": "test_running_a_broker",
    "zookeeper.connect=127.0.0.1:2181": "test_running_a_cluster",
    "B=127.0.0.1:9092": "test_client_and_command_line",
    "from odradek.client import AsyncConsumer": "test_client_and_command_line",
    "# A consumer group and a share group": "test_consumer_groups_and_share_groups",
    "odradek mirror --source": "test_mirroring_between_clusters",
    "odradek cluster --brokers 3": "test_one_command_cluster",
    "odradek leader-election": "test_leader_elections_and_replication_reports",
    "odradek reassign-partitions": "test_moving_partitions",
    "broker.rack=eu-1a": "test_racks",
    "odradek log-dirs --bootstrap-server": "test_log_directories",
    "def test_failover(odradek_cluster)": "test_the_pytest_fixtures",
    # read and run by tests/server/test_secured_server_properties.py
    "# server.properties\nbroker.id=0": "tests/server/test_secured_server_properties.py",
    "# admin.properties": "tests/server/test_secured_server_properties.py",
    # the Spark job and its two commands: run outside the virtualenv by tests/spark/test_user_job.py
    "# job.py\n": "tests/spark/test_user_job.py",
    "PYSPARK_PYTHON=$PWD/.venv/bin/python": "tests/spark/test_user_job.py",
}


def test_every_block_is_run():
    for language, text in BLOCKS:
        claimed = [marker for marker in CLAIMS if marker in text]
        assert len(claimed) == 1, f"README block ({language}) is run by no test, or by several:\n{text}"


def _with_venv(command: str) -> str:
    return command.replace(".venv/bin/", f"{VENV_BIN}/")


def test_the_two_commands():
    """The block names the two scripts; running them here would run this suite inside itself,
    so the test checks that they exist and that CI runs both, the demo first."""
    lines = [line.split("#")[0].strip() for line in _block("./scripts/demo.sh").splitlines()]
    commands = [line for line in lines if line]
    assert commands == ["./scripts/demo.sh", "./scripts/test.sh"]
    for command in commands:
        assert os.access(ROOT / command, os.X_OK), f"{command} is not executable"
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.findall(r"^(\./scripts/\S+)", ci, flags=re.M) == commands


@pytest.mark.parametrize("line", [line for line in _block("data in /tmp/odradek-logs").splitlines() if line.strip()])
def test_running_a_broker(line, tmp_path):
    """Each command starts a broker that reports itself ready and stops cleanly on SIGTERM;
    the listener and data directory are moved to a free port and a temporary directory."""
    command = _with_venv(line.split("#")[0].strip())
    command += f" --override listeners=PLAINTEXT://127.0.0.1:0 --override log.dirs={tmp_path / 'data'}"
    proc = subprocess.Popen("exec " + command, shell=True, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        first = proc.stdout.readline()
        assert "ready" in first, first + proc.stderr.read() if proc.poll() is not None else first
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0


# The values in topic events once both client blocks ran: the shell block's (k1, k2, then k3
# and k4 in a transaction) and the Python block's (page-view, order-paid in a transaction,
# then search from the asyncio producer).
SHELL_VALUES = ["hello", "world", "paid", "shipped"]
PYTHON_VALUES = ["page-view", "order-paid", "search"]


def test_client_and_command_line(tmp_path):
    """The shell block, then the Python block, as printed, against a fresh broker: the topic
    the shell block creates is the one the Python block reads. The group consumer prints
    every record its group (analytics, which read hello and world in the shell block) had not
    read yet, the Python producers' included, one line each; the asyncio consumer, assigned
    every partition from the start, prints all seven. The broker keeps Kafka's
    group.initial.rebalance.delay.ms (3 s, as `odradek broker` has it; test brokers use 0),
    which a group's first join waits for."""
    with InProcessBroker(tmp_path / "data", group_initial_rebalance_delay_ms=3000) as broker:
        shell = _with_venv(_block("B=127.0.0.1:9092")).replace(DEFAULT_BOOTSTRAP, broker.bootstrap)
        result = subprocess.run(["bash", "-euo", "pipefail", "-c", shell], cwd=ROOT, capture_output=True,
                                text=True, timeout=240)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "k1\thello" in result.stdout and "k2\tworld" in result.stdout
        assert "records sent" in result.stdout
        assert re.search(r"analytics\s+events\s+\d\s+\d+\s+\d+\s+\d+", result.stdout)  # the lag table

        script = tmp_path / "example.py"
        script.write_text(_block("from odradek.client import AsyncConsumer").replace(DEFAULT_BOOTSTRAP, broker.bootstrap))
        result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                                timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    grouped = [ast.literal_eval(line.split(" ", 3)[3]) for line in lines if re.fullmatch(r"\d \d+ b'.*' b'.*'", line)]
    assert sorted(grouped) == sorted(v.encode() for v in ["paid", "shipped", "page-view", "order-paid"]), result.stdout
    polled = [v for line in lines if line.startswith("events-") for v in ast.literal_eval(line.split(" ", 1)[1])]
    assert sorted(polled) == sorted(v.encode() for v in SHELL_VALUES + PYTHON_VALUES), result.stdout


def test_consumer_groups_and_share_groups(tmp_path):
    """The block as printed against a fresh broker: the consumer-protocol group reads the six
    jobs; the two share-group workers together accept each job once, job-3 on its second
    delivery after it was released."""
    with InProcessBroker(tmp_path / "data") as broker:
        script = tmp_path / "groups.py"
        script.write_text(_block("# A consumer group and a share group").replace(DEFAULT_BOOTSTRAP, broker.bootstrap))
        result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                                timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    jobs = [b"job-%d" % n for n in range(6)]
    assert f"billing read {jobs!r}" in result.stdout, result.stdout
    done = sorted((job, 2 if job == b"job-3" else 1) for job in jobs)
    assert f"workers did {done!r}" in result.stdout, result.stdout


def test_running_a_cluster(zookeeper, chroot, tmp_path):
    """The block runs as printed, except that the test's ZooKeeper stands in for the one the
    package starts, and the ports, data directories and chroot are the test's own: three
    brokers form a cluster and the topic gets ten partitions of three in-sync replicas."""
    from odradek.testing.broker import free_port

    ports = [free_port() for _ in range(3)]
    script = "\n".join(line for line in _block("zookeeper.connect=127.0.0.1:2181").splitlines()
                       if "apt-get install" not in line)
    script = (_with_venv(script).replace("127.0.0.1:2181/odradek", zookeeper.hosts + chroot)
              .replace("127.0.0.1:909$id", "127.0.0.1:${PORTS[$id]}")
              .replace("127.0.0.1:9091", "127.0.0.1:${PORTS[1]}")
              .replace("/tmp/odradek-$id", f"{tmp_path}/odradek-$id"))
    script = f"PORTS=(0 {' '.join(map(str, ports))})\n" + script
    output = tmp_path / "output"
    with output.open("w") as sink:  # a file, not a pipe: the brokers keep it open after the block
        proc = subprocess.Popen(["bash", "-c", script], cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        proc.wait(timeout=120)
    finally:
        _stop_group(proc.pid)
    out = output.read_text()
    rows = _partition_rows(out)
    assert sorted(int(row[1]) for row in rows) == list(range(10)), out
    for _, _, leader, replicas, isr in rows:
        assert leader in replicas.split(",") and len(replicas.split(",")) == 3, out
        assert sorted(isr.split(",")) == sorted(replicas.split(",")), out


def _stop_group(pgid: int, timeout: float = 60.0) -> None:
    """SIGTERM every process of the group (the brokers the block left running), then wait
    for them; SIGKILL what is left after ``timeout``."""
    import time

    try:
        os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            os.killpg(pgid, 0)
            time.sleep(0.2)
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_mirroring_between_clusters(tmp_path):
    """The mirror command as printed, between two test brokers in place of 9092 and 9192: it
    creates the matching topics on the target, copies their records, and Ctrl-C ends it with
    the summary."""
    import time

    from odradek.client import AdminClient, NewTopic, Producer

    with InProcessBroker(tmp_path / "source") as source, InProcessBroker(tmp_path / "target") as target:
        with AdminClient(source.bootstrap) as admin:
            admin.create_topics([NewTopic("orders", 2, 1), NewTopic("payments-eu", 1, 1), NewTopic("other", 1, 1)])
        with Producer(source.bootstrap) as producer:
            for topic, count in (("orders", 5), ("payments-eu", 3), ("other", 1)):
                for i in range(count):
                    producer.send(topic, f"{topic}-{i}".encode())
        lines = [line for line in _block("odradek mirror --source").splitlines() if not line.startswith("#")]
        command = (_with_venv("\n".join(lines)).replace(DEFAULT_BOOTSTRAP, source.bootstrap)
                   .replace("127.0.0.1:9192", target.bootstrap))
        proc = subprocess.Popen(["bash", "-c", "exec " + command], cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            deadline = time.monotonic() + 60
            with AdminClient(target.bootstrap) as admin:
                while sum(o.offset for o in admin.list_group_offsets("dc1-to-dc2").values()) < 8:
                    assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
                    time.sleep(0.2)
                assert sorted(admin.list_topics()) == ["orders", "payments-eu"]
            os.killpg(proc.pid, signal.SIGINT)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, out + err
    assert f"Mirrored 8 records from {source.bootstrap} to {target.bootstrap} (group dc1-to-dc2 on the target)" in out
    assert re.search(r"^orders\s+2\s+5\s+5\s+5\s+0\s*$", out, re.M), out


# Tests that start a ZooKeeper of their own (the others get the session's, skipped without it).
needs_zookeeper = pytest.mark.skipif(not zookeeper_installed() and not os.environ.get("CI"),
                                     reason="ZooKeeper is not installed (scripts/setup.sh)")


def _commands(block: str) -> list[str]:
    """The block's commands: continuation lines joined, comment lines left out."""
    joined = block.replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def _sh(command: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """One README command through bash, with the venv's odradek; output as text."""
    return subprocess.run(["bash", "-euo", "pipefail", "-c", _with_venv(command)], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


@needs_zookeeper
def test_one_command_cluster(tmp_path):
    """``odradek cluster`` as printed, in a temporary data directory and on free ports
    (``--port 0``): it prints the table of its ZooKeeper and brokers 1-3 and the bootstrap list,
    the brokers form one cluster, and Ctrl-C stops everything cleanly."""
    import threading

    from odradek.client import AdminClient

    (line,) = _commands(_block("odradek cluster --brokers 3"))
    command = _with_venv(line).replace("data/cluster", str(tmp_path / "cluster")).replace("--port 9092", "--port 0")
    proc = subprocess.Popen(["bash", "-c", "exec " + command], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    timer = threading.Timer(120, os.killpg, (proc.pid, signal.SIGKILL))
    timer.start()
    try:
        lines = []
        for output_line in proc.stdout:
            lines.append(output_line)
            if "Ctrl-C stops the cluster" in output_line:
                break
        out = "".join(lines)
        assert re.search(r"^\s*ZooKeeper\s+127\.0\.0\.1:\d+", out, re.M), out
        assert all(re.search(rf"^\s*broker {i}( \(controller\))?\s+127\.0\.0\.1:\d+", out, re.M) for i in (1, 2, 3)), out
        bootstrap = re.search(r"--bootstrap-server (\S+)", out).group(1)
        with AdminClient(bootstrap) as admin:
            assert sorted(b.node_id for b in admin.describe_cluster().brokers) == [1, 2, 3]
        os.killpg(proc.pid, signal.SIGINT)
        rest, _ = proc.communicate(timeout=90)
    finally:
        timer.cancel()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, out + rest
    assert "odradek cluster: stopped" in rest, rest
    assert {p.name for p in (tmp_path / "cluster").iterdir()} == {"zookeeper", "broker-1", "broker-2", "broker-3"}


def _rack_broker_overrides() -> dict[str, str]:
    """The ``--override`` settings of the rack block's ``odradek broker`` line (its ``...``
    stands for the broker's other settings: listeners, log.dirs, zookeeper.connect)."""
    import shlex

    words = shlex.split(_commands(_block("broker.rack=eu-1a"))[0])
    assert words[:2] == [".venv/bin/odradek", "broker"] and words[-1] == "...", words
    pairs = [words[i + 1] for i, word in enumerate(words) if word == "--override"]
    return dict(pair.split("=", 1) for pair in pairs)


@pytest.fixture(scope="module")
def readme_cluster(zookeeper, tmp_path_factory):
    """The cluster the README's cluster blocks speak of, shared by their tests: brokers 1-4
    (``--broker-list 2,3,4`` moves partitions to broker 4) on the session's ZooKeeper, broker 1
    started with the rack block's ``odradek broker`` overrides (so it alone has a rack), the
    others as ``odradek cluster`` starts them; QUICK_PROPS, and no automatic preferred-leader
    rebalance (the leader-election test moves leaders itself). ``topicA`` as the cluster
    block creates it (10 partitions of 3 replicas, min.insync.replicas=2), placed round-robin
    over brokers 1-4 (an explicit assignment, since only some brokers have a rack), with a
    record in every partition."""
    import uuid

    from odradek.client import AdminClient, NewTopic, Producer
    from odradek.testing.local_cluster import QUICK_PROPS, LocalCluster

    props = {**QUICK_PROPS, "auto.leader.rebalance.enable": "false"}
    cluster = LocalCluster(tmp_path_factory.mktemp("readme-cluster"), 4, props=props, zookeeper=zookeeper,
                           chroot=f"/readme-{uuid.uuid4().hex[:12]}")
    cluster[1].props.update(_rack_broker_overrides())
    try:
        cluster.start()
        assignment = {p: [(p + i) % 4 + 1 for i in range(3)] for p in range(10)}
        with AdminClient(cluster.bootstrap) as admin:
            admin.create_topics([NewTopic("topicA", replica_assignment=assignment,
                                          configs={"min.insync.replicas": "2"})])
        with Producer(cluster.bootstrap, acks="all") as producer:
            for future in [producer.send("topicA", f"record-{p}".encode(), partition=p) for p in range(10)]:
                future.result(60)
        yield cluster
    finally:
        cluster.close()


def _cluster_env(cluster) -> dict[str, str]:
    """The README's cluster commands name broker 1 with --bootstrap-server, as Kafka's tools
    need; odradek's fallback variable points where nothing listens, so that a command
    printed without the flag fails here instead of finding the test cluster."""
    return {"ODRADEK_BOOTSTRAP_SERVER": "127.0.0.1:1"}


def _on_cluster(command: str, cluster) -> str:
    """The README's broker 1 (127.0.0.1:9091) is the test cluster's broker 1."""
    return command.replace("127.0.0.1:9091", cluster[1].bootstrap)


def _assignments(cluster) -> dict[str, dict[int, list[int]]]:
    """Every topic's replica assignment, as ZooKeeper holds it."""
    return {topic: {int(p): r for p, r in cluster.read_json(f"/brokers/topics/{topic}")["partitions"].items()}
            for topic in cluster.zk.get_children("/brokers/topics")}


def _listed(text: str) -> set[str]:
    """The ``topic-partition`` names a leader-election line lists."""
    return {name.strip() for name in text.split(" for partitions ", 1)[1].split(",")}


def test_leader_elections_and_replication_reports(readme_cluster, tmp_path):
    """The block's commands after a broker's controlled shutdown and restart: the reports
    line lists the partitions it held while it is down; once it is back in every ISR, the
    PREFERRED election gives it back the partitions it prefers to lead (and only those), the
    UNCLEAN one finds topicA-7 led already, and the reports list nothing."""
    from odradek.testing.local_cluster import wait_until

    cluster, env = readme_cluster, _cluster_env(readme_cluster)
    preferred, unclean, reports = (_on_cluster(c, cluster) for c in _commands(_block("odradek leader-election")))
    topic_a = _assignments(cluster)["topicA"]
    broker = next(b for b in (2, 3, 4) if any(r[0] == b for r in topic_a.values()))
    held = {f"topicA-{p}" for p, r in topic_a.items() if broker in r}

    assert cluster.terminate(broker) == 0

    def reported() -> list[list[str]] | None:
        rows = _report_rows(_sh(reports, tmp_path, env))
        return rows if {f"{topic}-{p}" for topic, p, *_ in rows if topic == "topicA"} == held else None

    rows = wait_until(reported, 60, f"the reports to list the partitions of stopped broker {broker}")
    assert all(str(broker) not in isr.split(",") for topic, _, _, _, isr, *_ in rows if topic == "topicA"), rows

    cluster.restart(broker)
    everything = _assignments(cluster)
    wait_until(lambda: all(sorted(cluster.partition_state(t, p)["isr"]) == sorted(r)
                           for t, parts in everything.items() for p, r in parts.items()),
               60, f"broker {broker} back in every ISR")
    expected = {f"{t}-{p}" for t, parts in everything.items() for p, r in parts.items() if cluster.leader(t, p) != r[0]}
    assert {f"topicA-{p}" for p, r in topic_a.items() if r[0] == broker} <= expected

    result = _sh(preferred, tmp_path, env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("Successfully completed leader election (PREFERRED) for partitions ")
    assert _listed(result.stdout.splitlines()[0]) == expected, result.stdout
    assert all(cluster.leader("topicA", p) == r[0] for p, r in topic_a.items())

    result = _sh(unclean, tmp_path, env)
    assert (result.returncode, result.stdout) == (0, "Valid replica already elected for partitions topicA-7\n"), \
        result.stdout + result.stderr
    assert _report_rows(_sh(reports, tmp_path, env)) == []


def _report_rows(result: subprocess.CompletedProcess) -> list[list[str]]:
    """The partition rows of a successful ``topics --describe`` report (``_partition_rows``)."""
    assert result.returncode == 0, result.stdout + result.stderr
    return _partition_rows(result.stdout)


_PARTITION_LINE = re.compile(r"^\s*Topic: (\S+)\s+Partition: (\d+)\s+Leader: (\S+)\s+Replicas: (\S+)\s+Isr: (\S*)")


def _partition_rows(text: str) -> list[list[str]]:
    """[topic, partition, leader, replicas, ISR] of each partition line of ``topics --describe``
    piped: kafka-topics.sh's format, a tab-led ``Topic: t<TAB>Partition: 0<TAB>Leader: 1<TAB>
    Replicas: 1,2,3<TAB>Isr: 1,2<TAB>...`` line per partition."""
    return [list(m.groups()) for m in map(_PARTITION_LINE.match, text.splitlines()) if m]


def test_moving_partitions(readme_cluster, tmp_path):
    """The block's commands in order, with the proposal that --generate prints saved as
    plan.json (the step the reader does between them): topicA moves onto brokers 2, 3 and 4
    under a throttle, --verify reports every move completed and clears the throttles, and
    --list finds nothing left moving."""
    import json

    from odradek.testing.local_cluster import wait_until

    cluster, env = readme_cluster, _cluster_env(readme_cluster)
    echo, generate, execute, verify, listing = (_on_cluster(c, cluster)
                                                for c in _commands(_block("odradek reassign-partitions")))
    assert _sh(echo, tmp_path, env).returncode == 0
    result = _sh(generate, tmp_path, env)
    assert result.returncode == 0, result.stdout + result.stderr
    current = json.loads(result.stdout.split("Current partition replica assignment\n", 1)[1].splitlines()[0])
    assert {p["partition"]: p["replicas"] for p in current["partitions"]} == _assignments(cluster)["topicA"]
    proposed = result.stdout.split("Proposed partition reassignment configuration\n", 1)[1].splitlines()[0]
    plan = {p["partition"]: p["replicas"] for p in json.loads(proposed)["partitions"]}
    assert sorted(plan) == list(range(10)) and all(sorted(r) == [2, 3, 4] for r in plan.values()), proposed
    (tmp_path / "plan.json").write_text(proposed)

    result = _sh(execute, tmp_path, env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "The inter-broker throttle limit was set to 10000000 B/s" in result.stdout
    assert "Successfully started partition reassignments for " + ",".join(f"topicA-{p}" for p in range(10)) \
        in result.stdout

    def verified() -> str | None:
        result = _sh(verify, tmp_path, env)
        assert result.returncode == 0, result.stdout + result.stderr
        done = all(f"Reassignment of partition topicA-{p} is completed." in result.stdout for p in range(10))
        return result.stdout if done else None

    out = wait_until(verified, 60, "every move of topicA to complete", interval=0.5)
    assert "Clearing broker-level throttles on brokers 1,2,3,4" in out and "Clearing topic-level throttles on topic topicA" in out
    result = _sh(listing, tmp_path, env)
    assert (result.returncode, result.stdout) == (0, "No partition reassignments found.\n"), result.stdout + result.stderr
    assert _assignments(cluster)["topicA"] == plan


def test_racks(readme_cluster, tmp_path):
    """Broker 1 of the shared cluster runs with the block's ``odradek broker`` overrides
    (see `readme_cluster`): it registers rack eu-1a and is the only broker with a rack, so the
    block's creation needs its --disable-rack-aware, and with it gets 6 partitions of 3 replicas."""
    from odradek.client import AdminClient

    cluster, env = readme_cluster, _cluster_env(readme_cluster)
    assert {b: cluster.read_json(f"/brokers/ids/{b}").get("rack") for b in (1, 2, 3, 4)} == \
        {1: "eu-1a", 2: None, 3: None, 4: None}
    create = _on_cluster(_commands(_block("broker.rack=eu-1a"))[1], cluster)
    refused = _sh(create.replace(" --disable-rack-aware", ""), tmp_path, env)
    assert refused.returncode != 0 and "Not all brokers have rack information" in refused.stdout + refused.stderr, \
        refused.stdout + refused.stderr
    result = _sh(create, tmp_path, env)
    assert result.returncode == 0, result.stdout + result.stderr
    with AdminClient(cluster.bootstrap) as admin:
        partitions = admin.describe_topics(["t"])["t"].partitions
    assert sorted(p.partition for p in partitions) == list(range(6))
    assert all(len(set(p.replicas)) == 3 for p in partitions)


def test_log_directories(readme_cluster, tmp_path):
    """The block's command: brokers 1 and 2 each report their one log directory, without an
    error, holding exactly the topicA partitions ZooKeeper assigns them, none empty."""
    import json

    from odradek.testing.local_cluster import wait_until

    cluster, env = readme_cluster, _cluster_env(readme_cluster)
    (command,) = (_on_cluster(c, cluster) for c in _commands(_block("odradek log-dirs --bootstrap-server")))

    def described() -> dict | None:
        result = _sh(command, tmp_path, env)
        assert result.returncode == 0, result.stdout + result.stderr
        first, second, document = result.stdout.splitlines()
        assert (first, second) == ("Querying brokers for log directories information",
                                   "Received log directory information from brokers 1,2")
        doc = json.loads(document)
        topic_a = _assignments(cluster)["topicA"]  # a finished move's old replicas may take a moment to go
        held = {b: {f"topicA-{p}" for p, r in topic_a.items() if b in r} for b in (1, 2)}
        found = {b["broker"]: {p["partition"] for d in b["logDirs"] for p in d["partitions"]} for b in doc["brokers"]}
        return doc if found == held else None

    doc = wait_until(described, 30, "log-dirs to report the assigned partitions of brokers 1 and 2")
    assert doc["version"] == 1 and [b["broker"] for b in doc["brokers"]] == [1, 2]
    for entry in doc["brokers"]:
        (log_dir,) = entry["logDirs"]
        assert log_dir["logDir"] == str(cluster[entry["broker"]].data_dir) and log_dir["error"] is None
        assert all(p["size"] > 0 and p["offsetLag"] == 0 and p["isFuture"] is False for p in log_dir["partitions"])


@needs_zookeeper
def test_the_pytest_fixtures(tmp_path):
    """The block as a test file of a project of its own, run by pytest with odradek installed
    (the plugin comes through its entry point): both tests pass. The ``...`` line becomes what
    its comment says: create the topic, produce with acks=all."""
    block = _block("def test_failover(odradek_cluster)")
    elided = next(line for line in block.splitlines() if line.strip().startswith("..."))
    setup = "\n".join("    " + line for line in (
        "from kafka.admin import KafkaAdminClient, NewTopic",
        "admin = KafkaAdminClient(bootstrap_servers=odradek_cluster.bootstrap)",
        "admin.create_topics([NewTopic('orders', 1, 3)])",
        "admin.close()",
        "producer = KafkaProducer(bootstrap_servers=odradek_cluster.bootstrap, acks='all', retries=10)",
        "producer.send('orders', b'paid').get(60)",
        "producer.close()",
    ))
    (tmp_path / "test_readme_fixtures.py").write_text(block.replace(elided, setup))
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_readme_fixtures.py"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0 and "2 passed" in result.stdout, result.stdout + result.stderr
