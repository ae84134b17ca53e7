"""Share sessions (KIP-932; Kafka 4.2's ShareSessionCache, ShareSession and the epoch rules of
SharePartitionManager.newContext / acknowledgeSessionUpdate). Sans-I/O.

A share session is what a share consumer (group id, member id) fetches from this broker: the
set of share-partitions it named so far. Its epochs, as ShareFetch and ShareAcknowledge send
them (``ShareSessionEpoch``):

- ``0`` (INITIAL_EPOCH) opens a session with the request's partitions, replacing one the
  member may still hold here (its records are released: ``replaced``); the next request
  must carry epoch 1. A full cache (group.share.max.share.sessions, 2000) refuses a new
  session with SHARE_SESSION_LIMIT_REACHED. ShareAcknowledge at epoch 0 is
  INVALID_SHARE_SESSION_EPOCH (there is nothing to acknowledge in a session not yet open).
- ``n > 0`` continues the session: SHARE_SESSION_NOT_FOUND without one, and
  INVALID_SHARE_SESSION_EPOCH unless ``n`` is the epoch it expects; a ShareFetch adds its
  partitions and removes those in ForgottenTopicsData. Then the expected epoch becomes ``n + 1``
  (wrapping from 2^31-1 to 1, as Kafka's ShareRequestMetadata.nextEpoch).
- ``-1`` (FINAL_EPOCH) closes the session (SHARE_SESSION_NOT_FOUND without one): the caller
  releases what the member acquired in its partitions (``ShareSessionContext.closed``).

A refused request changes nothing. Partitions are ``(topic_id, partition)`` pairs kept in the
order they were added.

Connections (Kafka 4.2's ShareSessionCache.connectionDisconnectListener): each session records
the id of the client connection that opened it at epoch 0 (``Connection.connection_id``,
``server/connection.py``); later requests do not move it, as in Kafka, where only
maybeCreateSession records the connection. ``remove_connection(id)`` removes the sessions a
closed connection owns; a session reopened at epoch 0 on another connection (the member
reconnected) belongs to that one and stays, as Kafka marks the old connection's entry stale
when its session is replaced or closed. The caller releases the removed sessions' records,
as for epoch -1.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from uuid import UUID

from odradek.protocol.generated.error_codes import ErrorCode

__all__ = ["INITIAL_EPOCH", "FINAL_EPOCH", "ShareSession", "ShareSessionContext",
           "ShareSessionCache", "next_epoch"]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1

SharePartitionKey = tuple[UUID, int]


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= _MAX_EPOCH else epoch + 1


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int  # the epoch the next request must carry
    partitions: dict[SharePartitionKey, None] = field(default_factory=dict)  # ordered set
    connection_id: str | None = None  # the connection that owns it (None: not known)


@dataclass(frozen=True, slots=True)
class ShareSessionContext:
    """What a request did to the sessions. ``error``: NONE, or the request-level error (then
    nothing else is set). ``session``: the session after the request (None once closed).
    ``closed``: the session this request closed or replaced; the caller releases the
    member's records in its partitions. ``is_new``: epoch 0 opened the session."""

    error: ErrorCode
    session: ShareSession | None = None
    closed: ShareSession | None = None
    is_new: bool = False


class ShareSessionCache:
    def __init__(self, max_sessions: int = 2000) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[tuple[str, str], ShareSession] = {}
        # connection id -> keys of the sessions it owns; always matches session.connection_id
        self._by_connection: dict[str, set[tuple[str, str]]] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def sessions(self) -> list[ShareSession]:
        return list(self._sessions.values())

    def share_fetch(self, group_id: str, member_id: str, epoch: int,
                    added: Iterable[SharePartitionKey] = (),
                    forgotten: Iterable[SharePartitionKey] = (),
                    connection_id: str | None = None) -> ShareSessionContext:
        """ShareFetch's session rules (module docstring); ``connection_id``: the requesting
        connection, which owns a session this request opens (epoch 0)."""
        key = (group_id, member_id)
        old = self._sessions.get(key)
        if epoch == INITIAL_EPOCH:
            if old is None and len(self._sessions) >= self.max_sessions:
                return ShareSessionContext(ErrorCode.SHARE_SESSION_LIMIT_REACHED)
            session = ShareSession(group_id, member_id, next_epoch(epoch), dict.fromkeys(added))
            if old is not None:
                self._unbind(old)
            self._sessions[key] = session
            self._bind(session, connection_id)
            return ShareSessionContext(ErrorCode.NONE, session, closed=old, is_new=True)
        error = self._check(old, epoch)
        if error is not ErrorCode.NONE:
            return ShareSessionContext(error)
        if epoch == FINAL_EPOCH:
            self.remove(group_id, member_id)
            return ShareSessionContext(ErrorCode.NONE, None, closed=old)
        for tp in forgotten:
            old.partitions.pop(tp, None)
        for tp in added:
            old.partitions.setdefault(tp, None)
        old.epoch = next_epoch(epoch)
        return ShareSessionContext(ErrorCode.NONE, old)

    def share_acknowledge(self, group_id: str, member_id: str, epoch: int) -> ShareSessionContext:
        """ShareAcknowledge's session rules: epoch 0 is refused, -1 closes, n > 0 continues."""
        if epoch == INITIAL_EPOCH:
            return ShareSessionContext(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        return self.share_fetch(group_id, member_id, epoch)

    def remove(self, group_id: str, member_id: str) -> ShareSession | None:
        session = self._sessions.pop((group_id, member_id), None)
        if session is not None:
            self._unbind(session)
        return session

    def remove_connection(self, connection_id: str) -> list[ShareSession]:
        """Remove and return the sessions ``connection_id`` opened (it closed); a session the
        member has since reopened on another connection is kept."""
        keys = self._by_connection.pop(connection_id, ())
        removed = [self._sessions.pop(key) for key in keys]
        for session in removed:
            session.connection_id = None
        return removed

    def _bind(self, session: ShareSession, connection_id: str | None) -> None:
        if connection_id is None:
            return
        session.connection_id = connection_id
        self._by_connection.setdefault(connection_id, set()).add((session.group_id, session.member_id))

    def _unbind(self, session: ShareSession) -> None:
        owned = self._by_connection.get(session.connection_id) if session.connection_id is not None else None
        if owned is not None:
            owned.discard((session.group_id, session.member_id))
            if not owned:
                del self._by_connection[session.connection_id]
        session.connection_id = None

    @staticmethod
    def _check(session: ShareSession | None, epoch: int) -> ErrorCode:
        if session is None:
            return ErrorCode.SHARE_SESSION_NOT_FOUND
        if epoch != FINAL_EPOCH and epoch != session.epoch:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH
        return ErrorCode.NONE
