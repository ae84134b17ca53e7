"""The client's metadata snapshot: a refresh never takes a partition's leader back to an older
leader epoch (KIP-320), unless the topic was made anew."""

from __future__ import annotations

import uuid

from odradek.client.metadata import ClusterMetadata, PartitionInfo, TopicInfo

BROKERS = {}
ID = uuid.uuid4()


def snapshot(leaders: list[tuple[int, int]], topic_id: uuid.UUID = ID) -> ClusterMetadata:
    """Topic ``t`` whose partition i is led by ``leaders[i] = (leader, leader epoch)``."""
    parts = tuple(PartitionInfo("t", i, leader, epoch, (1, 2, 3), (1, 2, 3)) for i, (leader, epoch) in enumerate(leaders))
    return ClusterMetadata(BROKERS, {"t": TopicInfo("t", topic_id, False, parts)})


def leaders(meta: ClusterMetadata) -> list[tuple[int, int]]:
    return [(p.leader, p.leader_epoch) for p in meta.topics["t"].partitions]


def test_an_answer_with_an_older_leader_epoch_keeps_the_known_leader():
    known = snapshot([(3, 5), (1, 2)])
    # From a deposed leader that has not heard of the election of epoch 5.
    answer = snapshot([(2, 4), (1, 3)])
    for asked in (None, {"t"}):
        assert leaders(known.merged(answer, asked)) == [(3, 5), (1, 3)]


def test_a_newer_or_equal_epoch_is_taken():
    known = snapshot([(3, 5), (1, 2)])
    assert leaders(known.merged(snapshot([(2, 6), (1, 2)]), None)) == [(2, 6), (1, 2)]


def test_unknown_epochs_are_taken_as_they_come():
    known = snapshot([(3, 5)])
    assert leaders(known.merged(snapshot([(2, -1)]), None)) == [(2, -1)]


def test_a_topic_made_anew_starts_its_epochs_again():
    known = snapshot([(3, 5)])
    assert leaders(known.merged(snapshot([(2, 0)], topic_id=uuid.uuid4()), None)) == [(2, 0)]


def test_topics_not_asked_about_are_kept():
    known = ClusterMetadata(BROKERS, {**snapshot([(3, 5)]).topics, "u": TopicInfo("u")})
    merged = known.merged(snapshot([(3, 5)]), {"t"})
    assert set(merged.topics) == {"t", "u"}
