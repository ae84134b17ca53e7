"""``SimpleAssignor``: the share groups' server-side assignor (Kafka's
``assignor.SimpleAssignor`` with its homogeneous and heterogeneous builders), written afresh.

Share groups share partitions: any number of members may be assigned the same partition, and
the share partitions hand each record to one of them at a time. The assignor spreads the
partitions so that every partition has members and every member has partitions:

- a scope is the set of members and the partitions they may get: the whole group when every
  member subscribes to the same topics (homogeneous), else each topic with its subscribers
  (heterogeneous: balance per topic, as Kafka);
- in a scope of ``n`` members and ``k`` partitions each partition gets ``sharing =
  ceil(n / k)`` members, so ``sharing * k`` assignments in all, spread over the members as
  evenly as integers allow (two members' counts differ by at most one). With fewer members
  than partitions ``sharing`` is 1 (each partition to one member); with more members than
  partitions a partition goes to several;
- stickiness: a member first keeps what it had (up to its share), the members keeping the
  most get the larger shares; the rest is handed out partition by partition (in topic id and
  partition order) to the least-loaded member that does not have it yet (ties: member id);
  a partition left short because only members already holding it have room is filled by a
  swap (another member hands over one of its partitions and takes the short one).

Worked example: members a, b, c, d, e on one topic of 2 partitions: sharing 3, 6 assignments,
one member gets both partitions and four get one each: p0 to a, b, c, p1 to the others.

Pure and deterministic: the same input (in any order) gives the same output, which is
written to ``__consumer_offsets`` and replayed. ``assignable(topic_id, partition)`` leaves out
partitions whose share-group state is not initialized yet (Kafka's
``GroupSpec.isPartitionAssignable``).
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Callable, Mapping

from odradek.coordinator.group.consumer.assignment import MemberSubscription, TopicMetadata

NAME = "simple"

TopicPartition = tuple[uuid.UUID, int]


class SimpleAssignor:
    name = NAME

    def assign(self, members: Mapping[str, MemberSubscription], topics: Mapping[uuid.UUID, TopicMetadata],
               assignable: Callable[[uuid.UUID, int], bool] | None = None) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
        """member id -> its target (topic id -> partitions); every member id is a key."""
        subs = {m: frozenset(t for t in s.subscribed_topic_ids if t in topics) for m, s in members.items()}
        out: dict[str, set[TopicPartition]] = {m: set() for m in members}
        for scope_members, partitions in _scopes(subs, topics, assignable):
            old = {m: {tp for t, ps in members[m].assigned.items() for p in ps if (tp := (t, p)) in partitions}
                   for m in scope_members}
            for m, tps in assign_scope(scope_members, sorted(partitions), old).items():
                out[m] |= tps
        result: dict[str, dict[uuid.UUID, frozenset[int]]] = {}
        for m, tps in out.items():
            by_topic: dict[uuid.UUID, set[int]] = {}
            for t, p in tps:
                by_topic.setdefault(t, set()).add(p)
            result[m] = {t: frozenset(ps) for t, ps in by_topic.items()}
        return result


def _scopes(subs: Mapping[str, frozenset], topics, assignable):
    def partitions_of(topic_ids) -> set[TopicPartition]:
        return {(t, p) for t in topic_ids for p in range(topics[t].num_partitions)
                if assignable is None or assignable(t, p)}

    if not subs:
        return []
    if len(set(subs.values())) == 1:
        return [(sorted(subs), partitions_of(next(iter(subs.values()))))]
    scopes = []
    for topic_id in sorted(set().union(*subs.values())):
        scopes.append((sorted(m for m, s in subs.items() if topic_id in s), partitions_of([topic_id])))
    return scopes


def assign_scope(member_ids: list[str], partitions: list[TopicPartition],
                 old: Mapping[str, set[TopicPartition]]) -> dict[str, set[TopicPartition]]:
    """Spread ``partitions`` over ``member_ids`` (see the module docstring); ``old``: what each
    member had of these partitions."""
    member_ids, partitions = sorted(member_ids), sorted(partitions)
    n, k = len(member_ids), len(partitions)
    out: dict[str, set[TopicPartition]] = {m: set() for m in member_ids}
    if n == 0 or k == 0:
        return out
    sharing = -(-n // k)
    base, extra = divmod(sharing * k, n)
    by_keep = sorted(member_ids, key=lambda m: (-len(old.get(m, ())), m))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(by_keep)}
    holders: dict[TopicPartition, int] = {tp: 0 for tp in partitions}
    for m in member_ids:  # keep what it had, up to its share and the partition's sharing
        for tp in sorted(old.get(m, ())):
            if len(out[m]) >= quota[m]:
                break
            if holders[tp] < sharing:
                out[m].add(tp)
                holders[tp] += 1
    room = [(len(out[m]), m) for m in member_ids if len(out[m]) < quota[m]]
    heapq.heapify(room)
    for tp in partitions:
        skipped = []
        while holders[tp] < sharing and room:
            count, m = heapq.heappop(room)
            if tp in out[m]:
                skipped.append((count, m))
                continue
            out[m].add(tp)
            holders[tp] += 1
            if count + 1 < quota[m]:
                heapq.heappush(room, (count + 1, m))
        for entry in skipped:
            heapq.heappush(room, entry)
    _repair(member_ids, partitions, out, holders, quota, sharing)
    return out


def _repair(member_ids, partitions, out, holders, quota, sharing) -> None:
    """Fill what the greedy pass left short: a partition that only members already holding it
    have room for. A member ``x`` without it hands one of its partitions that the member ``m``
    with room lacks to ``m`` and takes the short one: ``x`` keeps its count, ``m`` gains one."""
    for tp in partitions:
        while holders[tp] < sharing:
            with_room = [m for m in member_ids if len(out[m]) < quota[m]]
            free = next((m for m in with_room if tp not in out[m]), None)
            if free is not None:
                out[free].add(tp)
                holders[tp] += 1
                continue
            swap = next(((m, x, tp2) for m in with_room for x in member_ids if tp not in out[x]
                         for tp2 in sorted(out[x]) if tp2 not in out[m]), None)
            if swap is None:
                break  # nobody can take it: a slight imbalance, as Kafka tolerates
            m, x, tp2 = swap
            out[x].remove(tp2)
            out[x].add(tp)
            out[m].add(tp2)
            holders[tp] += 1
