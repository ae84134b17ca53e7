"""``ReplicaFetcher``: one asyncio task copying partitions from one leader (Kafka's
``ReplicaFetcherThread`` / ``AbstractFetcherThread``).

Each partition it follows is in one of these states (``PartitionFetchState``):

- **truncating**: first, and whenever the logs may have diverged. The follower asks the leader
  where its own latest leader epoch ends (OffsetForLeaderEpoch, with the follower's view of
  the current leader epoch) and truncates its log there (``replication/truncation.py``,
  ``ReplicaManager.truncate_to``); an answer that is not final (KIP-279) asks again. A log
  without epochs truncates to its high watermark. Then it fetches from its log end offset.
- **fetching**: the partition is in the fetcher's Fetch requests (``replica_id`` = this
  broker, ``replica.fetch.*`` settings). The leader's batches are appended verbatim
  (``Partition.append_records_as_follower``), the follower's high watermark follows the
  leader's (never past its own log end), and its log start offset follows the leader's.
  The Fetch goes through a KIP-227 session with the leader (``fetch_session_handler.py``):
  after the first full request only the partitions that changed, and the leader answers only
  those with news. Which partitions are in which state, and which changed since the last
  request, is kept by ``fetch_set.py`` from what touched them: a round costs O(partitions
  changed), not O(partitions followed).
- **delayed** (either of the above, with ``delayed_until``): after an error, for
  ``replica.fetch.backoff.ms``.
- **throttled** (fetching, with ``delayed_until``): a replica out of sync (its last fetch
  left it behind the leader's high watermark) that ``follower.replication.throttled.replicas``
  names, while the follower's replication quota is exceeded
  (``server/replication_quota_manager.py``): left out of the Fetch until the quota allows.
- **fenced**: the leader answered FENCED_LEADER_EPOCH: this broker's LeaderAndIsr is older
  than the leader's; nothing more until a newer LeaderAndIsr replaces the partition's state
  (``add_partitions``).

Errors per partition: NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH (the leader has not heard of
this epoch yet), UNKNOWN_TOPIC_OR_PARTITION and the like back off and retry;
OFFSET_OUT_OF_RANGE truncates again, or, when the fetch offset is below the leader's log start
offset, empties the log and starts at the leader's log start. Errors of the connection close
it; it is opened again (to the leader's current endpoint) after the back-off.

Concurrency: everything runs on the broker's event loop. The partition states may change
while a request is in flight (``add_partitions`` / ``remove_partitions``); an answer is
applied only to the state object it was asked for, still at the same offset, so a partition
removed (it became leader) is never appended to after ``remove_partition`` returned. But the
files an answer's appends write (leader-epoch checkpoints: a partition's first batch of a new
epoch writes one, two fsyncs, thousands at once when a producer starts on thousands of
partitions) are made durable off the loop (``deferred_sync``, ``LogManager.sync_written``),
whose every connection those fsyncs stalled, and before the next Fetch tells the leader how
far this replica got: no batch of a new epoch counts as replicated before its epoch is on
disk. Truncations rewrite the checkpoints they cut (thousands when a former leader with
unreplicated tails rejoins): they too are synced off the loop, before the round ends. A failed
sync takes its log directory offline.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass

from odradek.client.connection import BrokerConnection
from odradek.client.errors import KafkaConnectionError, KafkaTimeoutError, UnsupportedVersionError
from odradek.metadata.inter_broker_endpoint import peer_address
from odradek.protocol.fetch_session_handler import FetchSessionHandler
from odradek.replication.fetch_set import FetchSet, forgotten_topics
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.records.errors import CorruptRecordError
from odradek.replication.produce_validation import ProduceError
from odradek.replication.replica_fetch_requests import epoch_request, fetch_request, version_in
from odradek.replication.truncation import (
    EpochEndOffset,
    epoch_to_ask,
    offset_to_truncate_to,
    truncate_to_high_watermark,
)
from odradek.storage import deferred_sync
from odradek.storage.errors import InvalidAppendOffsetError, StorageError

log = logging.getLogger("odradek.replication")

TRUNCATING, FETCHING, FENCED = "truncating", "fetching", "fenced"
# Versions the fetcher speaks: Fetch up to v17 (topic ids from v13, replica_state from v15),
# OffsetForLeaderEpoch from v3 (replica_id) to v4.
FETCH_MAX_VERSION = 17
FETCH_NAMES_MAX_VERSION = 12
OFFSET_FOR_LEADER_EPOCH_VERSIONS = (3, 4)
_NO_TOPIC_ID = (None, uuid.UUID(int=0))
_CONNECTION_ERRORS = (KafkaConnectionError, KafkaTimeoutError, UnsupportedVersionError, OSError)


@dataclass(frozen=True, slots=True)
class InitialFetchState:
    """What LeaderAndIsr made this broker follow: the partition's ``topic_id`` (zero UUID when
    not known), its ``leader_id`` and ``leader_epoch``, and ``fetch_offset``, where fetching
    would start (the follower's log end offset; truncation comes first and decides)."""

    topic_id: uuid.UUID | None
    leader_id: int
    leader_epoch: int
    fetch_offset: int


@dataclass(slots=True)
class PartitionFetchState:
    """A followed partition's state in its fetcher (see the module docstring)."""

    topic_id: uuid.UUID | None
    leader_epoch: int
    fetch_offset: int
    state: str = TRUNCATING
    delayed_until: float = 0.0  # loop time
    lag: int | None = None  # the leader's high watermark minus fetch_offset, after the last fetch

    def ready(self, now: float) -> bool:
        return self.state != FENCED and self.delayed_until <= now


class ReplicaFetcher:
    """Fetches the partitions it is given from broker ``leader_id``; made and driven by the
    ``ReplicaFetcherManager`` (``fetcher_index`` < ``num.replica.fetchers``)."""

    def __init__(self, broker, leader_id: int, fetcher_index: int = 0) -> None:
        self.broker = broker
        self.leader_id = leader_id
        self.fetcher_index = fetcher_index
        self.partitions: dict[tuple[str, int], PartitionFetchState] = {}
        cfg = broker.config
        self.backoff_s = cfg["replica.fetch.backoff.ms"] / 1000
        self.socket_timeout_s = cfg["replica.socket.timeout.ms"] / 1000
        self._wake = asyncio.Event()
        self._conn: BrokerConnection | None = None
        self._unreachable = False  # the last connection attempt or request failed
        self._task: asyncio.Task | None = None
        self._stopped = False  # set by shutdown(): the loop ends even if a cancel was lost
        self._session = FetchSessionHandler()
        self._session_conn: BrokerConnection | None = None
        self._set = FetchSet(self.partitions, TRUNCATING, FETCHING)
        self._topic_names: dict[uuid.UUID, str] = {}  # for answers by topic id
        self._without_ids: set[tuple[str, int]] = set()  # followed partitions with no topic id

    def __repr__(self) -> str:
        return f"ReplicaFetcher(leader={self.leader_id}, index={self.fetcher_index})"

    # --- control (from the manager) -----------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def shutdown(self) -> None:
        self._stopped = True
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        self._close()
        for key in list(self.partitions):
            self.broker.replica_manager.unwatch(key, self._set)

    def add_partition(self, key: tuple[str, int], initial: InitialFetchState) -> None:
        """Follow ``key`` (again): truncating first, whatever state it had."""
        self.partitions[key] = PartitionFetchState(initial.topic_id, initial.leader_epoch, initial.fetch_offset)
        if initial.topic_id in _NO_TOPIC_ID:
            self._without_ids.add(key)
        else:
            self._without_ids.discard(key)
            self._topic_names[initial.topic_id] = key[0]
        self.broker.replica_manager.watch(key, self._set)  # its log truncated, its log start moved
        self._set.touch(key)
        self._wake.set()

    def remove_partition(self, key: tuple[str, int]) -> bool:
        state = self.partitions.pop(key, None)
        if state is None:
            return False
        self._without_ids.discard(key)
        self.broker.replica_manager.unwatch(key, self._set)
        self._set.touch(key)
        return True

    # --- the loop -------------------------------------------------------------------------------
    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stopped:
            try:
                if not await self.do_work():
                    await self._idle(loop)
            except asyncio.CancelledError:
                raise
            except _CONNECTION_ERRORS as e:
                # One line when the leader becomes unreachable, not one per retry: a dead
                # leader is retried every replica.fetch.backoff.ms until LeaderAndIsr moves on.
                log.log(logging.DEBUG if self._unreachable else logging.INFO,
                        "%s: connection to the leader failed (retried every %.3g s): %s", self, self.backoff_s, e)
                self._unreachable = True
                self._close()
                await asyncio.sleep(self.backoff_s)
            except Exception:
                log.exception("%s failed; retrying after replica.fetch.backoff.ms", self)
                self._close()
                await asyncio.sleep(self.backoff_s)

    async def _idle(self, loop) -> None:
        """Wait for a partition to be added, or the first delayed one to be due."""
        self._wake.clear()
        due = self._set.next_due()
        timeout = max(due - loop.time(), 0.001) if due is not None else None
        # asyncio.timeout, not wait_for: Python 3.11's wait_for drops a cancel when the event
        # is set in the same loop iteration (add_partition during shutdown), and the fetcher
        # then ran on with shutdown() waiting for it for ever.
        try:
            async with asyncio.timeout(timeout):
                await self._wake.wait()
        except TimeoutError:
            pass

    async def do_work(self) -> bool:
        """One round: truncate the partitions that need it, else one Fetch. False when no
        partition was ready (the caller waits)."""
        now = asyncio.get_running_loop().time()
        self._set.refresh(now)
        if self._set.truncating:
            conn = await self._connection()
            await self.truncate(conn, dict(self._set.truncating))
            return True
        if self._unthrottled(now):
            self._set.refresh(now)
        if not self._set.fetchable:
            return False
        conn = await self._connection()
        await self.fetch(conn)
        return True

    def _unthrottled(self, now: float) -> bool:
        """Hold back the fetchable partitions the follower throttle holds (Kafka's
        ``shouldFollowerThrottle``: out of sync, throttled, quota exceeded): they wait until
        the quota allows more, at most ``replica.fetch.backoff.ms`` (the rate may change).
        Whether any was held. (The quota is asked first: the partitions are looked at only
        while it is exceeded.)"""
        quota = getattr(self.broker, "replication_quotas", None)
        if quota is None:
            return False
        quota = quota.follower
        if not quota.is_quota_exceeded():
            return False
        held = [k for k, s in self._set.fetchable.items()
                if not (s.lag is not None and s.lag <= 0) and quota.is_throttled(*k)]
        if not held:
            return False
        wait = min(max(quota.delay(), 0.001), self.backoff_s)
        for key in held:
            self._set.fetchable[key].delayed_until = now + wait
            self._set.touch(key)
        return True

    async def _connection(self) -> BrokerConnection:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        address = peer_address(self.broker, self.leader_id)
        if address is None:
            raise KafkaConnectionError(f"broker {self.leader_id} is not registered on listener "
                                       f"{self.broker.inter_broker_listener}")
        conn = BrokerConnection(address[0], address[1], node_id=self.leader_id,
                                client_id=f"broker-{self.broker.broker_id}-fetcher-{self.fetcher_index}",
                                request_timeout=self.socket_timeout_s,
                                ssl_context=getattr(self.broker, "inter_broker_ssl", None),
                                sasl=getattr(self.broker, "inter_broker_sasl", None))
        await conn.connect(self.socket_timeout_s)
        if self._unreachable:
            log.info("%s: connected to the leader again", self)
            self._unreachable = False
        self._conn = conn
        return conn

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.abort()
            self._conn = None

    def _delay(self, key, state: PartitionFetchState, why: str) -> None:
        log.info("%s: %s-%d backs off: %s", self, key[0], key[1], why)
        state.delayed_until = asyncio.get_running_loop().time() + self.backoff_s
        self._set.touch(key)

    def _current(self, key, state: PartitionFetchState):
        """The partition when ``state`` is still the fetcher's for ``key`` and this broker still
        follows it, else None (the answer is dropped)."""
        if self.partitions.get(key) is not state:
            return None
        part = self.broker.replica_manager.get(*key)
        if part is None or part.is_leader(self.broker.broker_id):
            return None
        return part

    def _not_hosted(self, key, state: PartitionFetchState) -> None:
        """The replica manager has no follower partition for ``key`` (yet, or any more: the
        role change that removes it from this fetcher is on its way): wait, not spin."""
        if self.partitions.get(key) is state:
            self._delay(key, state, "not a follower partition of this broker")

    # --- truncation -----------------------------------------------------------------------------
    async def truncate(self, conn: BrokerConnection, states: dict) -> None:
        """Truncate ``states``' partitions: those without epochs to their high watermark, the
        others where the leader's answer says (``offset_to_truncate_to``)."""
        asks = {}
        await self._durably(self._truncate_without_epochs, states, asks)
        if not asks:
            return
        response = await conn.send(ApiKey.OFFSET_FOR_LEADER_EPOCH, epoch_request(self.broker.broker_id, asks),
                                   version=version_in(conn, ApiKey.OFFSET_FOR_LEADER_EPOCH,
                                                      *OFFSET_FOR_LEADER_EPOCH_VERSIONS))
        await self._durably(self._apply_epoch_ends, response, asks)

    def _truncate_without_epochs(self, states: dict, asks: dict) -> None:
        """Truncate the partitions of ``states`` whose log has no epochs; note the others'
        OffsetForLeaderEpoch question in ``asks``."""
        for key, state in states.items():
            self._set.touch(key)  # whatever comes of it, filed again at the next round
            part = self._current(key, state)
            if part is None:
                self._not_hosted(key, state)
                continue
            epoch = epoch_to_ask(part.log.leader_epoch_cache)
            if epoch is None:
                self._truncated(key, state, part, truncate_to_high_watermark(part.high_watermark))
            else:
                asks[key] = (state, epoch)

    def _apply_epoch_ends(self, response, asks: dict) -> None:
        """Truncate each partition of ``asks`` where the leader's answer says."""
        answered = set()
        for t in response.topics:
            for p in t.partitions:
                key = (t.topic, p.partition)
                if key in asks and key not in answered:
                    answered.add(key)
                    self._on_epoch_end(key, asks[key][0], p)
        for key in asks.keys() - answered:  # not to ask again at once
            self._delay(key, asks[key][0], "no answer to OffsetForLeaderEpoch")

    def _on_epoch_end(self, key, state: PartitionFetchState, answer) -> None:
        part = self._current(key, state)
        if part is None or state.state != TRUNCATING:
            return
        error = ErrorCode(answer.error_code)
        if error != ErrorCode.NONE:
            self._on_error(key, state, error, None)
            return
        cache = part.log.leader_epoch_cache
        decided = offset_to_truncate_to(EpochEndOffset(answer.leader_epoch, answer.end_offset), cache,
                                        part.log_end_offset, part.high_watermark)
        self._truncated(key, state, part, decided)

    def _truncated(self, key, state: PartitionFetchState, part, decided) -> None:
        """Truncate to ``decided.offset``; fetch from the new log end when it was final."""
        if self.broker.replica_manager.truncate_to(part, decided.offset):
            log.info("%s: truncated %s-%d to %d", self, key[0], key[1], part.log_end_offset)
        if decided.completed:
            state.state = FETCHING
            state.fetch_offset = part.log_end_offset

    # --- fetching -------------------------------------------------------------------------------
    async def fetch(self, conn: BrokerConnection) -> None:
        """One Fetch for the fetchable partitions, through the fetch session (``fetch_set.py``:
        a full request for a new session, else only what changed), its answers applied."""
        version = min(conn.api_version(ApiKey.FETCH), FETCH_MAX_VERSION)
        if self._without_ids:
            version = min(version, FETCH_NAMES_MAX_VERSION)
        session = self._session_for(conn)
        if session.full:
            request = fetch_request(self.broker, self._set.full(self._fields))
            built = session.build(request.topics)  # (full: the handler records the partitions)
            request.topics = built.topics
        else:
            changed, forgotten = self._set.incremental(self._fields)
            request = fetch_request(self.broker, changed)
            request.forgotten_topics_data = forgotten_topics(forgotten)
        request.session_id, request.session_epoch = session.session_id, session.epoch
        try:
            response = await conn.send(ApiKey.FETCH, request, version=version,
                                       timeout=self.socket_timeout_s + request.max_wait_ms / 1000)
        except BaseException:
            session.handle_error()
            raise
        sent = self._set.sent
        if not session.handle_response(response):
            for key, (state, _) in list(sent.items()):
                self._delay(key, state, ErrorCode(response.error_code).name)
            return
        await self._durably(self._apply, response, sent)

    async def _durably(self, apply, *args) -> None:
        """``apply(*args)`` (synchronous: nothing else runs on the loop meanwhile), the fsyncs
        of what it wrote put off and then made in a worker thread, awaited (see the module
        docstring)."""
        log_manager = getattr(self.broker.replica_manager, "log_manager", None)
        if log_manager is None:  # (simulations: nothing is written to disk)
            apply(*args)
            return
        noted: list[str] = []
        try:
            with deferred_sync.deferring() as noted:
                apply(*args)
        finally:
            if noted:
                await asyncio.to_thread(log_manager.sync_written, noted)

    def _apply(self, response, sent: dict) -> None:
        """Apply each partition's answer in ``response`` to the partitions ``sent`` asked for."""
        for t in response.responses:
            topic = t.topic or self._topic_names.get(t.topic_id)
            for p in t.partitions:
                key = (topic, p.partition_index)
                item = sent.get(key)
                if item is not None:
                    self._set.touch(key)
                    self._on_partition_data(key, item[0], item[1][0], p)

    def _session_for(self, conn: BrokerConnection) -> FetchSessionHandler:
        """The fetch session with the leader (KIP-227, ``fetch_session_handler.py``); a new
        connection asks for a new session, closing the old one."""
        if self._session_conn is not conn:
            self._session.handle_error()
            self._session_conn = conn
        return self._session

    def _fields(self, key, state: PartitionFetchState) -> tuple:
        """What the Fetch says of a partition: (fetch offset, current leader epoch, the
        follower's log start offset). A change of any is sent to the leader."""
        part = self.broker.replica_manager.get(*key)
        return state.fetch_offset, state.leader_epoch, part.log_start_offset if part is not None else -1

    def _on_partition_data(self, key, state: PartitionFetchState, offset: int, data) -> None:
        part = self._current(key, state)
        if part is None:
            self._not_hosted(key, state)
            return
        if state.state != FETCHING or state.fetch_offset != offset:
            return
        error = ErrorCode(data.error_code)
        if error != ErrorCode.NONE:
            self._on_error(key, state, error, data)
            return
        try:
            if data.records is not None and len(data.records):
                self._record_throttled(key, len(data.records))
                if part.append_records_as_follower(data.records) is not None:
                    state.fetch_offset = part.log_end_offset
        except InvalidAppendOffsetError as e:  # the log moved under the fetch: start over
            state.state = TRUNCATING
            self._delay(key, state, str(e))
            return
        except (CorruptRecordError, StorageError, ProduceError) as e:
            # A damaged batch or a full disk: nothing appended; the same offset again later.
            self._delay(key, state, f"append failed: {e}")
            return
        before = part.high_watermark
        if part.update_follower_high_watermark(data.high_watermark) != before:
            # consumers long-polling this follower (KIP-392, Kafka's completeDelayedFetchRequests)
            self.broker.replica_manager.notify(key)
        self._follow_log_start(part, data.log_start_offset)
        state.lag = max(0, data.high_watermark - state.fetch_offset)

    def _record_throttled(self, key, size: int) -> None:
        quotas = getattr(self.broker, "replication_quotas", None)
        if quotas is not None and quotas.follower.is_throttled(*key):
            quotas.follower.record(size)

    def _follow_log_start(self, part, leader_log_start: int) -> None:
        """The leader deleted records (retention, DeleteRecords): the follower's log start
        follows, up to its high watermark (Kafka's ``maybeIncrementLogStartOffset``)."""
        if part.log_start_offset < leader_log_start <= part.high_watermark:
            part.log.delete_records(leader_log_start)
            # the next request tells the leader; consumers of this follower (KIP-392) hear it
            self.broker.replica_manager.notify(part.key)

    def _on_error(self, key, state: PartitionFetchState, error: ErrorCode, data) -> None:
        if error == ErrorCode.FENCED_LEADER_EPOCH:
            log.info("%s: %s-%d fenced (leader epoch %d is old); waiting for LeaderAndIsr",
                     self, key[0], key[1], state.leader_epoch)
            state.state = FENCED
        elif error == ErrorCode.OFFSET_OUT_OF_RANGE:
            self._out_of_range(key, state, data)
        else:
            self._delay(key, state, error.name)

    def _out_of_range(self, key, state: PartitionFetchState, data) -> None:
        """Below the leader's log start: start over there, empty (Kafka's
        ``truncateFullyAndStartAt``); otherwise the logs diverged: truncate again."""
        part = self._current(key, state)
        leader_start = data.log_start_offset if data is not None else -1
        if part is not None and 0 <= state.fetch_offset < leader_start:
            log.info("%s: %s-%d starts over at the leader's log start %d", self, key[0], key[1], leader_start)
            self.broker.replica_manager.truncate_fully(part, leader_start)
            state.fetch_offset = leader_start
            return
        state.state = TRUNCATING
        self._delay(key, state, "OFFSET_OUT_OF_RANGE")

