"""``odradek mirror`` as a child process between two brokers: killed with kill -9 while a
producer streams into the source, started again, and in the end the target holds every
source record exactly once (read_committed), with the lag logged and a summary on Ctrl-C.
Bad arguments are refused before anything starts."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time

import pytest

from odradek.client import AdminClient, NewTopic
from odradek.testing.broker import InProcessBroker
from tests.cli.conftest import run_cli
from tests.mirror.mirror_harness import (
    WAIT_S,
    LiveProducer,
    committed_positions,
    end_offsets,
    expected_partitions,
    read_partitions,
    wait_caught_up,
)

pytestmark = pytest.mark.timeout(180)

PARTITIONS = 3
TOPIC = "clicks"
GROUP = "cli-mirror"
_LIBC = ctypes.CDLL(None, use_errno=True)


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    root = tmp_path_factory.mktemp("mirror-cmd")
    with InProcessBroker(root / "source") as source, InProcessBroker(root / "target") as target:
        yield source, target


class MirrorCommand:
    """``odradek mirror ...`` in a child process (killed by the kernel if this test dies);
    its log (stderr) goes to a file."""

    def __init__(self, args: list[str], log_path) -> None:
        self.log_path = log_path
        self.log = open(log_path, "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "odradek.cli.main", "mirror", *args],
                                     stdout=subprocess.PIPE, stderr=self.log, text=True,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"},
                                     preexec_fn=lambda: _LIBC.prctl(1, signal.SIGKILL, 0, 0, 0))

    def check_running(self) -> None:
        assert self.proc.poll() is None, f"odradek mirror exited:\n{self.log_path.read_text()}"

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.log.close()

    def interrupt(self) -> tuple[int, str]:
        """Ctrl-C: the exit status and the standard output (the summary)."""
        self.proc.send_signal(signal.SIGINT)
        out, _ = self.proc.communicate(timeout=WAIT_S)
        self.log.close()
        return self.proc.returncode, out


def test_mirror_survives_kill_9_and_copies_every_record_once(clusters, tmp_path):
    source, target = clusters
    with AdminClient(source.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1, configs={"retention.ms": "604800000"})])
    args = ["--source", source.bootstrap, "--target", target.bootstrap, "--topics", "cl.*",
            "--group-id", GROUP, "--reporting-interval", "200",
            "--refresh-topics-interval-seconds", "1"]
    log = tmp_path / "mirror.log"

    # The first run's transactions last a second: the kill lands inside one.
    # The stream starts once the mirror reads and keeps growing until the kill, so a
    # transaction that commits is followed by one holding records however slow the machine.
    first = MirrorCommand([*args, "--commit-interval-ms", "1000"], log)
    _wait_for(lambda: "source partitions:" in log.read_text(), first.check_running)
    live = LiveProducer(source.bootstrap, TOPIC, 0, 4000, PARTITIONS, burst=20)
    live.start()
    # kill -9 once a transaction has committed and the next one holds records on the target.
    _wait_for(lambda: _open_transaction_after_a_commit(target.bootstrap), first.check_running)
    first.kill()
    written = live.stop()
    before = sum(committed_positions(target.bootstrap, GROUP).values())

    second = MirrorCommand([*args, "--commit-interval-ms", "100"], log)
    live = LiveProducer(source.bootstrap, TOPIC, written, 4000, PARTITIONS, burst=50)
    live.start()
    live.finish()
    ends = wait_caught_up(source.bootstrap, target.bootstrap, [TOPIC], GROUP, check=second.check_running)
    code, out = second.interrupt()

    assert code == 0, log.read_text()
    assert read_partitions(target.bootstrap, TOPIC) == expected_partitions(0, 4000, PARTITIONS)
    # The killed run's open transaction is in the target's logs, aborted: invisible to read_committed.
    uncommitted = read_partitions(target.bootstrap, TOPIC, "read_uncommitted")
    assert sum(map(len, uncommitted.values())) > 4000
    assert read_partitions(target.bootstrap, TOPIC) == read_partitions(source.bootstrap, TOPIC)
    # The summary of the second run: what it copied is what the first had not committed.
    end = sum(ends.values())
    assert f"Mirrored {4000 - before} records from {source.bootstrap} to {target.bootstrap}" in out
    row = next(line.split() for line in out.splitlines() if line.startswith(TOPIC))
    assert row == [TOPIC, str(PARTITIONS), str(4000 - before), str(end), str(end), "0"]
    logged = log.read_text()
    assert "from positions committed on the target" in logged
    assert f"mirror lag: {TOPIC}: " in logged and "(lag 0)" in logged
    assert "Traceback" not in logged


@pytest.mark.parametrize("args, message", [
    (["--source", "127.0.0.1:1"], "Missing required option(s): --target, --topics"),
    (["--source", "a:1", "--target", "b:1", "--topics", "x["], "--topics: invalid topic pattern"),
    (["--source", "a:1", "--target", "b:1", "--topics", "x", "--commit-interval-ms", "0"],
     "--commit-interval-ms must be positive"),
    (["--source", "a:1", "--target", "b:1", "--topics", "x", "--replication-factor", "0"],
     "--replication-factor must be positive"),
    (["--source", "127.0.0.1:1", "--target", "b:1", "--topics", "x"], "cannot connect to 127.0.0.1:1"),
    (["--source", "a:1", "--target", "b:1", "--topics", "x", "--log-level", "LOUD"], "--log-level: unknown level"),
])
def test_bad_arguments_are_refused(args, message):
    result = run_cli("mirror", *args)
    assert result.code == 1 and message in result.err and "Traceback" not in result.err


def test_a_mirror_from_a_cluster_into_itself_is_refused_in_one_line(clusters):
    source, _ = clusters
    result = run_cli("mirror", "--source", source.bootstrap, "--target", source.bootstrap, "--topics", ".*",
                     "--no-progress")
    assert result.code == 1 and "Traceback" not in result.err
    assert len(result.err.strip().splitlines()) == 1
    assert "the source and the target are the same cluster (cluster id " in result.err


def test_client_settings_the_mirror_owns_are_refused(tmp_path):
    config = tmp_path / "consumer.properties"
    config.write_text("bootstrap.servers=127.0.0.1:1\nisolation.level=read_uncommitted\n")
    result = run_cli("mirror", "--consumer.config", str(config), "--target", "b:1", "--topics", "x")
    assert result.code == 1
    assert "consumer property isolation.level cannot be set" in result.err
    config.write_text("transactional.id=mine\n")
    result = run_cli("mirror", "--source", "a:1", "--target", "b:1", "--topics", "x", "--producer.config", str(config))
    assert result.code == 1 and "producer property transactional.id cannot be set" in result.err
    config.write_text("no.such.setting=1\n")
    result = run_cli("mirror", "--source", "a:1", "--target", "b:1", "--topics", "x", "--producer.config", str(config))
    assert result.code == 1 and "unknown producer property 'no.such.setting'" in result.err


def _open_transaction_after_a_commit(target: str) -> bool:
    """Whether the mirror committed positions and has records in an open transaction now (a
    partition's high watermark beyond its last stable offset)."""
    if not committed_positions(target, GROUP):
        return False
    stable = end_offsets(target, [TOPIC], "read_committed")
    return any(end > stable[tp] for tp, end in end_offsets(target, [TOPIC], "read_uncommitted").items())


def _wait_for(condition, check) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        check()
        assert time.monotonic() < deadline, "condition not met"
        time.sleep(0.05)
