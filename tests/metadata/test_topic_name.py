"""Kafka's topic-name rules."""

from __future__ import annotations

import pytest

from odradek.metadata.errors import InvalidTopicError
from odradek.metadata.topic_name import (
    collision_key,
    has_collision_chars,
    is_internal,
    validate_topic_name,
)


@pytest.mark.parametrize(
    "name", ["a", "topic-1", "my.topic_v2", "A" * 249, "__consumer_offsets", "..."]
)
def test_legal_names(name):
    assert validate_topic_name(name) == name


@pytest.mark.parametrize(
    "name", ["", ".", "..", "A" * 250, "with space", "slash/", "ünï", "tab\t", None]
)
def test_illegal_names(name):
    with pytest.raises(InvalidTopicError):
        validate_topic_name(name)


def test_dots_and_underscores_collide():
    assert collision_key("a.b_c") == collision_key("a_b.c") == "a_b_c"
    assert (
        has_collision_chars("a.b") and has_collision_chars("a_b") and not has_collision_chars("ab")
    )


def test_internal_topics():
    assert is_internal("__consumer_offsets") and is_internal("__transaction_state")
    assert not is_internal("orders")
