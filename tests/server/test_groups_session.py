"""A member that dies without LeaveGroup (kill -9 of its process) is removed when its session
times out, and its partitions go to the members still alive."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import threading

from odradek.testing.broker import InProcessBroker
from tests.server.group_clients import (
    ConsumerThread,
    confluent_adapter,
    create_topic,
    wait_for,
)

CHILD = textwrap.dedent("""
    import json, sys
    from kafka import KafkaConsumer
    c = KafkaConsumer(bootstrap_servers=sys.argv[1], group_id=sys.argv[2], session_timeout_ms=1500,
                      heartbeat_interval_ms=200, request_timeout_ms=10000, auto_offset_reset="earliest")
    while not c.partitions_for_topic(sys.argv[3]):
        pass
    c.subscribe([sys.argv[3]])
    last = None
    while True:
        c.poll(500)
        now = sorted(tp.partition for tp in c.assignment())
        if now != last:
            print(json.dumps(now), flush=True)
            last = now
""")


def test_dead_member_is_replaced_after_its_session_timeout(tmp_path):
    with InProcessBroker(tmp_path / "data", group_min_session_timeout_ms=500) as broker:
        create_topic(broker.bootstrap, "mortal", 4)
        child = subprocess.Popen([sys.executable, "-c", CHILD, broker.bootstrap, "mortals", "mortal"],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        child_assignment: list[str] = []
        reader = threading.Thread(target=lambda: child_assignment.extend(child.stdout), daemon=True)
        reader.start()
        survivor = ConsumerThread(confluent_adapter(broker.bootstrap, "mortals", "mortal", **{
            "session.timeout.ms": 1500, "heartbeat.interval.ms": 200}))
        survivor.start()
        try:
            wait_for(lambda: len(survivor.assignment) == 2 and child_assignment
                     and len(json.loads(child_assignment[-1])) == 2, timeout=60)
            child.send_signal(signal.SIGKILL)  # no LeaveGroup, no goodbye
            child.wait(30)
            wait_for(lambda: survivor.assignment == [0, 1, 2, 3], timeout=60)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(30)
            survivor.stop()
