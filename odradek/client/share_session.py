"""The client side of one share session (KIP-932): a share consumer and one partition leader.

Sans-I/O, as Kafka's ``ShareSessionHandler`` and librdkafka's per-broker share fetch session.
A share consumer keeps one session per leader it fetches from; the session remembers which of
that leader's share partitions the member fetches, so a request names only what changed.

Epochs (``ShareSessionEpoch``, Kafka's ``ShareRequestMetadata``)::

    0 (INITIAL) --answer--> 1 --answer--> 2 ... 2**31-1 --answer--> 1
    any --SHARE_SESSION_NOT_FOUND / INVALID_SHARE_SESSION_EPOCH / SHARE_SESSION_LIMIT_REACHED,
          or no answer--> 0 (a new session: every partition named again)
    any --close--> -1 (FINAL: the leader forgets the session and releases what the member
          still holds acquired)

Requests (one in flight at a time: the epoch orders them):

- ShareFetch (78): at epoch 0 it names every wanted partition and carries no acknowledgements
  (there is no session to acknowledge in: the leader would refuse them, so they fail here
  with INVALID_SHARE_SESSION_EPOCH, as librdkafka does); later it names the partitions added
  since the last answer and the ones with acknowledgements to piggy-back, and lists in
  ``ForgottenTopicsData`` the ones no longer wanted.
- ShareAcknowledge (79): the pending acknowledgements alone (a commit, or acknowledgements
  for a partition about to be forgotten, which must not ride on the request that forgets it);
  never at epoch 0 for the same reason.
- Close: ShareAcknowledge at epoch -1 with the last acknowledgements; after it the session is
  gone (a later fetch starts again at epoch 0).

Both answers move the epoch on; an error of the whole request resets the session. What a
request carried stays ``in_flight`` until its answer, so a failure hands its acknowledgements
back to the edge (for the commit callback) rather than losing them silently.

Invariants: ``partitions`` is what the leader holds in the session (empty at epoch 0);
acknowledgements are in ``pending`` or in flight, never both for one request.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from odradek.client.share_acknowledgements import Acknowledgements, TopicIdPartition
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.share_acknowledge_request import (
    AcknowledgePartition,
    AcknowledgeTopic,
    ShareAcknowledgeRequest,
)
from odradek.protocol.generated.share_acknowledge_request import AcknowledgementBatch as AckBatch
from odradek.protocol.generated.share_fetch_request import (
    AcknowledgementBatch,
    FetchPartition,
    FetchTopic,
    ForgottenTopic,
    ShareFetchRequest,
)

__all__ = ["FINAL_EPOCH", "INITIAL_EPOCH", "FetchParams", "ShareSession", "SentRequest", "next_epoch"]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1
_SESSION_LOST = frozenset({ErrorCode.SHARE_SESSION_NOT_FOUND, ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                           ErrorCode.SHARE_SESSION_LIMIT_REACHED})


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch``: wraps from 2**31-1 to 1 (0 is only a new session)."""
    if epoch < 0:
        return epoch
    return 1 if epoch == _MAX_EPOCH else epoch + 1


@dataclass(frozen=True, slots=True)
class FetchParams:
    """The ShareFetch limits (Kafka's fetch.max.wait.ms, fetch.min.bytes, fetch.max.bytes,
    max.poll.records, max.partition.fetch.bytes)."""
    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 52_428_800
    max_records: int = 500
    partition_max_bytes: int = 1_048_576


@dataclass(slots=True)
class SentRequest:
    """A request built by the session: its kind ("fetch", "acknowledge", "close"), the body,
    the acknowledgements it carries, those that failed before it left (epoch 0), and what it
    adds to and forgets from the session."""
    kind: str
    request: object
    acks: dict[TopicIdPartition, Acknowledgements] = field(default_factory=dict)
    failed_acks: dict[TopicIdPartition, Acknowledgements] = field(default_factory=dict)
    added: frozenset[TopicIdPartition] = frozenset()
    forgotten: frozenset[TopicIdPartition] = frozenset()


class ShareSession:
    def __init__(self, node_id: int, group_id: str, member_id: str) -> None:
        self.node_id = node_id
        self.group_id = group_id
        self.member_id = member_id
        self.epoch = INITIAL_EPOCH
        self.partitions: set[TopicIdPartition] = set()  # in the session, as the leader has it
        self.wanted: set[TopicIdPartition] = set()  # what the member fetches from this leader
        self.pending: dict[TopicIdPartition, Acknowledgements] = {}
        self.in_flight: SentRequest | None = None

    # --- what the edge does -----------------------------------------------------------------
    def set_wanted(self, partitions) -> None:
        """The partitions the member fetches from this leader from now on."""
        self.wanted = set(partitions)

    def acknowledge(self, tip: TopicIdPartition, acks: Acknowledgements) -> None:
        """Add acknowledgements to send with the next request."""
        have = self.pending.get(tip)
        if have is None:
            self.pending[tip] = Acknowledgements()
            have = self.pending[tip]
        have.merge(acks)

    @property
    def has_pending(self) -> bool:
        return any(self.pending.values())

    @property
    def open(self) -> bool:
        """Whether the leader holds a session of this member (an answer came since epoch 0)."""
        return self.epoch > 0

    def next_request(self, params: FetchParams, *, fetch: bool) -> SentRequest | None:
        """The request to send now, or None (one in flight, or nothing to say). ``fetch``: the
        member wants records from this leader now. Acknowledgements for partitions no longer
        wanted go first by themselves (ShareAcknowledge); then a ShareFetch when fetching or
        partitions must be forgotten, else a ShareAcknowledge when acknowledgements wait."""
        if self.in_flight is not None:
            return None
        leaving = {tip for tip, acks in self.pending.items() if acks and tip not in self.wanted}
        if leaving:
            return self._acknowledge({tip: self.pending.pop(tip) for tip in leaving})
        if fetch and self.wanted or (self.open and self.partitions - self.wanted):
            return self._fetch(params)
        if self.has_pending:
            return self.build_acknowledge()
        return None

    def build_acknowledge(self) -> SentRequest | None:
        """A ShareAcknowledge of every pending acknowledgement (a commit); None when one is in
        flight or nothing waits. At epoch 0 they fail at once (``failed_acks``, no request)."""
        if self.in_flight is not None or not self.has_pending:
            return None
        acks, self.pending = {t: a for t, a in self.pending.items() if a}, {}
        return self._acknowledge(acks)

    def build_close(self) -> SentRequest | None:
        """The closing ShareAcknowledge (epoch -1) with the last acknowledgements; None when
        the leader holds no session (the acknowledgements then fail: ``take_pending``)."""
        if self.in_flight is not None or not self.open:
            return None
        acks, self.pending = {t: a for t, a in self.pending.items() if a}, {}
        request = ShareAcknowledgeRequest(group_id=self.group_id, member_id=self.member_id,
                                          share_session_epoch=FINAL_EPOCH, topics=_ack_topics(acks))
        self.in_flight = SentRequest("close", request, acks=acks)
        return self.in_flight

    def take_pending(self) -> dict[TopicIdPartition, Acknowledgements]:
        """Remove and return the pending acknowledgements (that can no longer be sent)."""
        acks, self.pending = {t: a for t, a in self.pending.items() if a}, {}
        return acks

    def _acknowledge(self, acks: dict[TopicIdPartition, Acknowledgements]) -> SentRequest:
        if not self.open:
            return SentRequest("acknowledge", None, failed_acks=acks)
        request = ShareAcknowledgeRequest(group_id=self.group_id, member_id=self.member_id,
                                          share_session_epoch=self.epoch, topics=_ack_topics(acks))
        self.in_flight = SentRequest("acknowledge", request, acks=acks)
        return self.in_flight

    def _fetch(self, params: FetchParams) -> SentRequest:
        failed: dict[TopicIdPartition, Acknowledgements] = {}
        acks: dict[TopicIdPartition, Acknowledgements] = {}
        if self.open:
            acks = {t: a for t, a in self.pending.items() if a and t in self.wanted}
            added = self.wanted - self.partitions
            forgotten = self.partitions - self.wanted
        else:
            failed = {t: a for t, a in self.pending.items() if a and t in self.wanted}
            added, forgotten = set(self.wanted), set()
        for tip in (*acks, *failed):
            del self.pending[tip]
        named = sorted(added | set(acks), key=_order)
        request = ShareFetchRequest(
            group_id=self.group_id, member_id=self.member_id, share_session_epoch=self.epoch,
            max_wait_ms=params.max_wait_ms, min_bytes=params.min_bytes, max_bytes=params.max_bytes,
            max_records=params.max_records, batch_size=params.max_records,
            topics=_fetch_topics(named, acks, params.partition_max_bytes),
            forgotten_topics_data=_forgotten(forgotten))
        self.in_flight = SentRequest("fetch", request, acks=acks, failed_acks=failed,
                                     added=frozenset(added), forgotten=frozenset(forgotten))
        return self.in_flight

    # --- answers ----------------------------------------------------------------------------
    def on_response(self, error_code: int) -> SentRequest:
        """The answer to the request in flight came with this top-level error code: on NONE
        the session moves to the next epoch (and takes the partitions added, drops the
        forgotten ones; a close ends it); a lost session resets to epoch 0. Returns what was
        in flight."""
        sent, self.in_flight = self.in_flight, None
        if sent.kind == "close":
            self._reset()
        elif error_code == ErrorCode.NONE:
            self.partitions = (self.partitions | sent.added) - sent.forgotten
            self.epoch = next_epoch(self.epoch)
        elif error_code in _SESSION_LOST:
            self._reset()
        return sent

    def on_failure(self) -> SentRequest | None:
        """The request in flight got no answer (connection broken, timed out): the leader's
        session is unknown, so start a new one. Returns what was in flight."""
        sent, self.in_flight = self.in_flight, None
        self._reset()
        return sent

    def _reset(self) -> None:
        self.epoch = INITIAL_EPOCH
        self.partitions = set()


def _order(tip: TopicIdPartition):
    return (tip.topic_id.bytes, tip.partition)


def _fetch_topics(named, acks, partition_max_bytes: int) -> list[FetchTopic]:
    topics: dict = {}
    for tip in named:
        batches = [AcknowledgementBatch(f, l, t) for f, l, t in acks[tip].batches()] if tip in acks else []
        topic = topics.setdefault(tip.topic_id, FetchTopic(topic_id=tip.topic_id, partitions=[]))
        topic.partitions.append(FetchPartition(partition_index=tip.partition, partition_max_bytes=partition_max_bytes,
                                               acknowledgement_batches=batches))
    return list(topics.values())


def _forgotten(partitions) -> list[ForgottenTopic]:
    topics: dict = {}
    for tip in sorted(partitions, key=_order):
        topics.setdefault(tip.topic_id, ForgottenTopic(topic_id=tip.topic_id, partitions=[])).partitions.append(tip.partition)
    return list(topics.values())


def _ack_topics(acks: dict[TopicIdPartition, Acknowledgements]) -> list[AcknowledgeTopic]:
    topics: dict = {}
    for tip in sorted(acks, key=_order):
        topic = topics.setdefault(tip.topic_id, AcknowledgeTopic(topic_id=tip.topic_id, partitions=[]))
        topic.partitions.append(AcknowledgePartition(
            partition_index=tip.partition,
            acknowledgement_batches=[AckBatch(f, l, t) for f, l, t in acks[tip].batches()]))
    return list(topics.values())
