"""A member of a KIP-848 consumer group, from its own side: the heartbeat state machine.

Sans-I/O, in the shape of Kafka's ``ConsumerMembershipManager`` (states and transitions) and
``ConsumerHeartbeatRequestManager.HeartbeatState`` (which fields a request carries). The
asyncio edge (``consumer_group_membership``) asks it for the next ConsumerGroupHeartbeat
(API 68) request, feeds it the answers, and runs the reconciliations it calls for; time comes
in as a number (loop time, seconds).

States (Kafka's ``MemberState``)::

    UNSUBSCRIBED --subscribe--> JOINING --assignment--> RECONCILING --reconciled--> ACKNOWLEDGING
        --ack sent--> STABLE (or RECONCILING when a newer target came meanwhile)
    any member state --FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID--> FENCED
        --partitions released (lost)--> JOINING, epoch 0
    member --leave--> LEAVING --leave sent--> UNSUBSCRIBED (STALE when max.poll.interval.ms expired)
    STALE --released, polled again--> JOINING;   any --fatal error--> FATAL

Identity: the member makes its own member id (KIP-1082, Kafka 4's ``Uuid.randomUuid()``):
16 random bytes as URL-safe base64 without padding, 22 characters, never starting with
``-`` (it would read as a command-line option). It keeps it for its whole life, across fencing
and rejoining. It joins with epoch 0, leaves with -1, or -2 when static (``group.instance.id``:
it will come back, so the coordinator keeps its assignment for the session timeout).

Requests send only what changed since the last one the coordinator took (Kafka's
``SentFields``): every field while JOINING, and after any error or failed attempt (the
coordinator may not have seen the last one). The owned partitions (topic id → partitions) go
out when they changed: the first request after a reconciliation acknowledges it, and that
request is due at once.

Invariants: ``owned`` is only changed by ``reconciled`` (the edge applied it), ``release``
(after fencing, staleness or a leave); ``member_epoch`` is 0 in JOINING and FENCED, negative
only in LEAVING; at most one request is in flight.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from odradek.protocol.generated.consumer_group_heartbeat_request import (
    ConsumerGroupHeartbeatRequest,
    TopicPartitions,
)
from odradek.protocol.generated.error_codes import ErrorCode

__all__ = [
    "ACKNOWLEDGING", "FATAL", "FENCED", "JOINING", "LEAVE_GROUP_MEMBER_EPOCH",
    "LEAVE_GROUP_STATIC_MEMBER_EPOCH", "LEAVING", "RECONCILING", "STABLE", "STALE", "UNSUBSCRIBED",
    "ConsumerHeartbeatState", "Subscription", "generate_member_id",
]

UNSUBSCRIBED, JOINING, RECONCILING, ACKNOWLEDGING, STABLE = "UNSUBSCRIBED", "JOINING", "RECONCILING", "ACKNOWLEDGING", "STABLE"
FENCED, LEAVING, STALE, FATAL = "FENCED", "LEAVING", "STALE", "FATAL"
LEAVE_GROUP_MEMBER_EPOCH = -1  # ConsumerGroupHeartbeatRequest.LEAVE_GROUP_MEMBER_EPOCH
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2  # ... LEAVE_GROUP_STATIC_MEMBER_EPOCH

_IN_GROUP = frozenset({JOINING, RECONCILING, ACKNOWLEDGING, STABLE})
_REDISCOVER = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
_FENCING = frozenset({ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID})

Assignment = Mapping[uuid.UUID, frozenset[int]]  # topic id -> partitions (no empty sets)


def generate_member_id() -> str:
    """A new member id: Kafka's ``Uuid.toString()`` of a random UUID (see the module doc)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


@dataclass(frozen=True, slots=True)
class Subscription:
    """Topic names, or a regex the coordinator matches (SubscribedTopicRegex, v1+)."""
    topics: frozenset[str] = frozenset()
    regex: str | None = None


@dataclass(slots=True)
class _SentFields:
    """What the last request carried of the fields sent only on change (None: not sent)."""
    rebalance_timeout_ms: int | None = None
    topics: frozenset[str] | None = None
    regex: str | None = None
    server_assignor: str | None = None
    owned: dict | None = None


def _normalized(assignment) -> dict[uuid.UUID, frozenset[int]]:
    return {t: frozenset(ps) for t, ps in assignment.items() if ps}


class ConsumerHeartbeatState:
    def __init__(self, group_id: str, *, rebalance_timeout_ms: int, instance_id: str | None = None,
                 server_assignor: str | None = None, member_id: str | None = None,
                 retry_backoff_ms: int = 100) -> None:
        self.group_id = group_id
        self.member_id = member_id or generate_member_id()
        self.member_epoch = 0
        self.instance_id = instance_id
        self.server_assignor = server_assignor
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.retry_backoff = retry_backoff_ms / 1000
        self.state = UNSUBSCRIBED
        self.subscription: Subscription | None = None
        self.heartbeat_interval_ms = 0  # from the last answer; 0 before one
        self.owned: dict[uuid.UUID, frozenset[int]] = {}  # reconciled: what the member reads
        self.target: dict[uuid.UUID, frozenset[int]] | None = None  # last assignment received
        self.fatal: tuple[int, str | None] | None = None  # (error code, message) once FATAL
        self.joins = 0  # counts joins: a reconciliation started before a rejoin is void
        self._sent = _SentFields()
        self._next_at = 0.0
        self._in_flight = False
        self._stale_after_leave = False

    # --- what the application does ---------------------------------------------------------
    def subscribe(self, subscription: Subscription) -> None:
        """Set the subscription; a member not in the group joins. A member in the group sends
        the new subscription with its next heartbeat, which is due at once."""
        self.subscription = subscription
        if self.state == UNSUBSCRIBED:
            self._join()
        self._next_at = 0.0

    def leave(self) -> None:
        """Leave the group (the edge has released the partitions): the next request carries
        epoch -1 (-2 for a static member), then the member is UNSUBSCRIBED."""
        if self.state not in _IN_GROUP:
            self.state = UNSUBSCRIBED
            return
        self.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH if self.instance_id else LEAVE_GROUP_MEMBER_EPOCH
        self.owned = {}
        self.target = None
        self.state = LEAVING
        self._stale_after_leave = False
        self._next_at = 0.0

    def poll_timer_expired(self) -> None:
        """max.poll.interval.ms passed without a poll: leave, and stay STALE (no heartbeats,
        partitions kept until released as lost) until polled again."""
        if self.state in _IN_GROUP:
            epoch_static = self.instance_id is not None
            self.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH if epoch_static else LEAVE_GROUP_MEMBER_EPOCH
            self.target = None
            self.state = LEAVING
            self._stale_after_leave = True
            self._next_at = 0.0

    def release(self) -> None:
        """The edge released every owned partition (as lost after FENCED or STALE): a fenced
        member rejoins at epoch 0 with the same member id; a stale one waits for ``rejoin``."""
        self.owned = {}
        if self.state == FENCED:
            self._join()

    def left(self) -> None:
        """The leave request was sent, or given up (no coordinator): the member is out."""
        if self.state == LEAVING:
            self.state = UNSUBSCRIBED
        self._in_flight = False

    def rejoin(self) -> None:
        """A STALE member was polled again: join at epoch 0."""
        if self.state == STALE:
            self._join()

    def _join(self) -> None:
        self.state = JOINING
        self.member_epoch = 0
        self.target = None
        self.joins += 1
        self._sent = _SentFields()
        self._next_at = 0.0

    # --- requests --------------------------------------------------------------------------
    def next_heartbeat_at(self) -> float | None:
        """When the next request is due (loop time; may be past); None when none is to be
        sent now (not a member, fenced, stale, fatal, or one in flight)."""
        if self._in_flight or (self.state not in _IN_GROUP and self.state != LEAVING):
            return None
        return self._next_at

    def build_request(self, now: float, version: int) -> ConsumerGroupHeartbeatRequest:
        """The next request (``version`` of API 68); counts it in flight. A leave or an
        acknowledgement is done once generated (Kafka's ``onHeartbeatRequestGenerated``)."""
        full = self.state == JOINING
        sent = self._sent
        request = ConsumerGroupHeartbeatRequest(group_id=self.group_id, member_id=self.member_id,
                                                member_epoch=self.member_epoch, instance_id=self.instance_id)
        if self.state != LEAVING:
            if full or sent.rebalance_timeout_ms != self.rebalance_timeout_ms:
                request.rebalance_timeout_ms = sent.rebalance_timeout_ms = self.rebalance_timeout_ms
            self._subscription_fields(request, full, version)
            if self.server_assignor is not None and (full or sent.server_assignor != self.server_assignor):
                request.server_assignor = sent.server_assignor = self.server_assignor
            if full or sent.owned != self.owned:
                request.topic_partitions = [TopicPartitions(t, sorted(ps)) for t, ps in sorted(self.owned.items())]
                sent.owned = dict(self.owned)
        self._in_flight = True
        self._request_generated()
        return request

    def _subscription_fields(self, request: ConsumerGroupHeartbeatRequest, full: bool, version: int) -> None:
        """Names or regex, when changed; switching from one to the other clears the old one
        (an empty list, an empty regex), as Kafka's client does."""
        sent, sub = self._sent, self.subscription or Subscription()
        if sub.regex is not None and version >= 1:
            if full or sent.regex != sub.regex:
                request.subscribed_topic_regex = sent.regex = sub.regex
                if sent.topics:
                    request.subscribed_topic_names = []
                sent.topics = frozenset()
            return
        if full or sent.topics != sub.topics:
            request.subscribed_topic_names = sorted(sub.topics)
            sent.topics = sub.topics
            if sent.regex and version >= 1:
                request.subscribed_topic_regex = ""
            sent.regex = None

    def _request_generated(self) -> None:
        if self.state == ACKNOWLEDGING:
            self.state = STABLE if self.target == self.owned else RECONCILING
        elif self.state == LEAVING:
            self.state = STALE if self._stale_after_leave else UNSUBSCRIBED
            self.member_epoch = 0 if self.state == STALE else self.member_epoch

    # --- answers ---------------------------------------------------------------------------
    def on_response(self, response, now: float) -> str | None:
        """Take an answer to the request in flight. Returns what the edge must do:
        "rediscover" (find the coordinator again), "fenced" (release the partitions as lost,
        then ``release``), "fatal" (raise ``fatal`` from poll), or None."""
        self._in_flight = False
        code = response.error_code
        if code != ErrorCode.NONE:
            return self._on_error(code, response.error_message, now)
        if self.state not in _IN_GROUP:
            return None  # an answer to a leave, or to a member that has left since
        if response.member_id:
            self.member_id = response.member_id
        self.member_epoch = response.member_epoch
        self.heartbeat_interval_ms = response.heartbeat_interval_ms
        self._next_at = now + response.heartbeat_interval_ms / 1000
        if response.assignment is not None:
            self.target = _normalized({tp.topic_id: tp.partitions for tp in response.assignment.topic_partitions})
            if self.target != self.owned:
                self.state = RECONCILING
            elif self.state in (JOINING, RECONCILING):
                self.state = STABLE
        return None

    def on_failure(self, now: float, *, rediscover: bool = False) -> None:
        """The request got no answer (connection lost, timed out, coordinator unknown): send
        every field again after the retry backoff (at once when the coordinator moved)."""
        self._in_flight = False
        self._sent = _SentFields()
        self._next_at = now if rediscover else now + self.retry_backoff

    def _on_error(self, code: int, message: str | None, now: float) -> str | None:
        self._sent = _SentFields()
        if code in _REDISCOVER:
            self._next_at = now
            return "rediscover"
        if code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            self._next_at = now + self.retry_backoff
            return None
        if code in _FENCING:
            if self.state not in _IN_GROUP:
                return None  # already left: no rejoin
            self.state = FENCED
            self.member_epoch = 0
            self.target = None
            self._next_at = now
            return "fenced"
        self.state = FATAL
        self.fatal = (code, message)
        return "fatal"

    # --- reconciliation --------------------------------------------------------------------
    def pending_reconciliation(self) -> tuple[int, dict[uuid.UUID, frozenset[int]]] | None:
        """``(joins, target)`` to reconcile when RECONCILING, else None. The edge revokes
        what ``owned`` has beyond it, assigns the rest, then calls ``reconciled``."""
        if self.state != RECONCILING or self.target is None:
            return None
        return self.joins, dict(self.target)

    def reconciled(self, joins: int, assignment: Assignment) -> bool:
        """The edge applied ``assignment`` (the resolvable part of a target). Unless the
        member rejoined, left or was fenced meanwhile it now owns it and acknowledges at once
        (also when a newer target came during the reconciliation: the member acknowledges
        what it reads, then reconciles again); returns whether it was taken."""
        if self.state not in (RECONCILING, ACKNOWLEDGING, STABLE) or joins != self.joins:
            return False
        self.owned = _normalized(assignment)
        self.state = ACKNOWLEDGING
        self._next_at = 0.0
        return True
