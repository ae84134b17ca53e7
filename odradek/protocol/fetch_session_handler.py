"""``FetchSessionHandler``: the fetching side of a KIP-227 fetch session with one broker
(Kafka's ``org.apache.kafka.clients.FetchSessionHandler``), sans-I/O.

One implementation for both fetchers: a follower's ``replication/replica_fetcher.py`` and the
consumer's ``client/fetcher.py`` (one handler per broker). It lives in ``protocol/`` because
both may import it (``client/`` must not import broker packages); like ``protocol/scram.py``
it holds no sockets and no clock.

``build(topics)`` turns the full ``FetchTopic`` list the fetcher wants into the request to send:
- no session yet: all of it, with (``session_id``, epoch 0): 0 asks for a session, an old id
  closes that session on the leader and asks for a new one;
- a session: only the partitions added or whose request fields changed (fetch offset, log
  start offset, max bytes, leader epochs), and the ones no longer wanted as
  ``forgotten_topics_data``, at the session's next epoch.
The session's partitions are updated when the request is built; any failure sends a full
request next (``handle_response`` false, or ``handle_error``), so they cannot drift from the
leader's.

``handle_response`` (Kafka's ``handleResponse``): FETCH_SESSION_ID_NOT_FOUND starts over
with session 0; any other top-level error (INVALID_FETCH_SESSION_EPOCH,
FETCH_SESSION_TOPIC_ID_ERROR, ...) closes the session and asks for a new one; a response with
session id 0 means the leader keeps none (a full cache): the next request is full again.

``close`` (Kafka's ``notifyClose``, sent by the consumer's ``close``): the session's id at
epoch -1 (``FINAL_EPOCH``) with no partitions; the broker drops the session and answers
sessionless.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.fetch_request import ForgottenTopic, FetchTopic

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1


@dataclass(frozen=True, slots=True)
class SessionRequest:
    """What goes into the Fetch: ``topics`` and ``forgotten`` are those to send."""
    session_id: int
    epoch: int
    topics: list
    forgotten: list


def _fields(fp) -> tuple:
    return (fp.fetch_offset, fp.log_start_offset, fp.partition_max_bytes, fp.current_leader_epoch,
            fp.last_fetched_epoch)


class FetchSessionHandler:
    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        # (topic, topic id, partition) -> the request fields last sent, in the session.
        self._partitions: dict[tuple, tuple] = {}

    @property
    def full(self) -> bool:
        return self.epoch == INITIAL_EPOCH

    def build(self, topics: list[FetchTopic]) -> SessionRequest:
        wanted = {(ft.topic, ft.topic_id, fp.partition): (ft, fp) for ft in topics for fp in ft.partitions}
        previous, self._partitions = self._partitions, {k: _fields(fp) for k, (_, fp) in wanted.items()}
        if self.full:
            return SessionRequest(self.session_id, INITIAL_EPOCH, topics, [])
        changed: dict[tuple, FetchTopic] = {}
        for key, (ft, fp) in wanted.items():
            if previous.get(key) != _fields(fp):
                out = changed.setdefault(key[:2], FetchTopic(topic=ft.topic, topic_id=ft.topic_id, partitions=[]))
                out.partitions.append(fp)
        forgotten: dict[tuple, ForgottenTopic] = {}
        for key in previous.keys() - wanted.keys():
            out = forgotten.setdefault(key[:2], ForgottenTopic(topic=key[0], topic_id=key[1], partitions=[]))
            out.partitions.append(key[2])
        return SessionRequest(self.session_id, self.epoch, list(changed.values()), list(forgotten.values()))

    def handle_response(self, response) -> bool:
        """Move the session on after ``response``; False when the fetch failed as a whole."""
        if response.error_code != ErrorCode.NONE:
            if response.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self.session_id = INVALID_SESSION_ID
            self.epoch = INITIAL_EPOCH
            return False
        if response.session_id == INVALID_SESSION_ID:
            self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
        elif self.full:
            self.session_id, self.epoch = response.session_id, 1
        else:
            self.epoch = 1 if self.epoch == 2**31 - 1 else self.epoch + 1
        return True

    def close(self) -> SessionRequest | None:
        """The request that closes the session on the broker, or None when there is none to
        close (no session id). The handler is left sessionless: a later ``build`` is full and
        asks for a new session."""
        session_id = self.session_id
        self.session_id, self.epoch, self._partitions = INVALID_SESSION_ID, INITIAL_EPOCH, {}
        if session_id == INVALID_SESSION_ID:
            return None
        return SessionRequest(session_id, FINAL_EPOCH, [], [])

    def handle_error(self) -> None:
        """The request got no answer (a connection error): close the session, ask anew."""
        self.epoch = INITIAL_EPOCH
