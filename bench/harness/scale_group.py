"""The consumer side of ``bench/bench_scale.py``: many confluent-kafka consumers of one group in
this process, polled round-robin by a few threads, each thread counting what its consumers got.

A group is **settled** when every partition is owned by exactly one member and
``min(members, partitions)`` members own some (`Group.settled`, from each consumer's
``assignment()``).

``bench_scale.py`` runs the group in a child process (``python -m bench.harness.scale_group
SPEC``, `main`), so that its polling threads do not take the GIL from the producer it measures
beside them.
"""

from __future__ import annotations

import json
import sys
import threading
import time

from confluent_kafka import Consumer


class Group:
    """``members`` consumers of one group subscribed to every topic, polled round-robin by
    ``threads`` threads (``consume(timeout=0)``, which also runs the group protocol), each
    counting what it got; `assignments` reads each member's assignment."""

    def __init__(self, bootstrap: str, topics: list[str], members: int, threads: int, protocol: str) -> None:
        config = {"bootstrap.servers": bootstrap, "group.id": "scale", "auto.offset.reset": "latest",
                  "enable.auto.commit": True, "fetch.wait.max.ms": 500, "queued.max.messages.kbytes": 1024,
                  "session.timeout.ms": 30000, "socket.keepalive.enable": True}
        if protocol == "consumer":
            config["group.protocol"] = "consumer"
        else:
            config["partition.assignment.strategy"] = "roundrobin"
        self.consumers = []
        for _ in range(members):
            consumer = Consumer(config)
            consumer.subscribe(topics)
            self.consumers.append(consumer)
        self.counts = [0] * threads
        self.last_at = 0.0
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self._poll, args=(i, self.consumers[i::threads]), daemon=True)
                        for i in range(threads)]
        for thread in self.threads:
            thread.start()

    def _poll(self, index: int, consumers: list) -> None:
        while not self.stopping.is_set():
            got = 0
            for consumer in consumers:
                got += sum(1 for m in consumer.consume(1000, timeout=0) if m.error() is None)
            if got:
                self.counts[index] += got
                self.last_at = time.monotonic()
            else:
                time.sleep(0.005)
        for consumer in consumers:
            consumer.close()

    @property
    def consumed(self) -> int:
        return sum(self.counts)

    def settled(self, partitions: int) -> bool:
        """Every partition owned by exactly one member; ``min(members, partitions)`` own some."""
        owned = [c.assignment() for c in self.consumers]
        taken = [(tp.topic, tp.partition) for a in owned for tp in a]
        return (len(taken) == partitions and len(set(taken)) == partitions
                and sum(1 for a in owned if a) == min(len(self.consumers), partitions))

    def close(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(120)



# -- the group as a child process of bench_scale.py -------------------------------------------


def _emit(**fields) -> None:
    print(json.dumps(fields), flush=True)


def main(spec: dict) -> None:
    """Form the group (``{"rebalance_s": s}`` once settled, timed from the first consumer's
    creation), then ``{"consumed": n, "last_at": t}`` every 0.2 s (``t`` on CLOCK_MONOTONIC,
    which every process of the machine shares) until stdin closes; then close every consumer
    and say ``{"closed_s": s}``."""
    begin = time.monotonic()
    group = Group(spec["bootstrap"], spec["topics"], spec["members"], spec["threads"], spec["protocol"])
    try:
        deadline = begin + spec["timeout_s"]
        while not group.settled(spec["partitions"]):
            if time.monotonic() > deadline:
                _emit(error=f"the group did not settle within {spec['timeout_s']:.0f} s")
                return
            time.sleep(0.25)
        _emit(rebalance_s=time.monotonic() - begin)
        stdin_closed = threading.Event()
        threading.Thread(target=lambda: (sys.stdin.read(), stdin_closed.set()), daemon=True).start()
        while not stdin_closed.wait(0.2):
            _emit(consumed=group.consumed, last_at=group.last_at)
    finally:
        closing = time.monotonic()
        group.close()
        _emit(closed_s=time.monotonic() - closing)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
