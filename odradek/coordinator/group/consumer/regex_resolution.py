"""Resolving a consumer group's subscribed regular expressions (``SubscribedTopicRegex``,
ConsumerGroupHeartbeat v1), as Kafka 4.x's ``GroupMetadataManager`` does
(``maybeUpdateRegularExpressions``, ``refreshRegularExpressions``,
``handleRegularExpressionsResult``).

A regex is resolved for the group, not per member: ``ConsumerGroup.resolved_regexes`` maps each
regex some member subscribes to onto a ``ResolvedRegularExpression`` (the topics it matched,
the metadata version it was matched against, the time), written as a
ConsumerGroupRegularExpression record (key type 16) and rebuilt by replaying it. A member's
topics are its literal names plus the resolved topics of its regex; an unresolved regex
contributes no topic. So:

- a heartbeat bringing a regex new to the group does not bump the group epoch: the member's
  literal topics are assigned first, and a resolution is scheduled;
- a heartbeat bringing a regex already resolved in the group bumps the group epoch at once;
- the resolution lands later, from the shard's ``TimerQueue`` (key ``consumer-regex:<group>``,
  due at once: Kafka runs it on its executor because it is expensive; odradek resolves in the
  timer, which runs after the heartbeat's records are written). It writes one record per
  regex the group still subscribes to, and bumps the group epoch when a regex's topics or the
  subscription metadata changed; the next heartbeat computes the new target assignment;
- the last subscriber of a regex leaving it (another regex, leaving the group, fenced)
  writes the regex's tombstone.

Refreshes are batched, as Kafka's: a heartbeat (of any member) schedules one only when the
group subscribes to regexes, none is scheduled already, the last resolution is older than
``REGEX_BATCH_REFRESH_MIN_INTERVAL_MS`` (10 s; Kafka has no config key for it), and the group
has an unresolved regex or the metadata has new topics since the last resolution (Kafka's
``lastMetadataImageWithNewTopics``). Deleted topics do not trigger a refresh: they drop out of
the subscription metadata, and out of the resolved topics at the next refresh.

Metadata versions: Kafka uses the offset of the metadata image. odradek's ``MetadataImage``
has none, so ``MetadataVersions`` numbers the images this coordinator has seen by the clock:
when a heartbeat or a resolution sees topic ids it had not seen, the version becomes the
current time in ms (at least one more than before). A coordinator that loads the partition
starts from the load time, so regexes resolved by an earlier coordinator are resolved again
by the first heartbeat 10 s after their resolution, as Kafka's coordinator initialising
``lastMetadataImageWithNewTopics`` from its first image.

Authorization (Kafka's ``filterTopicDescribeAuthorizedTopics``): a resolution keeps only the
topics the principal of the heartbeat that scheduled it may DESCRIBE (``describable``, from
the handler's ACL check; None without an authorizer), for every regex of the group, as Kafka
does with that request's context. A coordinator that reloads the group replays the resolved
topics, which were checked when resolved, and resolves again only from a member's heartbeat,
which brings its principal's check.

Matching: Python's ``re`` with ``fullmatch`` (``subscription_metadata.compile_regex``);
internal topics (names starting ``__``) never match.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from odradek.coordinator.group.consumer import subscription_metadata
from odradek.coordinator.group.consumer.consumer_group import ConsumerGroup
from odradek.coordinator.group.consumer.consumer_group_member import ConsumerGroupMember
from odradek.coordinator.group.consumer.consumer_group_records import (
    RegularExpressionRecord,
    ResolvedRegularExpression,
)
from odradek.coordinator.group.consumer.subscription_metadata import InvalidRegex

log = logging.getLogger("odradek.coordinator.group")

# Kafka's GroupMetadataManager.REGEX_BATCH_REFRESH_MIN_INTERVAL_MS: at most one refresh of a
# group's regexes per 10 s, so topics created a few ms apart cost one rebalance, not several.
REGEX_BATCH_REFRESH_MIN_INTERVAL_MS = 10_000


def regex_timer_key(group_id: str) -> str:
    return f"consumer-regex:{group_id}"


class MetadataVersions:
    """The version of the metadata image as far as regexes care: it moves when new topic ids
    appear (Kafka's ``lastMetadataImageWithNewTopics``). Monotonic within one coordinator."""

    def __init__(self, clock) -> None:
        self.clock = clock
        self._seen: frozenset = frozenset()
        self.last_with_new_topics = -1

    def observe(self, image) -> int:
        """The version of ``image``: the last version with new topics, moved on if ``image``
        holds topic ids not seen before."""
        ids = frozenset(image.topic_ids)
        if not ids <= self._seen:
            self.last_with_new_topics = max(self.last_with_new_topics + 1, self.clock.milliseconds())
        self._seen = ids
        return self.last_with_new_topics


def subscribed_regexes(members: Iterable[ConsumerGroupMember]) -> dict[str, int]:
    """regex -> the number of ``members`` subscribed to it."""
    counts: dict[str, int] = {}
    for m in members:
        if m.subscribed_topic_regex:
            counts[m.subscribed_topic_regex] = counts.get(m.subscribed_topic_regex, 0) + 1
    return counts


def member_topics(group: ConsumerGroup, member: ConsumerGroupMember) -> set[str]:
    """The topic names ``member`` subscribes to: its names and its regex's resolved topics."""
    names = set(member.subscribed_topic_names)
    resolved = group.resolved_regexes.get(member.subscribed_topic_regex or "")
    if resolved is not None:
        names |= resolved.topics
    return names


def update_regexes(group: ConsumerGroup, old: ConsumerGroupMember | None, new: ConsumerGroupMember | None,
                   records: list) -> tuple[bool, bool]:
    """Kafka's regex half of ``maybeUpdateRegularExpressions`` for one member changing from
    ``old`` to ``new`` (None: absent): ``(bump the group epoch, a refresh is required)``. A
    regex left by its last subscriber gets its tombstone in ``records``; a regex new to the
    group is compiled (InvalidRegex) and requires a refresh; one already resolved bumps."""
    old_regex = old.subscribed_topic_regex if old is not None else None
    new_regex = new.subscribed_topic_regex if new is not None else None
    if old_regex == new_regex:
        return False, False
    counts = subscribed_regexes(group.members.values())
    if old_regex and counts.get(old_regex, 0) <= 1 and old_regex in group.resolved_regexes:
        records.append(RegularExpressionRecord(group.group_id, old_regex, None))
    if not new_regex:
        return False, False
    if counts.get(new_regex, 0) == 0:
        subscription_metadata.compile_regex(new_regex)
        return False, True
    return new_regex in group.resolved_regexes, False


def refresh_due(group: ConsumerGroup, members_after: dict, version: int, now_ms: int, required: bool) -> bool:
    """Kafka's batching conditions: the group (after this change) subscribes to regexes, the
    last resolution is older than 10 s, and a regex is unresolved or new topics appeared
    since the last resolution (``version``: the metadata version now). The caller checks
    that no refresh is scheduled already."""
    regexes = set(subscribed_regexes(members_after.values()))
    if not regexes:
        return False
    resolved = group.resolved_regexes
    if resolved:
        last_refresh = max(r.timestamp for r in resolved.values())
        if now_ms <= last_refresh + REGEX_BATCH_REFRESH_MIN_INTERVAL_MS:
            return False
    required = required or bool(regexes - set(resolved))
    if resolved and min(r.version for r in resolved.values()) < version:
        required = True
    return required


def resolve(regexes: Iterable[str], image, version: int, now_ms: int,
            describable: Callable[[str], bool] | None) -> dict[str, ResolvedRegularExpression]:
    """Kafka's ``refreshRegularExpressions``: each regex's matching topics of ``image`` that
    ``describable`` allows (None: all). A regex that no longer compiles resolves to nothing
    (it was checked when a member brought it)."""
    patterns = {}
    for regex in regexes:
        try:
            patterns[regex] = subscription_metadata.compile_regex(regex)
        except InvalidRegex as e:
            log.error("cannot resolve regular expression %r: %s", regex, e)
    matched: dict[str, set[str]] = {regex: set() for regex in regexes}
    for name in image.topics:
        if name.startswith("__"):
            continue
        for regex, pattern in patterns.items():
            if pattern.fullmatch(name):
                matched[regex].add(name)
    if describable is not None:
        allowed = {name: describable(name) for names in matched.values() for name in names}
        matched = {regex: {n for n in names if allowed[n]} for regex, names in matched.items()}
    return {regex: ResolvedRegularExpression(frozenset(names), version, now_ms) for regex, names in matched.items()}
