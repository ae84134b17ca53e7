"""Where a follower truncates its log before fetching from a new leader (KIP-101, KIP-279).

Plain functions over values, Kafka's ``AbstractFetcherThread.getOffsetTruncationState``:

1. ``epoch_to_ask(cache)``: the follower asks the leader (OffsetForLeaderEpoch) where its own
   latest epoch ends. A follower without epochs (an empty log) cannot ask: it truncates to its
   high watermark instead, as before KIP-101.
2. The leader answers ``(epoch, end_offset)`` from its cache (``Log.end_offset_for_epoch``):
   the largest epoch it has at or below the one asked, and where that epoch ends in its log.
3. ``offset_to_truncate_to``: the follower truncates to

   - its high watermark when the leader knows no such epoch (``UNDEFINED_EPOCH_OFFSET``: an
     empty leader cache);
   - ``min(end_offset, follower LEO)`` when the answer has no epoch (a protocol without
     epochs in the answer);
   - when the follower also has the answered epoch: the lesser of where that epoch ends in
     the two logs (and its LEO). Below that the logs agree: every offset there was written
     in an epoch both have, by the leader of that epoch, and copied verbatim;
   - when the follower does not have it: the end, in its own log, of its largest epoch
     below the answered one, *not complete*: the follower asks again with its new latest
     epoch (KIP-279: the leader may have moved on through epochs the follower never saw);
   - when every epoch of the follower is above the answered one, its cache answers with the
     answered epoch ending where its first entry starts (``end_offset_for``), so the rule
     above truncates to the lesser of that, ``end_offset`` and its LEO; a follower with no
     epoch at all (it asked none: only when called anyway) to ``min(end_offset, LEO)``.

Worked example (KIP-279's fast leader change): A and B both hold epoch 1 to offset 5. B
leads epoch 2, appends offsets 5 and 6 and dies before A copied them; A leads epoch 3 and
appends 5, 6 and 7; B comes back as a follower. B asks for epoch 2; A has no epoch 2 and
answers (1, 5). B has epoch 1 and it ends at 5 in B's log too: B truncates to 5, complete,
and fetches A's 5, 6 and 7.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.storage.leader_epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """The leader's answer for one partition: ``end_offset`` is where ``leader_epoch`` (the
    largest it has at or below the one asked) ends in its log."""

    leader_epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class OffsetTruncationState:
    """Kafka's ``OffsetTruncationState``: truncate to ``offset``; when not ``completed``, ask
    the leader again (with the epoch cache as it is after truncating) before fetching."""

    offset: int
    completed: bool


def epoch_to_ask(cache) -> int | None:
    """The epoch a follower asks the leader about (its latest), or None when it has none and
    truncates to its high watermark instead (``truncate_to_high_watermark``)."""
    return cache.latest_epoch


def truncate_to_high_watermark(high_watermark: int) -> OffsetTruncationState:
    """A follower without epochs truncates to its high watermark (pre-KIP-101)."""
    return OffsetTruncationState(high_watermark, True)


def offset_to_truncate_to(leader: EpochEndOffset, cache, log_end_offset: int,
                          high_watermark: int) -> OffsetTruncationState:
    """Where the follower whose epochs are ``cache`` (a ``LeaderEpochFileCache``), with
    ``log_end_offset`` and ``high_watermark``, truncates given the leader's answer (see the
    module docstring for the rules)."""
    if leader.end_offset == UNDEFINED_EPOCH_OFFSET:
        return OffsetTruncationState(high_watermark, True)
    if leader.leader_epoch == UNDEFINED_EPOCH:
        return OffsetTruncationState(min(leader.end_offset, log_end_offset), True)
    follower_epoch, follower_end = cache.end_offset_for(leader.leader_epoch, log_end_offset)
    if follower_end == UNDEFINED_EPOCH_OFFSET:
        # The follower tracks no epoch at all.
        return OffsetTruncationState(min(leader.end_offset, log_end_offset), True)
    if follower_epoch != leader.leader_epoch:
        return OffsetTruncationState(min(follower_end, log_end_offset), False)
    return OffsetTruncationState(min(follower_end, leader.end_offset, log_end_offset), True)
