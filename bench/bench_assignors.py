#!/usr/bin/env python3
"""Time of the KIP-848 server-side assignors (odradek/coordinator/group/consumer/).

Run: ``.venv/bin/python bench/bench_assignors.py``. For each assignor and group shape: a
fresh assignment (no current target), then a sticky one (every member with the previous
result as its current target, plus one joining member). Shapes: 50 members x 200
partitions (10 topics x 20) and 1000 members x 10,000 partitions (100 topics x 100); all
members on the same topics (homogeneous) or each on a random half of them
(heterogeneous); with racks: 3 racks, members spread over them, 2 replica racks a partition.

Seen on the 2-core development machine (shared with other work), best of 3, seconds:

    uniform  50 x 200                    fresh 0.000  sticky+1 0.000
    uniform  1000 x 10000                fresh 0.027  sticky+1 0.017
    uniform  1000 x 10000 racks          fresh 0.031  sticky+1 0.027
    uniform  1000 x 10000 hetero         fresh 0.063  sticky+1 0.041
    uniform  1000 x 10000 hetero racks   fresh 0.076  sticky+1 0.052
    range    1000 x 10000                fresh 0.035  sticky+1 0.034
    range    1000 x 10000 hetero         fresh 0.021  sticky+1 0.022

Harder heterogeneous balancing, measured once by hand: one member subscribed to all 100
topics and holding all 10,000 partitions, the others on random halves: 0.08 s; a chain
(member i on topics i and i + 1, one member holding two topics): 0.04 s.
"""

from __future__ import annotations

import random
import time
import uuid

from odradek.coordinator.group.consumer.assignment import MemberSubscription, TopicMetadata
from odradek.coordinator.group.consumer.assignors import ASSIGNORS

RACKS = ("r0", "r1", "r2")


def group(members: int, topics: int, partitions: int, *, hetero: bool, racks: bool):
    rnd = random.Random(1)
    metadata = {}
    for n in range(1, topics + 1):
        t = uuid.UUID(int=n)
        partition_racks = (
            {p: frozenset({RACKS[p % 3], RACKS[(p + 1) % 3]}) for p in range(partitions)} if racks else {}
        )
        metadata[t] = TopicMetadata(t, f"topic-{n}", partitions, partition_racks)
    ids = sorted(metadata)
    subscriptions = {}
    for i in range(members):
        subscribed = frozenset(rnd.sample(ids, max(1, topics // 2))) if hetero else frozenset(ids)
        member_id = f"member-{i:05d}"
        subscriptions[member_id] = MemberSubscription(
            member_id, None, RACKS[i % 3] if racks else None, subscribed, {}
        )
    return subscriptions, metadata


def best_of(runs: int, fn) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    shapes = [
        ("50 x 200", (50, 10, 20), {}),
        ("1000 x 10000", (1000, 100, 100), {}),
        ("1000 x 10000 racks", (1000, 100, 100), {"racks": True}),
        ("1000 x 10000 hetero", (1000, 100, 100), {"hetero": True}),
        ("1000 x 10000 hetero racks", (1000, 100, 100), {"hetero": True, "racks": True}),
    ]
    for name, assignor in ASSIGNORS.items():
        for label, sizes, options in shapes:
            members, topics = group(*sizes, hetero=options.get("hetero", False), racks=options.get("racks", False))
            fresh, result = best_of(3, lambda: assignor.assign(members, topics))
            sticky_members = {
                m: MemberSubscription(s.member_id, s.instance_id, s.rack_id, s.subscribed_topic_ids, result[m])
                for m, s in members.items()
            }
            first = next(iter(members.values()))
            sticky_members["member-new"] = MemberSubscription(
                "member-new", None, first.rack_id, first.subscribed_topic_ids, {}
            )
            sticky, _ = best_of(3, lambda: assignor.assign(sticky_members, topics))
            print(f"{name:8} {label:28} fresh {fresh:.3f}  sticky+1 {sticky:.3f}")


if __name__ == "__main__":
    main()
