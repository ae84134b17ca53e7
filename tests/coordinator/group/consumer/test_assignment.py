"""The shared value types of odradek/coordinator/group/consumer/assignment.py."""

from __future__ import annotations

import dataclasses

import pytest

from odradek.coordinator.group.consumer.assignment import (
    MemberSubscription,
    PartitionAssignor,
    PartitionAssignorError,
    TopicMetadata,
)
from odradek.coordinator.group.consumer.assignors import ASSIGNORS

from .assignor_cases import member, topic, topic_id


def test_value_types_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        topic(1, 3).num_partitions = 4  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        member("a", set()).rack_id = "r"  # type: ignore[misc]
    assert isinstance(topic(1, 3), TopicMetadata) and isinstance(member("a", set()), MemberSubscription)
    assert issubclass(PartitionAssignorError, Exception)


@pytest.mark.parametrize("name", sorted(ASSIGNORS))
def test_assignors_follow_the_contract(name):
    assignor: PartitionAssignor = ASSIGNORS[name]
    t = topic_id(1)
    members = {"a": member("a", {t}), "b": member("b", set())}
    result = assignor.assign(members, {t: topic(1, 2)})
    assert result == {"a": {t: frozenset({0, 1})}, "b": {}}
