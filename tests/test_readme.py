"""Every code block of README.md runs as printed (against a test broker, not 127.0.0.1:9092).

Each fenced block is claimed by exactly one test below, which says how it is run; a block no
test claims fails ``test_every_block_is_run``, so a new example cannot go untested.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

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
    "from odradek.client import": "test_client_and_command_line",
    "odradek mirror --source": "test_mirroring_between_clusters",
}


def test_every_block_is_run():
    for language, text in BLOCKS:
        claimed = [marker for marker in CLAIMS if marker in text]
        assert len(claimed) == 1, f"README block ({language}) is run by no test, or by several:\n{text}"


def _with_venv(command: str) -> str:
    return command.replace(".venv/bin/", f"{VENV_BIN}/")


def test_the_two_commands():
    """The block names the two scripts; running them here would run this suite inside itself,
    so the test checks that they exist and that CI runs exactly the test command."""
    lines = [line.split("#")[0].strip() for line in _block("./scripts/demo.sh").splitlines()]
    commands = [line for line in lines if line]
    assert commands == ["./scripts/demo.sh", "./scripts/test.sh"]
    for command in commands:
        assert os.access(ROOT / command, os.X_OK), f"{command} is not executable"
    assert "exec ./scripts/test.sh" in (ROOT / ".ci" / "run").read_text()


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


def test_client_and_command_line(tmp_path):
    """The shell block, then the Python block, as printed, against a fresh broker: the topic
    the shell block creates is the one the Python block reads."""
    with InProcessBroker(tmp_path / "data") as broker:
        shell = _with_venv(_block("B=127.0.0.1:9092")).replace(DEFAULT_BOOTSTRAP, broker.bootstrap)
        result = subprocess.run(["bash", "-euo", "pipefail", "-c", shell], cwd=ROOT, capture_output=True,
                                text=True, timeout=240)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "k1\thello" in result.stdout and "k2\tworld" in result.stdout
        assert "records sent" in result.stdout
        assert re.search(r"analytics\s+events\s+\d\s+\d+\s+\d+\s+\d+", result.stdout)  # the lag table

        script = tmp_path / "example.py"
        script.write_text(_block("from odradek.client import").replace(DEFAULT_BOOTSTRAP, broker.bootstrap))
        result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                                timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "b'page-view'" in result.stdout and "b'search'" in result.stdout


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
    rows = [line.split() for line in out.splitlines() if line.split() and line.split()[0].isdigit()]
    assert sorted(int(row[0]) for row in rows) == list(range(10)), out
    for _, leader, replicas, isr, *_ in rows:
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
