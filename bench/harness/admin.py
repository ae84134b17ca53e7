"""Topic set-up for a run, through confluent-kafka's AdminClient (the same for both brokers).

Every workload writes to topics of its own, created here with an explicit partition count
(auto-creation differs between brokers: Tansu makes four partitions, odradek
``num.partitions``). ``create_topic`` returns once Metadata shows a leader for every partition.
"""

from __future__ import annotations

import time

from confluent_kafka.admin import AdminClient, NewTopic


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 120000,
                        "log_level": 0})


def create_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 300.0,
                 configs: dict[str, str] | None = None) -> float:
    """Create ``topic``; return the seconds until every partition had a leader."""
    admin = _admin(bootstrap)
    begin = time.perf_counter()
    futures = admin.create_topics([NewTopic(topic, partitions, 1, config=configs or {})],
                                  request_timeout=timeout, operation_timeout=timeout)
    futures[topic].result(timeout)
    wait_for_leaders(admin, topic, partitions, begin + timeout)
    return time.perf_counter() - begin


def wait_for_leaders(admin: AdminClient, topic: str, partitions: int, deadline: float) -> None:
    while True:
        md = admin.list_topics(topic, timeout=60)
        t = md.topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions and all(
                p.leader >= 0 for p in t.partitions.values()):
            return
        if time.perf_counter() > deadline:
            raise TimeoutError(f"{topic}: not all {partitions} partitions have a leader")
        time.sleep(0.05)


def delete_topic(bootstrap: str, topic: str, timeout: float = 60.0) -> None:
    """Delete ``topic`` (used on Tansu, whose memory engine would otherwise keep every byte)."""
    futures = _admin(bootstrap).delete_topics([topic], request_timeout=timeout,
                                              operation_timeout=timeout)
    futures[topic].result(timeout)
