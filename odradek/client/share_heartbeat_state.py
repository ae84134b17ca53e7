"""A member of a KIP-932 share group, from its own side: the heartbeat state machine.

Sans-I/O, in the shape of Kafka's ``ShareMembershipManager`` and
``ShareHeartbeatRequestManager.HeartbeatState``. The asyncio edge (``share_consumer``) asks it
for the next ShareGroupHeartbeat (API 76, v1) request, feeds it the answers, and reads the
assignment it holds; time comes in as a number (loop time, seconds).

States::

    UNSUBSCRIBED --subscribe--> JOINING --answer--> STABLE
    JOINING/STABLE --FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID--> JOINING, epoch 0, nothing assigned
    JOINING/STABLE --leave--> LEAVING --leave sent--> UNSUBSCRIBED
    any --fatal error--> FATAL

Unlike a KIP-848 consumer, a share member does not acknowledge its assignment: several
members may read one partition at once (the share partition hands each record to one of them),
so there is nothing to revoke before another member takes a partition. The assignment
(topic id → partitions) of the last answer that carried one is the member's at once.

Identity: the member makes its own member id (``consumer_heartbeat_state.generate_member_id``,
Kafka's ``Uuid.randomUuid().toString()``) and keeps it for its life, across fencing. It joins
with epoch 0 and leaves with -1 (share groups have no static members).

Requests carry the subscribed topic names (and the rack) when joining, after an error or a
failed attempt (the coordinator may not have seen the last one), and when the subscription
changed; otherwise those fields are null ("unchanged"), as Kafka's ``SentFields``.

Invariants: ``member_epoch`` is 0 while JOINING, -1 only while LEAVING; ``assignment`` is
empty unless the member is in the group; at most one request is in flight.
"""

from __future__ import annotations

import uuid

from odradek.client.consumer_heartbeat_state import generate_member_id
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.share_group_heartbeat_request import ShareGroupHeartbeatRequest

__all__ = [
    "FATAL", "JOINING", "LEAVE_GROUP_MEMBER_EPOCH", "LEAVING", "STABLE", "UNSUBSCRIBED",
    "ShareHeartbeatState",
]

UNSUBSCRIBED, JOINING, STABLE, LEAVING, FATAL = "UNSUBSCRIBED", "JOINING", "STABLE", "LEAVING", "FATAL"
LEAVE_GROUP_MEMBER_EPOCH = -1  # ShareGroupHeartbeatRequest.LEAVE_GROUP_MEMBER_EPOCH

_IN_GROUP = frozenset({JOINING, STABLE})
_REDISCOVER = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
_FENCING = frozenset({ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID})

Assignment = dict[uuid.UUID, frozenset[int]]  # topic id -> partitions (no empty sets)


class ShareHeartbeatState:
    def __init__(self, group_id: str, *, rack_id: str | None = None, member_id: str | None = None,
                 retry_backoff_ms: int = 100) -> None:
        self.group_id = group_id
        self.member_id = member_id or generate_member_id()
        self.member_epoch = 0
        self.rack_id = rack_id
        self.retry_backoff = retry_backoff_ms / 1000
        self.state = UNSUBSCRIBED
        self.topics: frozenset[str] = frozenset()
        self.heartbeat_interval_ms = 0  # from the last answer; 0 before one
        self.assignment: Assignment = {}
        self.assignment_changes = 0  # counts assignments taken, so the edge sees a new one
        self.fatal: tuple[int, str | None] | None = None  # (error code, message) once FATAL
        self._sent_topics: frozenset[str] | None = None  # None: the next request sends them
        self._next_at = 0.0
        self._in_flight = False

    # --- what the application does ---------------------------------------------------------
    def subscribe(self, topics) -> None:
        """Set the subscribed topic names; a member not in the group joins. A member in the
        group sends the new names with its next heartbeat, which is due at once."""
        self.topics = frozenset(topics)
        if self.state in (UNSUBSCRIBED, LEAVING):
            self._join()
        self._next_at = 0.0

    def leave(self) -> None:
        """Leave the group: the next request carries epoch -1, then the member is UNSUBSCRIBED."""
        self._set_assignment({})
        if self.state not in _IN_GROUP:
            if self.state != FATAL:
                self.state = UNSUBSCRIBED
            return
        self.member_epoch = LEAVE_GROUP_MEMBER_EPOCH
        self.state = LEAVING
        self._next_at = 0.0

    def left(self) -> None:
        """The leave request was sent, or given up (no coordinator): the member is out."""
        self._in_flight = False
        if self.state == LEAVING:
            self.state = UNSUBSCRIBED
            self.member_epoch = 0

    def _join(self) -> None:
        self.state = JOINING
        self.member_epoch = 0
        self._set_assignment({})
        self._sent_topics = None
        self._next_at = 0.0

    def _set_assignment(self, assignment: Assignment) -> None:
        if assignment != self.assignment:
            self.assignment = assignment
            self.assignment_changes += 1

    # --- requests --------------------------------------------------------------------------
    def next_heartbeat_at(self) -> float | None:
        """When the next request is due (loop time; may be past); None when none is to be
        sent now (not a member, fatal, or one in flight)."""
        if self._in_flight or (self.state not in _IN_GROUP and self.state != LEAVING):
            return None
        return self._next_at

    def build_request(self) -> ShareGroupHeartbeatRequest:
        """The next request; counts it in flight."""
        request = ShareGroupHeartbeatRequest(group_id=self.group_id, member_id=self.member_id,
                                             member_epoch=self.member_epoch)
        if self.state != LEAVING:
            if self.state == JOINING or self._sent_topics != self.topics:
                request.subscribed_topic_names = sorted(self.topics)
                request.rack_id = self.rack_id
                self._sent_topics = self.topics
        self._in_flight = True
        return request

    # --- answers ---------------------------------------------------------------------------
    def on_response(self, response, now: float) -> str | None:
        """Take an answer to the request in flight. Returns what the edge must do:
        "rediscover" (find the coordinator again), "fenced" (the assignment is gone; the
        member rejoins at once), "fatal" (raise ``fatal`` from poll), or None."""
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
        self.state = STABLE
        if response.assignment is not None:
            self._set_assignment({tp.topic_id: frozenset(tp.partitions)
                                  for tp in response.assignment.topic_partitions if tp.partitions})
        return None

    def on_failure(self, now: float, *, rediscover: bool = False) -> None:
        """The request got no answer (connection lost, timed out, coordinator unknown): send
        every field again after the retry backoff (at once when the coordinator moved)."""
        self._in_flight = False
        self._sent_topics = None
        self._next_at = now if rediscover else now + self.retry_backoff

    def _on_error(self, code: int, message: str | None, now: float) -> str | None:
        self._sent_topics = None
        if code in _REDISCOVER:
            self._next_at = now
            return "rediscover"
        if code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            self._next_at = now + self.retry_backoff
            return None
        if code in _FENCING:
            if self.state not in _IN_GROUP:
                return None  # already left: no rejoin
            self._join()
            return "fenced"
        self.state = FATAL
        self._set_assignment({})
        self.fatal = (code, message)
        return "fatal"
