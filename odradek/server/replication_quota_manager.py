"""Replication throttles: Kafka's ``ReplicationQuotaManager`` (KIP-73), which keeps a partition
reassignment from starving clients of bandwidth.

A broker has two (`ReplicationQuotas`):

* ``leader``: the bytes it sends, as leader, to followers fetching throttled replicas; bound
  ``leader.replication.throttled.rate``, replicas named by the topic config
  ``leader.replication.throttled.replicas``;
* ``follower``: the bytes it fetches, as follower, for throttled replicas; bound
  ``follower.replication.throttled.rate``, replicas named by
  ``follower.replication.throttled.replicas``.

The rates are dynamic broker configs (``Long.MAX_VALUE`` bytes/s, no throttle, by default);
the replica lists are topic configs: ``*`` (every replica of the topic) or
``partition:broker`` pairs, ``0:101,0:102,1:101``, of which a broker takes the partitions
listed with its own id (Kafka's ``TopicConfigHandler.parseThrottledPartitions``). Both are read
where they live now (the broker's effective config, the metadata image's topic configs), so a
change anywhere in the cluster applies on the next check.

Where they act (as Kafka's ``ReplicaFetcherThread.shouldFollowerThrottle`` and
``ReplicaManager.shouldLeaderThrottle``): a replica that is not in sync, of a throttled
partition, while the quota is exceeded, is left out of the follower's Fetch, and the leader
answers it with no records. Replicas in sync are never held back, but their bytes count.

The rate is Kafka's ``SimpleRate`` over ``replication.quota.window.num`` samples of
``replication.quota.window.size.seconds`` each: the bytes recorded in the samples kept, divided
by the time since the oldest of them began (one window at least). Worked example, 1 s windows,
bound 1000 B/s: 3000 bytes recorded at t=0 give 3000 B/s at t=0.5 (one window), exceeded;
1500 B/s at t=2; 1000 B/s at t=3, no longer exceeded: `delay` at t=0 says 3 s.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable, Mapping

LONG_MAX = 2**63 - 1
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
ALL_REPLICAS = "*"

_PAIR = re.compile(r"([0-9]+:[0-9]+)?")


def check_throttled_replicas(name: str, value: str) -> None:
    """Kafka's ``ThrottledReplicaListValidator``: ValueError with its message unless ``value``
    is ``*`` or a (possibly empty) list of ``partition:broker`` pairs."""
    items = [item.strip() for item in value.split(",")]
    if all(_PAIR.fullmatch(item) for item in items) or "".join(items) == ALL_REPLICAS:
        return
    raise ValueError(f"Invalid value {value} for configuration {name}: {name} must be the literal '*' or a "
                     "list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")


def throttled_partitions(value: str, broker_id: int) -> frozenset[int] | str:
    """The partitions a replica list throttles on ``broker_id``: `ALL_REPLICAS`, or a set
    (empty for an empty or invalid list: an invalid one was never accepted by a broker)."""
    value = value.strip()
    if value == ALL_REPLICAS:
        return ALL_REPLICAS
    out = set()
    for item in value.split(","):
        partition, _, broker = item.strip().partition(":")
        if partition.isdigit() and broker.isdigit() and int(broker) == broker_id:
            out.add(int(partition))
    return frozenset(out)


class ReplicationQuotaManager:
    """One throttle (see the module docstring). ``bound()`` gives the rate in bytes/s now,
    ``topic_config(topic)`` a topic's configs now; ``clock()`` is monotonic seconds."""

    def __init__(self, replicas_config: str, broker_id: int, bound: Callable[[], float],
                 topic_config: Callable[[str], Mapping[str, str]], *, samples: int = 11,
                 window_s: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.replicas_config = replicas_config
        self.broker_id = broker_id
        self._bound = bound
        self._topic_config = topic_config
        self.samples = samples
        self.window_s = window_s
        self.clock = clock
        self._samples: deque[list] = deque()  # [start, bytes], oldest first
        self._parsed: dict[str, tuple[str, frozenset[int] | str]] = {}  # topic -> (raw, parsed)

    @property
    def bound(self) -> int:
        """Bytes per second; ``Long.MAX_VALUE``: no throttle."""
        return int(self._bound())

    def is_throttled(self, topic: str, partition: int) -> bool:
        """Whether this broker's replica of ``topic``-``partition`` is throttled."""
        raw = self._topic_config(topic).get(self.replicas_config, "")
        if not raw:
            return False
        cached = self._parsed.get(topic)
        if cached is None or cached[0] != raw:
            cached = self._parsed[topic] = (raw, throttled_partitions(raw, self.broker_id))
        return cached[1] == ALL_REPLICAS or partition in cached[1]

    def record(self, size: int) -> None:
        """Count ``size`` bytes sent or fetched for throttled replicas."""
        if size <= 0:
            return
        now = self.clock()
        self._purge(now)
        if not self._samples or now - self._samples[-1][0] >= self.window_s:
            self._samples.append([now, 0])
            while len(self._samples) > self.samples:
                self._samples.popleft()
        self._samples[-1][1] += size

    def rate(self) -> float:
        """Bytes per second over the samples kept (Kafka's ``SimpleRate``)."""
        now = self.clock()
        self._purge(now)
        if not self._samples:
            return 0.0
        elapsed = max(now - self._samples[0][0], self.window_s)
        return sum(size for _, size in self._samples) / elapsed

    def is_quota_exceeded(self) -> bool:
        bound = self.bound
        return bound < LONG_MAX and self.rate() > bound

    def delay(self) -> float:
        """Seconds until the rate falls to the bound with nothing more recorded (0: now)."""
        if not self.is_quota_exceeded():
            return 0.0
        bound = max(self.bound, 1e-9)
        total = sum(size for _, size in self._samples)
        return max(0.0, self._samples[0][0] + total / bound - self.clock())

    def _purge(self, now: float) -> None:
        """Drop the samples older than the window kept (Kafka's ``purgeObsoleteSamples``)."""
        horizon = now - self.samples * self.window_s
        while self._samples and self._samples[0][0] < horizon:
            self._samples.popleft()


class ReplicationQuotas:
    """A broker's ``leader`` and ``follower`` throttles, reading its configs."""

    def __init__(self, broker, clock: Callable[[], float] = time.monotonic) -> None:
        config = broker.config
        samples, window = config["replication.quota.window.num"], config["replication.quota.window.size.seconds"]

        def topic_config(topic: str) -> Mapping[str, str]:
            return broker.metadata_image().topic_config(topic)

        def make(rate: str, replicas: str) -> ReplicationQuotaManager:
            return ReplicationQuotaManager(replicas, broker.broker_id, lambda: broker.effective_config()[rate],
                                           topic_config, samples=samples, window_s=window, clock=clock)

        self.leader = make(LEADER_RATE, LEADER_REPLICAS)
        self.follower = make(FOLLOWER_RATE, FOLLOWER_REPLICAS)
