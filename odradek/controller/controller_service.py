"""`ControllerService`: the controller's edge on a broker (Kafka's ``KafkaController`` with its
``ControllerEventManager`` and ``KafkaControllerZkWatcher``s).

One event thread takes items from a ``queue.Queue``, one at a time, and is the only thread
that touches the `Controller` and writes the controller's znodes:

* Election (Kafka's ``elect``): ``/controller`` is read; if absent, this broker claims it and
  bumps ``/controller_epoch`` (`ClusterMetadata.try_become_controller`), reads the cluster
  (`snapshot.read_snapshot`, broker epochs being the czxids of the registrations) and handles
  `events.Startup`. A data watch on ``/controller`` runs the election again when it changes
  (a deleted ``/controller`` is a vacancy; another broker's id means resign if active). A new
  store session (ZooKeeper expiry) runs the election again (resigning if ``/controller``
  no longer names this broker).
* Watches (`controller_watches.py`; persistent, installed at `start`; callbacks only enqueue
  a marker, deduplicated while it waits; the event thread reads the store when it takes the
  marker, and only while active): ``/brokers/ids`` children -> `events.BrokerChange`; ``/brokers/topics`` children ->
  `events.TopicChange`; ``/brokers/topics/<t>`` data -> `events.PartitionModifications`;
  ``/admin/delete_topics`` children -> `events.TopicDeletion`;
  ``/admin/preferred_replica_election`` and ``/admin/reassign_partitions`` (Kafka's JSON
  documents; the first deleted once handed over, the second kept until its partitions are
  done, and read again on election) -> `events.PreferredReplicaElection`,
  `events.PartitionReassignment`; ``/isr_change_notification`` children ->
  `events.IsrChangeNotification`; ``/log_dir_event_notification`` children ->
  `events.LogDirEventNotification` (see `watched_events`).
* Broker requests (`submit`): `events.ControlledShutdown`, `events.AlterPartition`,
  `events.ElectLeaders`, `events.ApiPartitionReassignment` and
  `events.ListPartitionReassignments` from the handlers; the returned ``concurrent.futures.Future`` gets the command list's `commands.Reply`,
  or NOT_CONTROLLER when this broker is not (or stops being) the controller meanwhile.
* Auto leader rebalance (``auto.leader.rebalance.enable``): `FIRST_REBALANCE_DELAY_S` after
  this broker becomes controller, then every ``leader.imbalance.check.interval.seconds``, a
  broker whose share of partitions it prefers but does not lead exceeds
  ``leader.imbalance.per.broker.percentage`` gets them back
  (`events.PreferredReplicaElection`), as Kafka's ``checkAndTriggerAutoLeaderRebalance``.

Executing commands (see `commands`): znode writes in order, consecutive writes grouped into one
guarded ``multi`` for speed (`znode_writer`); when a group fails it is replayed
write by write (a multi is all or nothing) to find the failing one. A failed write with the
``/controller_epoch`` version changed means another controller: resign. Otherwise it is a
conflict: the states the list writes are read back and handed to the controller as
`events.LeaderAndIsrConflict`, whose commands replace the rest of the list. Requests go to the
`ControllerChannelManager` (whose senders follow the controller's live broker set); requests
after a failed write are never sent. Unclean leader elections are logged at ERROR.

No answer comes from state that was never written. The `Controller` changes its context as it
decides, before the edge writes; the change counts only once the writes landed. A conflict
restores the context (`events.LeaderAndIsrConflict`). A write whose outcome is unknown (the
store unreachable for a whole session timeout, or any other failure while executing) makes
the controller resign at once: its context is dropped (so an AlterPartition sent again is
answered NOT_CONTROLLER, not NONE from the ISR it meant to write), ``/controller`` is given up
when it is still ours (Kafka's ``triggerControllerMove``), and an election runs once the store
answers, which rebuilds the context from the store. A new store session (the old one expired,
with its ephemeral ``/controller``) resigns before anything else, as Kafka's ``Expire`` event
(``clearAndPut`` at the head of the queue): the flag is checked before every item and between
the repetitions of a write, so no write of the old session's state follows it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import threading
import time

from odradek.controller import events as ev
from odradek.controller.channel_manager import ControllerChannelManager
from odradek.controller.commands import (
    BrokerRequest,
    ZnodeWrite,
    written_partitions,
    written_topics,
)
from odradek.controller.controller import Controller
from odradek.controller.controller_liveness import ControllerLiveness
from odradek.controller.controller_metrics import INACTIVE, ControllerMetrics, controller_metrics
from odradek.controller.controller_watches import ControllerWatches
from odradek.controller.leader_imbalance import imbalanced_partitions
from odradek.controller.queued_item import RETRIED, QueuedItem, not_controller_reply, resolve
from odradek.controller.snapshot import read_snapshot, read_topics
from odradek.controller.watched_events import broker_epochs, read_watched_event
from odradek.controller.znode_writer import STORE_RETRY_BACKOFF_S, ZnodeWriter
from odradek.metadata import layout
from odradek.metadata.errors import (
    NoNodeError,
    StoreClosedError,
    StoreError,
    StoreUnavailableError,
)
from odradek.metadata.inter_broker_endpoint import inter_broker_endpoint
from odradek.metadata.layout import PartitionState

log = logging.getLogger(__name__)

MAX_CONFLICTS_PER_EVENT = 20
"""A list re-handled this many times after conflicts is given up (logged); the next event
starts from what the controller adopted."""

FIRST_REBALANCE_DELAY_S = 5.0
"""The first auto leader rebalance check comes this long after the election (Kafka's
``onControllerFailover`` schedules it 5 seconds out, whatever the interval), so leaderships
lost while there was no controller come back soon, not a whole interval (300 s by default)
later."""


class ControllerService(ControllerWatches):
    """See the module docstring. ``channel_manager`` may be replaced (tests)."""

    def __init__(self, broker, *, channel_manager=None) -> None:
        self.broker = broker
        self.broker_id = broker.broker_id
        self.controller = Controller(broker.broker_id)
        self.channel = channel_manager or ControllerChannelManager(broker, on_event=self.submit)
        listener = broker.inter_broker_listener
        self.controller_liveness = ControllerLiveness(
            broker.broker_id, lambda b: inter_broker_endpoint(b.info, listener), lambda: broker.metadata.store)
        """Watches the controller's process from this broker while another broker is it."""
        self.writer = ZnodeWriter(
            lambda: broker.metadata.store,
            broker.config["zookeeper.session.timeout.ms"] / 1000,
            lambda: self._stopped or self._session_expired.is_set(),
        )
        self.loop: asyncio.AbstractEventLoop | None = None
        self._queue: queue.Queue[QueuedItem] = queue.Queue()
        self._thread = threading.Thread(
            target=self._run, name=f"controller-event-thread-{broker.broker_id}", daemon=True
        )
        self._watches: list = []
        self._topic_watches: dict[str, object] = {}
        self._markers: set = set()
        self._markers_lock = threading.Lock()
        self._stopped = False
        self._session_expired = threading.Event()
        """Set by a new store session (the old one expired); the event thread resigns before
        its next item, and a write being repeated stops."""
        self._submit_lock = threading.Lock()
        self._next_rebalance = float("inf")
        self.elections = 0
        """How many times this broker became controller (tests, diagnostics)."""
        self.metrics: ControllerMetrics = INACTIVE
        """Kafka's controller gauges, published by the event thread after each item
        (`controller_metrics`); read from any thread."""

    # -- public -------------------------------------------------------------------------------

    @property
    def store(self):
        return self.broker.metadata.store

    @property
    def active(self) -> bool:
        """Whether this broker is the controller (as the event thread last knew)."""
        return self.controller.active

    async def start(self) -> None:
        """Install the watches, start the event thread and run an election. If this broker
        wins, returns after the Startup commands ran and the requests to this broker itself
        were handled (so a single broker leads its partitions when this returns)."""
        self.loop = asyncio.get_running_loop()
        self.channel.start(self.loop)
        self.controller_liveness.start(self.loop)
        self._install_watches()
        self.store.add_session_listener(self._on_new_session)
        self.store.add_session_lost_listener(self._session_expired.set)
        self._thread.start()
        done: concurrent.futures.Future = concurrent.futures.Future()
        self._queue.put(QueuedItem("elect", None, done))
        sent = await asyncio.wrap_future(done)
        if sent:
            timeout = self.broker.config["controller.socket.timeout.ms"] / 1000
            await asyncio.wait([asyncio.wrap_future(f) for f in sent], timeout=timeout)

    def submit(self, event: ev.ControllerEvent) -> concurrent.futures.Future:
        """Queue ``event`` for the event thread (thread-safe). The future resolves when it was
        handled: with its `commands.Reply` for ControlledShutdown/AlterPartition/ElectLeaders (a
        NOT_CONTROLLER one if this broker is not the controller), else None."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._submit_lock:  # nothing is queued after the stop item
            if not self._stopped and self._thread.is_alive():
                self._queue.put(QueuedItem("event", event, future))
                return future
        future.set_result(not_controller_reply(event))
        return future

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop: watches off, resign (``/controller`` deleted if it is ours), event thread
        joined, senders stopped. Call from the loop's thread. Idempotent."""
        with self._submit_lock:
            if self._stopped:
                return
            self._stopped = True
        for handle in self._watches:
            handle.cancel()
        self._watches = []
        if self._thread.is_alive():  # the topic watches are the thread's to cancel
            self._queue.put(QueuedItem("stop"))
            self._thread.join(timeout)
        else:
            self._cancel_topic_watches()
        self.channel.shutdown()
        self.controller_liveness.shutdown()

    # -- the event thread ---------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            wait = max(0.0, self._next_rebalance - time.monotonic())
            try:
                item = self._queue.get(timeout=None if wait == float("inf") else wait)
            except queue.Empty:
                item = QueuedItem("rebalance")
            if item.kind == "stop":
                self._stop_in_thread()
                return
            try:
                self._expire_if_needed()
                self._process(item)
            except StoreUnavailableError as e:
                if item.kind in RETRIED and not self._stopped:
                    log.warning("controller %d: store unavailable during %s (%s); retrying",
                                self.broker_id, item.kind, e)
                    time.sleep(STORE_RETRY_BACKOFF_S)
                    self._queue.put(item)
                    continue
                log.error("controller %d: store unavailable during %s: %s",
                          self.broker_id, item.kind, e)
            except StoreClosedError:  # the broker is stopping: the stop item follows
                log.info("controller %d: the store closed during %s", self.broker_id, item.kind)
            except Exception:  # noqa: BLE001 - the thread must live on
                log.exception("controller %d: %s failed", self.broker_id, item.kind)
            finally:
                # once a burst of items is through, not after each: the counts walk every
                # partition, and a scrape only ever reads the latest
                if self._queue.empty():
                    self._publish_metrics()
            # an event cut short is answered NOT_CONTROLLER: the broker asks again
            resolve(item.future,
                     item.sent if item.kind == "elect" else not_controller_reply(item.payload))

    def _publish_metrics(self) -> None:
        """Kafka's ``updateMetrics``: one assignment, so a scrape sees one moment's counts."""
        try:
            self.metrics = controller_metrics(self.controller.ctx) if self.active else INACTIVE
        except Exception:  # noqa: BLE001 - the thread must live on; the last counts stay
            log.exception("controller %d: metrics not updated", self.broker_id)

    def _process(self, item: QueuedItem) -> None:
        if item.kind in ("elect", "reelect"):
            self._elect_and_follow(item)
        elif item.kind == "event":
            self._handle(item.payload, item)
        elif item.kind == "watch":
            with self._markers_lock:
                self._markers.discard(item.payload)
            if item.payload == "controller":
                self._elect_and_follow(item)
            elif self.active:
                event = read_watched_event(self.store, item.payload)
                if event is not None:
                    self._handle(event, item)
        elif item.kind == "rebalance":
            self._check_imbalance()

    def _stop_in_thread(self) -> None:
        self._cancel_topic_watches()
        if self.active:
            self.controller.handle(ev.Resign())
        self.metrics = INACTIVE
        try:
            self.broker.metadata.resign_controller(self.broker_id)
        except StoreError as e:
            log.warning("controller %d: could not delete /controller: %s", self.broker_id, e)
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            resolve(item.future, not_controller_reply(item.payload) if item.kind == "event"
                     else [])

    # -- election -----------------------------------------------------------------------------

    def _controller_id(self) -> int:
        try:
            return layout.decode_controller(self.store.get(layout.CONTROLLER)[0])
        except NoNodeError:
            return -1

    def _elect_and_follow(self, item: QueuedItem) -> None:
        """An election, then the controller it left (another broker, or none) watched from
        here (`controller_liveness`)."""
        try:
            self._elect(item)
        finally:
            try:
                current = self._controller_id()
            except StoreError:
                current = -1
            self.controller_liveness.follow(current)

    def _elect(self, item: QueuedItem) -> None:
        current = self._controller_id()
        if current == self.broker_id and self.active:
            return
        if current == self.broker_id:
            # the seat is ours but the context was dropped (a write failed, the session
            # expired): give it up and run for it again, so the context is read afresh at a
            # new controller epoch
            self.broker.metadata.resign_controller(self.broker_id)
            current = self._controller_id()
        if current != -1:
            if self.active:  # another broker holds /controller: we were deposed
                self._resign()
            return
        epoch = self.broker.metadata.try_become_controller(self.broker_id)
        if epoch is None:
            if self.active:
                self._resign()
            return
        self.elections += 1
        log.info("broker %d is the controller now, at epoch %d", self.broker_id, epoch)
        try:
            unclean = bool(self.broker.config["unclean.leader.election.enable"])
            began = time.monotonic()
            snapshot = read_snapshot(self.store, self.broker_id, broker_epochs(self.store), unclean,
                                     self.controller_liveness.gone_registrations())
            read = time.monotonic()
            self._handle(ev.Startup(snapshot), item)
            log.info("controller %d: context of %d partitions read in %.2f s; failover handled "
                     "and written in %.2f s", self.broker_id, len(snapshot.partition_states),
                     read - began, time.monotonic() - read)
            self._mark("reassign")  # Kafka's initializePartitionReassignments
            self._mark("log_dir_events")  # notifications written while no controller was
        except Exception:
            # Kafka's triggerControllerMove: give the seat up, so that an election (maybe
            # ours, through the /controller watch) starts over
            if self.active:
                self._resign()
            try:
                self.broker.metadata.resign_controller(self.broker_id)
            except StoreError:
                pass
            raise
        self._schedule_rebalance(FIRST_REBALANCE_DELAY_S)

    def _expire_if_needed(self) -> None:
        """Kafka's ``processExpire``: after a session expiry, resign before anything else."""
        if self._session_expired.is_set():
            self._session_expired.clear()
            if self.active:
                log.warning("controller %d: the store session expired; resigning",
                            self.broker_id)
                self._resign()

    def _move_controller(self, why: BaseException) -> None:
        """Kafka's ``triggerControllerMove`` after a write whose outcome is unknown: resign
        (the context held decisions that may never have been written), give ``/controller``
        up if it is still ours, and elect again once the store answers (the election reads
        the context afresh from the store). A closed store (the broker is stopping) only
        resigns."""
        if isinstance(why, StoreClosedError):
            if self.active:
                self._resign()
            return
        log.error("controller %d: a write to the metadata store failed (%s); resigning",
                  self.broker_id, why)
        if self.active:
            self._resign()
        try:
            self.broker.metadata.resign_controller(self.broker_id)
        except StoreError as e:  # kept by the next election (see `_elect`)
            log.info("controller %d: /controller not given up yet: %s", self.broker_id, e)
        if not self._stopped:
            self._queue.put(QueuedItem("reelect"))

    def _resign(self) -> None:
        """Kafka's ``onControllerResignation``: forget everything, stop the senders."""
        log.info("broker %d is no longer the controller", self.broker_id)
        self.controller.handle(ev.Resign())
        self.channel.update_brokers({})
        self._cancel_topic_watches()
        self._next_rebalance = float("inf")

    def _on_new_session(self) -> None:
        """Kafka's ``Expire`` then ``RegisterBrokerAndReelect`` (the registration is
        `ClusterMetadata`'s): resign before the next item (the old session's ``/controller``
        went with it), then elect again. Runs on the store's thread."""
        if not self._stopped:
            self._session_expired.set()
            self._queue.put(QueuedItem("reelect"))

    # -- handling and executing ---------------------------------------------------------------

    def _handle(self, event: ev.ControllerEvent, item: QueuedItem) -> None:
        """Handle ``event`` and execute its commands (conflicts re-handled, bounded)."""
        commands = self.controller.handle(event)
        for _ in range(MAX_CONFLICTS_PER_EVENT + 1):
            self._log_unclean()
            if self.controller.active:
                self.channel.update_brokers(self.controller.ctx.live_brokers)
            try:
                outcome = self._execute(commands, item)
            except Exception as e:
                self._move_controller(e)
                raise
            if outcome is None:
                self._sync_topic_watches()
                return
            if outcome == "resign":
                self._resign()
                return
            commands = self.controller.handle(outcome)
        log.error("controller %d: %s still conflicting after %d retries; given up",
                  self.broker_id, type(event).__name__, MAX_CONFLICTS_PER_EVENT)

    def _log_unclean(self) -> None:
        for topic, partition in self.controller.unclean_elections:
            state = self.controller.ctx.leadership.get((topic, partition))
            log.error(
                "UNCLEAN leader election for %s-%d: broker %s leads out of sync; records "
                "acknowledged by the old ISR may be lost", topic, partition,
                state.leader if state else "?",
            )

    def _execute(self, commands: list, item: QueuedItem):
        """Run ``commands``; None when all ran, "resign", or the conflict event to handle."""
        i = 0
        while i < len(commands):
            command = commands[i]
            if isinstance(command, ZnodeWrite):
                j = i
                while j < len(commands) and isinstance(commands[j], ZnodeWrite):
                    j += 1
                failed = self.writer.apply(commands[i:j])
                if failed is not None:
                    return self._after_failed_write(commands, failed)
                i = j
                continue
            if isinstance(command, BrokerRequest):
                future = self.channel.send(command)
                if command.broker_id == self.broker_id:
                    item.sent.append(future)
            else:
                resolve(item.future, command)
            i += 1
        return None

    def _after_failed_write(self, commands: list, failed: ZnodeWrite):
        try:
            epoch_version = self.store.get(layout.CONTROLLER_EPOCH)[1]
        except NoNodeError:
            epoch_version = -1
        if epoch_version != failed.epoch_zk_version:
            log.warning("controller %d: a newer controller epoch is in the store", self.broker_id)
            return "resign"
        log.info("controller %d: conflicting write to %s; re-reading", self.broker_id, failed.path)
        return self._conflict_event(commands)

    def _conflict_event(self, commands: list) -> ev.LeaderAndIsrConflict:
        states = {}
        for tp in written_partitions(commands):
            try:
                data, version = self.store.get(layout.partition_state_path(*tp))
            except NoNodeError:
                continue
            states[tp] = PartitionState.from_json(data, version)
        names = set(written_topics(commands))
        topics = {t.name: t for t in read_topics(self.store) if t.name in names}
        return ev.LeaderAndIsrConflict(states, topics)

    # -- auto leader rebalance ----------------------------------------------------------------

    def _schedule_rebalance(self, delay: float | None = None) -> None:
        """The next imbalance check, ``delay`` seconds from now (default
        ``leader.imbalance.check.interval.seconds``); none unless active and enabled."""
        config = self.broker.config
        if self.active and config["auto.leader.rebalance.enable"]:
            if delay is None:
                delay = config["leader.imbalance.check.interval.seconds"]
            self._next_rebalance = time.monotonic() + delay
        else:
            self._next_rebalance = float("inf")

    def _check_imbalance(self) -> None:
        """Kafka's ``checkAndTriggerAutoLeaderRebalance``."""
        self._schedule_rebalance()
        if not self.active:
            return
        candidates = imbalanced_partitions(
            self.controller.ctx, self.broker.config["leader.imbalance.per.broker.percentage"]
        )
        if candidates:
            log.info("controller %d: moving %d leaderships back to their preferred replicas",
                     self.broker_id, len(candidates))
            self._handle(ev.PreferredReplicaElection(tuple(candidates)), QueuedItem("rebalance"))

