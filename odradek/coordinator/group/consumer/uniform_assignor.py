"""``UniformAssignor``: the "uniform" server-side assignor of KIP-848 (the default one).

Kafka's ``UniformAssignor`` picks one of two builders, and so does this module:

- **homogeneous** (every member subscribes to the same topics; Kafka's
  ``UniformHomogeneousAssignmentBuilder``): with ``P`` partitions and ``M`` members, every
  member's quota is ``P // M`` and ``P % M`` members get one more, so member sizes differ by
  at most one. Each member keeps its current target partitions up to its quota; the rest
  are handed to members below their quota. The extra slots go to the members that retain
  the most (ties: member id), so a joining member takes partitions only from the members
  with the most, a leaving member's partitions go to the others, and nothing else moves.
  (Kafka hands the extra slots out in member iteration order; ordering by retained size
  keeps the same balance with fewer moves.)
- **heterogeneous** (subscriptions differ; Kafka's ``UniformHeterogeneousAssignmentBuilder``):
  every member keeps the current target partitions it still subscribes to; free partitions
  go, topic by topic (most partitions per subscriber first, then fewest subscribers, then
  topic id), each to its least loaded subscriber (lowest member id on ties); then, topic by topic until a whole round
  moves nothing, a partition moves from the most loaded subscriber holding one of the
  topic's partitions to the least loaded subscriber whenever their sizes differ by two or
  more. Each move lowers the sum of squared member sizes by at least two, so the rounds end
  (Kafka caps them at 16; odradek needs no cap). The result is balanced per topic: for every
  topic, a subscriber holding one of its partitions has at most one partition more than any
  other subscriber of the topic, which is as balanced as overlapping subscriptions allow
  for this method.

Racks. When members have racks and partitions have replica racks that tell members apart
(the rule of Kafka 3.7's ``RackInfo``: some member rack holds some replica, and not every
partition is on the same racks), free partitions prefer a member whose rack holds a
replica, within the balance above: a free partition goes to a rack-matching member still
under its quota if there is one (the one with most room left). In the heterogeneous
builder a subscriber's "quota" for a topic's free partitions is the number the least
loaded rule gives it. Racks never move a partition
a member keeps (balance, then stickiness, then racks). Kafka 3.8 removed rack awareness
from its server-side assignors; this is the 3.7 behaviour, kept sticky.

Determinism: members are taken in member id order, topics in topic id order, partitions in
index order, whatever the order of the input mappings. A partition listed in the current
assignment of two members stays with the first by member id; partitions of topics a member
no longer subscribes to, of unknown topics, or beyond a topic's partition count are dropped.
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Mapping, Sequence

from odradek.coordinator.group.consumer.assignment import (
    MemberSubscription,
    PartitionAssignorError,
    TopicMetadata,
)

UNIFORM_ASSIGNOR_NAME = "uniform"

# topic id -> owner of each partition: an index into the sorted member ids, or -1 (unassigned).
Owners = dict[uuid.UUID, list[int]]
NO_OWNER = -1


class UniformAssignor:
    """The "uniform" assignor: balanced, sticky, rack-aware when racks are known."""

    name = UNIFORM_ASSIGNOR_NAME

    def assign(
        self,
        members: Mapping[str, MemberSubscription],
        topics: Mapping[uuid.UUID, TopicMetadata],
    ) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
        """member id -> new target assignment; see the module docstring for the method.

        Raises ``PartitionAssignorError`` when a member subscribes to a topic missing from
        ``topics`` (Kafka: "Members are subscribed to topic ... which doesn't exist").
        """
        member_ids = sorted(members)
        subscriptions = [members[m].subscribed_topic_ids for m in member_ids]
        for member_id, subscribed in zip(member_ids, subscriptions):
            for topic_id in subscribed:
                if topic_id not in topics:
                    raise PartitionAssignorError(
                        f"Member {member_id} is subscribed to topic {topic_id} which doesn't "
                        "exist in the topic metadata."
                    )
        topic_ids = sorted(set().union(*subscriptions)) if subscriptions else []
        if not topic_ids:
            return {m: {} for m in member_ids}
        racks = _MemberRacks.of(member_ids, members, topics, topic_ids)
        ordered = [members[m] for m in member_ids]
        if all(s == subscriptions[0] for s in subscriptions):
            owners = _assign_homogeneous(ordered, topics, topic_ids, racks)
        else:
            owners = _assign_heterogeneous(ordered, topics, topic_ids, racks)
        return _member_assignments(member_ids, owners)


class _MemberRacks:
    """Rack matching between members and partitions, or nothing when racks don't help.

    ``rack_of[i]`` is member ``i``'s rack (``None`` when unset or when rack matching is off).
    """

    def __init__(self, rack_of: list[str | None], topics: Mapping[uuid.UUID, TopicMetadata]):
        self.rack_of = rack_of
        self.enabled = any(r is not None for r in rack_of)
        self._topics = topics

    @classmethod
    def of(
        cls,
        member_ids: Sequence[str],
        members: Mapping[str, MemberSubscription],
        topics: Mapping[uuid.UUID, TopicMetadata],
        topic_ids: Sequence[uuid.UUID],
    ) -> _MemberRacks:
        member_racks = {members[m].rack_id for m in member_ids if members[m].rack_id}
        off = cls([None] * len(member_ids), topics)
        if not member_racks:
            return off
        all_partition_racks: set[str] = set()
        distinct_rack_sets: set[frozenset[str]] = set()
        for topic_id in topic_ids:
            metadata = topics[topic_id]
            for partition in range(metadata.num_partitions):
                racks = metadata.partition_racks.get(partition, frozenset())
                all_partition_racks.update(racks)
                distinct_rack_sets.add(frozenset(racks))
        # Kafka's useRackAwareAssignment: no rack in common, or every partition on the same
        # racks, and matching racks can tell no member apart.
        if member_racks.isdisjoint(all_partition_racks) or len(distinct_rack_sets) <= 1:
            return off
        return cls([members[m].rack_id or None for m in member_ids], topics)

    def partition_racks(self, topic_id: uuid.UUID, partition: int) -> frozenset[str]:
        return self._topics[topic_id].partition_racks.get(partition, frozenset())

    def matches(self, member: int, topic_id: uuid.UUID, partition: int) -> bool:
        rack = self.rack_of[member]
        return rack is not None and rack in self.partition_racks(topic_id, partition)


def _empty_owners(topics: Mapping[uuid.UUID, TopicMetadata], topic_ids: Sequence[uuid.UUID]) -> Owners:
    return {t: [NO_OWNER] * max(topics[t].num_partitions, 0) for t in topic_ids}


def _claim_current(
    member: int, subscription: MemberSubscription, owners: Owners
) -> list[tuple[uuid.UUID, int]]:
    """Mark as owned by ``member`` the partitions of its current target assignment that it
    may keep (subscribed, existing, not already claimed by an earlier member); returns them
    in (topic id, partition) order."""
    claimed = []
    for topic_id in sorted(subscription.assigned):
        if topic_id not in subscription.subscribed_topic_ids or topic_id not in owners:
            continue
        partition_owners = owners[topic_id]
        for partition in sorted(subscription.assigned[topic_id]):
            if 0 <= partition < len(partition_owners) and partition_owners[partition] == NO_OWNER:
                partition_owners[partition] = member
                claimed.append((topic_id, partition))
    return claimed


def _assign_homogeneous(
    members: Sequence[MemberSubscription],
    topics: Mapping[uuid.UUID, TopicMetadata],
    topic_ids: Sequence[uuid.UUID],
    racks: _MemberRacks,
) -> Owners:
    """Quota-based assignment for a group whose members all subscribe to ``topic_ids``."""
    owners = _empty_owners(topics, topic_ids)
    total = sum(len(o) for o in owners.values())
    min_quota, extra = divmod(total, len(members))
    kept = [_claim_current(i, m, owners) for i, m in enumerate(members)]
    # The extra slots go to the members retaining the most: a member above the minimum
    # quota then keeps its extra partition instead of passing it to a member below it.
    by_size = sorted(range(len(members)), key=lambda i: (-len(kept[i]), i))
    remaining = [0] * len(members)
    for rank, member in enumerate(by_size):
        quota = min_quota + (1 if rank < extra else 0)
        partitions = kept[member]
        if len(partitions) > quota:
            if racks.enabled:
                # Give up the partitions away from the member's rack first.
                partitions.sort(key=lambda tp: not racks.matches(member, *tp))
            for topic_id, partition in partitions[quota:]:
                owners[topic_id][partition] = NO_OWNER
        remaining[member] = quota - min(len(partitions), quota)
    free = [(t, p) for t in topic_ids for p, owner in enumerate(owners[t]) if owner == NO_OWNER]
    if racks.enabled:
        free = _fill_rack_matching(free, remaining, owners, racks)
    _fill_in_member_order(free, remaining, owners)
    return owners


def _fill_rack_matching(
    free: list[tuple[uuid.UUID, int]],
    remaining: list[int],
    owners: Owners,
    racks: _MemberRacks,
) -> list[tuple[uuid.UUID, int]]:
    """Give each free partition to a member on one of its replicas' racks that is still
    under quota (the one with most room left, then the lowest index); ``remaining`` is
    decremented. Returns the partitions no such member could take, in order."""
    by_rack: dict[str, list[tuple[int, int]]] = {}
    for member, room in enumerate(remaining):
        rack = racks.rack_of[member]
        if room > 0 and rack is not None:
            by_rack.setdefault(rack, []).append((-room, member))
    for heap in by_rack.values():
        heapq.heapify(heap)
    leftover = []
    for topic_id, partition in free:
        best: tuple[int, int] | None = None
        for rack in racks.partition_racks(topic_id, partition):
            heap = by_rack.get(rack)
            if heap and (best is None or heap[0] < best):
                best = heap[0]
        if best is None:
            leftover.append((topic_id, partition))
            continue
        member = best[1]
        heap = by_rack[racks.rack_of[member]]
        heapq.heappop(heap)
        owners[topic_id][partition] = member
        remaining[member] -= 1
        if remaining[member] > 0:
            heapq.heappush(heap, (-remaining[member], member))
    return leftover


def _assign_heterogeneous(
    members: Sequence[MemberSubscription],
    topics: Mapping[uuid.UUID, TopicMetadata],
    topic_ids: Sequence[uuid.UUID],
    racks: _MemberRacks,
) -> Owners:
    """Keep, fill the least loaded, then balance topic by topic (module docstring)."""
    owners = _empty_owners(topics, topic_ids)
    subscribers: dict[uuid.UUID, list[int]] = {t: [] for t in topic_ids}
    sizes = [0] * len(members)
    for i, member in enumerate(members):
        for topic_id in member.subscribed_topic_ids:
            subscribers[topic_id].append(i)
        sizes[i] = len(_claim_current(i, member, owners))
    for subscriber_list in subscribers.values():
        subscriber_list.sort()
    order = sorted(
        topic_ids,
        key=lambda t: (-len(owners[t]) / len(subscribers[t]), len(subscribers[t]), t),
    )
    for topic_id in order:
        _fill_least_loaded(topic_id, subscribers[topic_id], owners[topic_id], sizes, racks)
    balanced = False
    while not balanced:
        balanced = True
        for topic_id in order:
            if _balance_topic(subscribers[topic_id], owners[topic_id], sizes) > 0:
                balanced = False
    return owners


def _fill_least_loaded(
    topic_id: uuid.UUID,
    subscribers: list[int],
    partition_owners: list[int],
    sizes: list[int],
    racks: _MemberRacks,
) -> None:
    """Give the unowned partitions of a topic to its least loaded subscribers.

    How many each subscriber gets is what handing them out one by one to the least loaded
    (lowest index on ties) would give (``_water_fill``); which ones it gets prefers, within
    those counts, partitions on the subscriber's rack, as the homogeneous builder does.
    """
    free = [(topic_id, p) for p, owner in enumerate(partition_owners) if owner == NO_OWNER]
    if not free:
        return
    remaining = [0] * len(sizes)
    for member, count in _water_fill(subscribers, sizes, len(free)).items():
        remaining[member] = count
        sizes[member] += count
    owners = {topic_id: partition_owners}
    if racks.enabled:
        free = _fill_rack_matching(free, remaining, owners, racks)
    _fill_in_member_order(free, remaining, owners)


def _water_fill(members: list[int], sizes: list[int], count: int) -> dict[int, int]:
    """member -> how many of ``count`` new partitions it gets when each goes to the member
    with the fewest (lowest index on ties). Example: sizes 0, 3, 5 and 6 new partitions
    give 5, 1, 0 (sizes 5, 4, 5: at 3 and 3, and at 4 and 4, the first won the tie);
    7 new ones give 5, 2, 0."""
    order = sorted(members, key=lambda i: (sizes[i], i))
    level, left, lowest = sizes[order[0]], count, 0
    while lowest < len(order) and sizes[order[lowest]] == level:
        lowest += 1
    while lowest < len(order):
        step = (sizes[order[lowest]] - level) * lowest
        if step > left:
            break
        left -= step
        level = sizes[order[lowest]]
        while lowest < len(order) and sizes[order[lowest]] == level:
            lowest += 1
    full, extra = divmod(left, lowest)
    raised = sorted(order[:lowest])
    return {i: level + full - sizes[i] + (1 if rank < extra else 0) for rank, i in enumerate(raised)}


def _fill_in_member_order(
    free: list[tuple[uuid.UUID, int]], remaining: list[int], owners: Owners
) -> None:
    """Hand ``free`` out in order: member 0 takes its ``remaining`` first, then member 1..."""
    index = 0
    for member, room in enumerate(remaining):
        for topic_id, partition in free[index:index + room]:
            owners[topic_id][partition] = member
        index += room
    if index < len(free):
        raise PartitionAssignorError("Partitions were left unassigned")


def _top(heap: list[tuple[int, int]], sizes: list[int]) -> tuple[int, int] | None:
    """The smallest up-to-date (size, member) of a lazily updated heap, left in place."""
    while heap and heap[0][0] != sizes[heap[0][1]]:
        heapq.heappop(heap)
    return heap[0] if heap else None


def _balance_topic(subscribers: list[int], partition_owners: list[int], sizes: list[int]) -> int:
    """Move partitions of one topic from its most loaded holder to its least loaded
    subscriber while their sizes differ by two or more. Returns the number moved.

    A holder gives up its highest partition index; receivers append, so a member's
    partitions of the topic stay in a deterministic order.
    """
    if len(subscribers) < 2:
        return 0
    held: dict[int, list[int]] = {i: [] for i in subscribers}
    for partition, owner in enumerate(partition_owners):
        if owner != NO_OWNER:
            held[owner].append(partition)
    holders = [i for i in subscribers if held[i]]
    if not holders or max(sizes[i] for i in holders) - min(sizes[i] for i in subscribers) < 2:
        return 0
    most = [(-sizes[i], i) for i in holders]  # max-heap by size, stale entries skipped
    least = [(sizes[i], i) for i in subscribers]
    heapq.heapify(most)
    heapq.heapify(least)
    moved = 0
    while True:
        while most and (-most[0][0] != sizes[most[0][1]] or not held[most[0][1]]):
            heapq.heappop(most)
        receiver = _top(least, sizes)
        if not most or receiver is None or -most[0][0] - receiver[0] < 2:
            return moved
        giver = most[0][1]
        taker = receiver[1]
        partition = held[giver].pop()
        held[taker].append(partition)
        partition_owners[partition] = taker
        sizes[giver] -= 1
        sizes[taker] += 1
        moved += 1
        for member in (giver, taker):
            heapq.heappush(least, (sizes[member], member))
            if held[member]:
                heapq.heappush(most, (-sizes[member], member))


def _member_assignments(
    member_ids: Sequence[str], owners: Owners
) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    """Invert ``owners`` into member id -> topic id -> partitions (every member a key)."""
    collected: list[dict[uuid.UUID, list[int]]] = [{} for _ in member_ids]
    for topic_id, partition_owners in owners.items():
        for partition, owner in enumerate(partition_owners):
            if owner != NO_OWNER:
                collected[owner].setdefault(topic_id, []).append(partition)
    return {
        member_id: {t: frozenset(ps) for t, ps in collected[i].items()}
        for i, member_id in enumerate(member_ids)
    }
