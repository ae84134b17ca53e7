"""What a group consumer subscribes to: a list of topics, or the topics a filter lets through.

Kafka 0.8's high-level consumer (``ConsumerConnector.createMessageStreamsByFilter``, in the
'API Design' section of Kafka 0.8's documentation) takes a ``TopicFilter``, "a whitelist or a
blacklist which is a standard Java regex", and watches for new topics that match. Here:

- ``TopicList(["a", "b"])``: exactly those topics, whether they exist yet or not.
- ``Whitelist(regex)``: every topic whose whole name matches ``regex`` (Java's
  ``Matcher.matches``, Python's ``re.fullmatch``). As in Kafka's original ``Whitelist``, a
  string regex may list alternatives with commas (``"a,b"`` means ``"a|b"``); spaces and
  surrounding quotes are dropped.
- ``Blacklist(regex)``: every topic whose name does *not* match.

Both filters leave out internal topics (``__consumer_offsets``, ``__transaction_state``) unless
``exclude_internal_topics=False``, like ``exclude.internal.topics``. A filter subscription is
re-evaluated on every full metadata refresh, so topics created later that match are picked
up (and deleted ones dropped); ``matching`` does that evaluation on a metadata snapshot.
"""

from __future__ import annotations

import re

from odradek.client.metadata import ClusterMetadata

__all__ = ["Blacklist", "TopicFilter", "TopicList", "Whitelist", "topic_filter"]

_COMMA = re.compile(r",(?![^{]*\})")


class TopicFilter:
    """Base of the subscriptions: ``is_topic_allowed`` decides a topic by name."""

    dynamic = True  # whether the subscribed topics follow the cluster's topics

    def __init__(self, exclude_internal_topics: bool = True) -> None:
        self.exclude_internal_topics = exclude_internal_topics

    def is_topic_allowed(self, topic: str, is_internal: bool = False) -> bool:
        raise NotImplementedError

    def matching(self, metadata: ClusterMetadata) -> frozenset[str]:
        """The topics of ``metadata`` this filter subscribes to."""
        return frozenset(name for name, info in metadata.topics.items()
                         if self.is_topic_allowed(name, info.is_internal))


class TopicList(TopicFilter):
    """A fixed list of topic names."""

    dynamic = False

    def __init__(self, topics) -> None:
        super().__init__(exclude_internal_topics=False)
        if isinstance(topics, str):
            topics = [topics]
        names = []
        for topic in topics:
            if not isinstance(topic, str) or not topic.strip():
                raise ValueError(f"topic name {topic!r} is not a non-empty string")
            names.append(topic)
        if not names:
            raise ValueError("subscribe to at least one topic (unsubscribe() to leave the group)")
        self.topics = frozenset(names)

    def is_topic_allowed(self, topic: str, is_internal: bool = False) -> bool:
        return topic in self.topics

    def __repr__(self) -> str:
        return f"TopicList({sorted(self.topics)})"


def _compile(regex) -> re.Pattern:
    if isinstance(regex, re.Pattern):
        return regex
    if not isinstance(regex, str):
        raise TypeError(f"a topic pattern is a regex string or re.Pattern, not {type(regex).__name__}")
    # Kafka's Whitelist: commas separate alternatives (but not inside a {m,n} quantifier).
    cleaned = _COMMA.sub("|", regex.strip().replace(" ", "").strip("\"'"))
    if not cleaned:
        raise ValueError("empty topic pattern")
    try:
        return re.compile(cleaned)
    except re.error as e:
        raise ValueError(f"invalid topic pattern {regex!r}: {e}") from None


class Whitelist(TopicFilter):
    """Topics whose whole name matches the regex."""

    def __init__(self, regex, exclude_internal_topics: bool = True) -> None:
        super().__init__(exclude_internal_topics)
        self.pattern = _compile(regex)

    def is_topic_allowed(self, topic: str, is_internal: bool = False) -> bool:
        if is_internal and self.exclude_internal_topics:
            return False
        return self.pattern.fullmatch(topic) is not None

    def __repr__(self) -> str:
        return f"Whitelist({self.pattern.pattern!r})"


class Blacklist(TopicFilter):
    """Topics whose name does not match the regex."""

    def __init__(self, regex, exclude_internal_topics: bool = True) -> None:
        super().__init__(exclude_internal_topics)
        self.pattern = _compile(regex)

    def is_topic_allowed(self, topic: str, is_internal: bool = False) -> bool:
        if is_internal and self.exclude_internal_topics:
            return False
        return self.pattern.fullmatch(topic) is None

    def __repr__(self) -> str:
        return f"Blacklist({self.pattern.pattern!r})"


def topic_filter(topics=None, pattern=None) -> TopicFilter:
    """The subscription of ``subscribe(topics=..., pattern=...)``: exactly one of a topic list
    (or one name), a regex (string or ``re.Pattern``: a whitelist) or a ``TopicFilter``."""
    if (topics is None) == (pattern is None):
        raise ValueError("subscribe to either topics or a pattern")
    if topics is not None:
        return topics if isinstance(topics, TopicFilter) else TopicList(topics)
    return pattern if isinstance(pattern, TopicFilter) else Whitelist(pattern)
