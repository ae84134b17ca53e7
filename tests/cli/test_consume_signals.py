"""``odradek consume --group`` stops on SIGTERM or Ctrl-C (SIGINT) even when its broker is gone:
killed (connections refused) or stopped (SIGSTOP: connections open, nothing answers).

The promise is 2 s (``cli/stop_signals.py`` gives its last steps 1.5 s). The tests do not
time it; they check that the process exits at all within 10 s of the signal, which only
the bounded shutdown does (without it the final commit waits for the client's
``request.timeout.ms``, 30 s, and more), with 5 times the promise as room for a loaded
2-core machine, and that it says which step it gave up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from odradek.client import AdminClient, NewTopic, Producer
from odradek.testing.broker import BrokerProcess

EXIT_BOUND_SECONDS = 10


@pytest.mark.parametrize("stop_signal, broker_gone", [(signal.SIGTERM, "killed"), (signal.SIGINT, "stopped")])
def test_a_consumer_in_a_group_exits_soon_after_the_signal_with_its_broker_gone(tmp_path, stop_signal, broker_gone):
    with BrokerProcess(tmp_path / "data") as broker:
        with AdminClient(broker.bootstrap) as admin:
            admin.create_topics([NewTopic("t", 1, 1)])
        with Producer(broker.bootstrap) as producer:
            producer.send("t", b"v0").result(30)
        consumer = subprocess.Popen(
            [sys.executable, "-m", "odradek.cli.main", "consume", "--bootstrap-server", broker.bootstrap,
             "--topic", "t", "--group", "g", "--from-beginning"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert consumer.stdout.readline() == "v0\n"  # in the group, reading
            if broker_gone == "killed":
                broker.kill()
            else:
                os.kill(broker.pid, signal.SIGSTOP)
            consumer.send_signal(stop_signal)
            out, err = consumer.communicate(timeout=EXIT_BOUND_SECONDS)
        finally:
            consumer.kill()
            if broker_gone == "stopped":
                os.kill(broker.pid, signal.SIGCONT)
    assert consumer.returncode == 0, err
    assert err.endswith("Processed a total of 1 messages\n"), err
    # The bounded last step: given up after its 1.5 s, or failed within them.
    assert ("odradek consume: stopped before it could commit its offsets and leave its group" in err
            or "odradek consume: could not commit its offsets and leave its group" in err), err


def test_ctrl_c_while_joining_a_frozen_broker(tmp_path):
    """The signal lands while the consumer waits for its first answer (not between polls):
    it ends the wait at once, and the closing gets the same bounded time."""
    with BrokerProcess(tmp_path / "data") as broker:
        with AdminClient(broker.bootstrap) as admin:
            admin.create_topics([NewTopic("t", 1, 1)])
        os.kill(broker.pid, signal.SIGSTOP)  # the kernel still accepts connections; nothing answers
        consumer = subprocess.Popen(
            [sys.executable, "-m", "odradek.cli.main", "consume", "--bootstrap-server", broker.bootstrap,
             "--topic", "t", "--group", "g"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            port = int(broker.bootstrap.rsplit(":", 1)[1])
            deadline = time.monotonic() + 60
            while not _connected(consumer.pid, port) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert _connected(consumer.pid, port), "the consumer never connected"
            consumer.send_signal(signal.SIGINT)
            out, err = consumer.communicate(timeout=EXIT_BOUND_SECONDS)
        finally:
            consumer.kill()
            os.kill(broker.pid, signal.SIGCONT)
    assert (consumer.returncode, out) == (0, ""), err
    assert err.endswith("Processed a total of 0 messages\n"), err


def _connected(pid: int, port: int) -> bool:
    """Whether process ``pid`` has an established TCP connection to 127.0.0.1:``port`` (its
    client is then past the reachability check, with the signal handlers in place)."""
    try:
        inodes = {os.readlink(f"/proc/{pid}/fd/{fd}")[8:-1] for fd in os.listdir(f"/proc/{pid}/fd")
                  if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:[")}
    except OSError:  # the process ended, or a descriptor closed while listed
        return False
    with open("/proc/net/tcp") as table:
        rows = [line.split() for line in table.readlines()[1:]]
    # local, remote (hex address:port), state (01 ESTABLISHED), ..., inode (10th field)
    return any(int(r[2].split(":")[1], 16) == port and r[3] == "01" and r[9] in inodes for r in rows)
