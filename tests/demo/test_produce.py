"""The demo's event clock: a rerun's stream starts where the last one ended, and no event is
stamped in the future."""

from __future__ import annotations

import json
import time

import pytest
from rich.console import Console

from odradek.client import AdminClient, Consumer, NewTopic, TopicPartition
from odradek.demo.activity import JITTER_MS, LATE_MS, PAGE_VIEWS, SEARCHES, ActivityGenerator
from odradek.demo.pipeline import stream_time
from odradek.demo.produce import produce
from odradek.testing.broker import InProcessBroker


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory):
    with InProcessBroker(tmp_path_factory.mktemp("demo") / "data") as broker:
        with AdminClient(broker.bootstrap) as admin:
            admin.create_topics([NewTopic(PAGE_VIEWS, 2, 1), NewTopic(SEARCHES, 2, 1)])
        yield broker.bootstrap


PARTITIONS = [TopicPartition(t, p) for t in (PAGE_VIEWS, SEARCHES) for p in range(2)]


def _ends(bootstrap: str) -> dict:
    with AdminClient(bootstrap) as admin:
        return {tp: o.offset for tp, o in admin.list_offsets({tp: -1 for tp in PARTITIONS}).items()}


def _timestamps(bootstrap: str, starts: dict) -> list[int]:
    """The event times of the records from ``starts`` on."""
    with Consumer(bootstrap, consumer_timeout_ms=1000) as consumer:
        consumer.assign(PARTITIONS)
        for tp, offset in starts.items():
            consumer.seek(tp, offset)
        return [json.loads(r.value)["ts"] for r in consumer]


def test_a_rerun_continues_the_stream_and_nothing_is_in_the_future(bootstrap):
    quiet = Console(file=open("/dev/null", "w"))
    span = 30 * 60_000  # the events of each run spread over the last half hour...
    first = produce(bootstrap, ActivityGenerator(50, seed=1), 2000, console=quiet, span_ms=span)
    after = stream_time(bootstrap, 2)
    ends = _ends(bootstrap)
    # The newest timestamp is the last transaction's commit marker, stamped when it committed.
    assert first.last_ts <= after <= int(time.time() * 1000)
    before_second = int(time.time() * 1000)
    # ... but the second run's start no earlier than where the first one's events ended:
    # else most of them would fall behind a streaming job's watermark (which follows the
    # newest event time) and be dropped as late.
    second = produce(bootstrap, ActivityGenerator(50, seed=2), 2000, console=quiet, span_ms=span,
                     not_before_ms=after)
    assert first.last_ts <= before_second and second.last_ts <= int(time.time() * 1000)
    new = _timestamps(bootstrap, ends)
    assert len(new) == 2000
    # All after the first run's (less the arrival jitter), but the few made very late on purpose.
    on_time = [ts for ts in new if ts >= after - JITTER_MS]
    very_late = [ts for ts in new if after - LATE_MS - 60_000 <= ts < after - LATE_MS]
    assert len(on_time) + len(very_late) == 2000 and len(very_late) <= 20
