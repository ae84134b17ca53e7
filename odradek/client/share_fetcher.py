"""Share fetching for a share consumer (KIP-932): the asyncio edge of ``share_session``.

As Kafka's ``ShareConsumeRequestManager``: the member's assigned share partitions are fetched
from their leaders, one ``ShareSession`` per leader, at most one request in flight per
session (the session epoch orders them). ``send`` starts a ShareFetch to every leader whose
last answer the application has taken (records are acquired for this member only while their
acquisition lock lasts, so the fetcher does not acquire more than the application is about to
get), carrying the acknowledgements made since as piggy-back; ``commit`` sends what waits with
ShareAcknowledge and waits for the answers; ``close`` ends every session with epoch -1.

Answers: the records inside the acquired ranges become ``ShareConsumerRecord``s
(``share_consumer_record``); acquired offsets without a record are acknowledged as GAP with
the next request. A partition answering NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH,
UNKNOWN_TOPIC_OR_PARTITION or UNKNOWN_TOPIC_ID refreshes the metadata (partitions follow their
leader to another session on the next ``send``).

Acknowledgement results: for every request that carried acknowledgements, ``AckResult``s
(partition, offsets, error or None) are queued in ``results`` for the consumer's commit
callback; acknowledgements that could not be sent (no session yet, the request failed) are
reported with their error as well.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import NamedTuple

from odradek.client.cluster import ClusterClient
from odradek.client.errors import BrokerError, KafkaError
from odradek.client.share_acknowledgements import Acknowledgements, TopicIdPartition
from odradek.client.share_consumer_record import ShareConsumerRecord, acquired_records
from odradek.client.share_session import FetchParams, SentRequest, ShareSession
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode

__all__ = ["AckResult", "ShareFetcher"]

_log = logging.getLogger("odradek.client.share_consumer")
_REFRESH = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH,
                      ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
                      ErrorCode.LEADER_NOT_AVAILABLE})


class AckResult(NamedTuple):
    """The outcome of one partition's acknowledgements: None, or the error."""
    partition: TopicIdPartition
    offsets: frozenset[int]
    error: KafkaError | None


class ShareFetcher:
    def __init__(self, cluster: ClusterClient, group_id: str, member_id: str, params: FetchParams) -> None:
        self.cluster = cluster
        self.group_id = group_id
        self.member_id = member_id
        self.params = params
        self.assignment: frozenset[TopicIdPartition] = frozenset()
        self.sessions: dict[int, ShareSession] = {}
        self.completed: deque[tuple[int, TopicIdPartition, list[ShareConsumerRecord]]] = deque()
        self.results: deque[AckResult] = deque()
        self.acquisition_lock_timeout_ms: int | None = None
        self._tasks: dict[int, asyncio.Task] = {}
        self._event = asyncio.Event()

    def session(self, node: int) -> ShareSession:
        session = self.sessions.get(node)
        if session is None:
            session = self.sessions[node] = ShareSession(node, self.group_id, self.member_id)
        return session

    def wake(self) -> None:
        self._event.set()

    async def wait(self, timeout: float) -> None:
        """Until an answer arrives (or ``wake``), at most ``timeout`` seconds."""
        if timeout <= 0:
            return
        self._event.clear()
        try:
            await asyncio.wait_for(self._event.wait(), timeout)
        except TimeoutError:
            pass

    # --- requests ---------------------------------------------------------------------------
    def acknowledge(self, node: int, tip: TopicIdPartition, acks: Acknowledgements) -> None:
        """Acknowledgements of records acquired through ``node``'s session."""
        if acks:
            self.session(node).acknowledge(tip, acks)

    def _route(self) -> None:
        """Give each session the assigned partitions its node leads now."""
        meta = self.cluster.metadata
        by_node: dict[int, set[TopicIdPartition]] = {}
        unknown = False
        for tip in self.assignment:
            leader = meta.leader(tip.topic, tip.partition)
            if leader is None or leader < 0:
                unknown = True
            else:
                by_node.setdefault(leader, set()).add(tip)
        if unknown:
            self.cluster.request_update().add_done_callback(lambda _: self.wake())
        for node in set(by_node) | set(self.sessions):
            self.session(node).set_wanted(by_node.get(node, ()))

    def send(self, *, fetch: bool = True) -> None:
        """Start the requests due: a ShareFetch to each leader of assigned partitions whose
        records the application has taken (when ``fetch``), and whatever else a session has to
        say (acknowledgements, partitions to forget)."""
        self._route()
        buffered = {node for node, _, _ in self.completed}
        for node, session in self.sessions.items():
            if node in self._tasks:
                continue
            sent = session.next_request(self.params, fetch=fetch and node not in buffered)
            if sent is not None:
                self._start(node, session, sent)

    def _start(self, node: int, session: ShareSession, sent: SentRequest) -> None:
        self._report(sent.failed_acks, BrokerError(ErrorCode.INVALID_SHARE_SESSION_EPOCH, "no share session yet"))
        if sent.request is None:
            return
        task = self.cluster.loop.create_task(self._exchange(node, session, sent))
        self._tasks[node] = task
        task.add_done_callback(lambda _: self._done(node, task))

    def _done(self, node: int, task: asyncio.Task) -> None:
        if self._tasks.get(node) is task:
            del self._tasks[node]
        self.wake()

    async def _exchange(self, node: int, session: ShareSession, sent: SentRequest) -> None:
        api = ApiKey.SHARE_ACKNOWLEDGE if sent.kind != "fetch" else ApiKey.SHARE_FETCH
        timeout = self.cluster.request_timeout + (self.params.max_wait_ms / 1000 if sent.kind == "fetch" else 0)
        try:
            conn = await self.cluster.connection(node)
            response = await conn.send(api, sent.request, timeout=timeout)
        except asyncio.CancelledError:
            session.on_failure()
            self._report(sent.acks, KafkaError("the consumer closed before the acknowledgement was answered"))
            raise
        except KafkaError as e:
            _log.debug("share session with broker %d: %s failed: %s", node, sent.kind, e)
            session.on_failure()
            self._report(sent.acks, e)
            await asyncio.sleep(self.cluster.retry_backoff)
            return
        self._on_response(node, session, sent, response)

    # --- answers ----------------------------------------------------------------------------
    def _on_response(self, node: int, session: ShareSession, sent: SentRequest, response) -> None:
        session.on_response(response.error_code)
        if response.acquisition_lock_timeout_ms:
            self.acquisition_lock_timeout_ms = response.acquisition_lock_timeout_ms
        if response.error_code != ErrorCode.NONE:
            error = BrokerError(response.error_code, response.error_message, f"share session with broker {node}")
            _log.info("%s", error)
            self._report(sent.acks, error)
            if response.error_code in _REFRESH:
                self.cluster.request_update()
            return
        known = self.assignment | session.wanted | session.partitions | set(sent.acks)
        names = {tip.topic_id: tip.topic for tip in known}
        answered: set[TopicIdPartition] = set()
        for topic in response.responses:
            name = names.get(topic.topic_id)
            for p in topic.partitions:
                tip = TopicIdPartition(topic.topic_id, name or "", p.partition_index)
                answered.add(tip)
                ack_code = p.error_code if sent.kind != "fetch" else p.acknowledge_error_code
                self._report_one(sent.acks, tip, ack_code, p.acknowledge_error_message if sent.kind == "fetch" else p.error_message)
                if sent.kind == "fetch":
                    records = self._partition_answer(node, session, tip, name, p)
                    if records:
                        self.completed.append((node, tip, records))
        self._report({t: a for t, a in sent.acks.items() if t not in answered}, None)

    def _partition_answer(self, node: int, session: ShareSession, tip, name, p) -> list[ShareConsumerRecord]:
        if p.error_code != ErrorCode.NONE:
            _log.info("share fetch of %s from broker %d: %s", tip, node, ErrorCode(p.error_code).name)
            if p.error_code in _REFRESH:
                self.cluster.request_update()
            return []
        if name is None or not p.acquired_records:
            return []
        records, gaps = acquired_records(name, tip.partition, p.records, p.acquired_records)
        if gaps:
            session.acknowledge(tip, gaps)
        return records

    def _report_one(self, acks: dict, tip: TopicIdPartition, code: int, message: str | None) -> None:
        if tip not in acks:
            return
        error = None if code == ErrorCode.NONE else BrokerError(code, message, f"acknowledgement of {tip}")
        self._report({tip: acks[tip]}, error)

    def _report(self, acks: dict[TopicIdPartition, Acknowledgements], error: KafkaError | None) -> None:
        for tip, a in acks.items():
            self.results.append(AckResult(tip, frozenset(a.offsets()), error))

    # --- the consumer's calls ---------------------------------------------------------------
    def take(self) -> list[tuple[int, TopicIdPartition, list[ShareConsumerRecord]]]:
        """Every buffered answer: ``(node, partition, records)``."""
        out = list(self.completed)
        self.completed.clear()
        return out

    async def settle(self) -> None:
        """Wait for the requests in flight."""
        while self._tasks:
            await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    async def commit(self) -> None:
        """Send every waiting acknowledgement (ShareAcknowledge) and wait for the answers."""
        await self.settle()
        for node, session in self.sessions.items():
            sent = session.build_acknowledge()
            if sent is not None:
                self._start(node, session, sent)
        await self.settle()

    def commit_nowait(self) -> None:
        """Send the waiting acknowledgements without waiting (``commit_async``): by the next
        request of each session."""
        self.send(fetch=False)

    async def close(self) -> None:
        """End every session (ShareAcknowledge at epoch -1 with the last acknowledgements):
        the leaders release what this member still holds."""
        await self.settle()
        self.completed.clear()
        for node, session in self.sessions.items():
            sent = session.build_close()
            if sent is not None:
                self._start(node, session, sent)
            else:
                self._report(session.take_pending(), BrokerError(ErrorCode.SHARE_SESSION_NOT_FOUND, "no share session"))
        await self.settle()
