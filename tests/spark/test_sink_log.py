"""The sinks' log: a query's newest state is found from the end backwards, however far back."""

from __future__ import annotations

import uuid

from odradek.client import Producer
from odradek.spark import sink_log
from odradek.spark.sink_log import Decision, SinkLog, SinkState


def test_newest_state_found_near_and_far_from_the_end(bootstrap, monkeypatch):
    monkeypatch.setattr(sink_log, "TAIL", 4)
    log = SinkLog(bootstrap, f"_commits-{uuid.uuid4().hex[:8]}")
    assert log.read_decision("q") is None and log.read("q") == SinkState()
    log.write_decision("q", Decision(1, (("t/1/0", 5, 0),), done=False))
    log.write_decision("q", Decision(2, (("t/2/0", 5, 1),), done=True))
    log.write("q", SinkState(7))
    with Producer(bootstrap, acks="all") as producer:  # 100 records of other queries after them
        for i in range(100):
            producer.send(log.topic, b"{}", key=b"other-%d" % (i % 3), partition=0)
        producer.flush()
    assert log.read_decision("q") == Decision(2, (("t/2/0", 5, 1),), done=True)  # windows 4, 32, 256
    assert log.read("q") == SinkState(7)
    log.write_decision("q", Decision(3))
    assert log.read_decision("q") == Decision(3)  # in the first window
    assert log.read_decision("never") is None
