"""``LogDirFailureHandler``: what a broker does when one of its log directories fails
(Kafka's ``ReplicaManager.handleLogDirFailure``, run by its ``LogDirFailureHandler`` thread).

The log manager's ``LogDirFailureChannel`` reports each failed directory once, from whichever
thread met the I/O error (``storage/log_dir_failure_channel.py``); the report is handed to
the event loop, where, under the replica manager's state-change lock (no LeaderAndIsr in
between):

1. the log manager drops the directory's logs (``LogManager.handle_log_dir_failure``);
2. their partitions go offline on this broker: fetchers stopped, out of the replica manager
   (waiting acks=all produces and fetches are woken and answered), coordinators of
   ``__consumer_offsets`` / ``__transaction_state`` partitions there unloaded. From then on
   requests for them answer KAFKA_STORAGE_ERROR (``Broker.leader_partition``), and so does a
   LeaderAndIsr naming them (``replication/state_change.py``): their logs are not created
   anew elsewhere while the broker runs. After a restart with the directory still failed
   nothing says which partitions it held: a LeaderAndIsr for a partition whose log is not
   found in the live directories, and whose replica is not new, takes it offline the same
   way (``mark_offline``; ``LogManager.get_or_create_log``);
3. the controller is told, as Kafka's ZooKeeper-mode brokers tell it: a sequential znode
   ``/log_dir_event_notification/log_dir_event_<n>`` holding
   ``{"version":1,"broker":<id>,"event":1}``. It sends LeaderAndIsr for this broker's
   replicas, counts those answered KAFKA_STORAGE_ERROR offline and elects other leaders for
   them (``controller/controller.py``, ``on_broker_log_dir_failure``).

Partitions in the other directories are untouched. When no directory is left the broker
stops at once, without a controlled shutdown (Kafka halts: "Shutdown broker because all log
dirs in ... have failed"): its ZooKeeper registration goes, and the controller treats it as
a failed broker. A restart loads whatever directories then work.
"""

from __future__ import annotations

import asyncio
import json
import logging

from odradek.metadata import layout
from odradek.metadata.errors import MetadataError, StoreError

log = logging.getLogger("odradek.log_dir_failure")

COORDINATED_TOPICS = (("group_coordinator", "__consumer_offsets"), ("txn_coordinator", "__transaction_state"))


def log_dir_event(broker_id: int) -> bytes:
    """The notification's JSON (Kafka's ``LogDirEventNotificationZNode.encode``)."""
    doc = {"version": 1, "broker": broker_id, "event": layout.LOG_DIR_FAILURE_EVENT}
    return json.dumps(doc, separators=(",", ":")).encode()


class LogDirFailureHandler:
    """A broker's failed log directories and the partitions they took offline."""

    def __init__(self, broker) -> None:
        self.broker = broker
        self.offline_partitions: set[tuple[str, int]] = set()

    def start(self) -> None:
        """Listen to the log manager's failure channel (a directory that failed during
        start-up is handled now)."""
        loop = self.broker.loop

        def on_failure(directory: str) -> None:  # any thread
            loop.call_soon_threadsafe(self._spawn, directory)

        self.broker.log_manager.failure_channel.set_listener(on_failure)

    def _spawn(self, directory: str) -> None:
        if not self.broker.stopping:
            self.broker.track(self.broker.loop.create_task(self.handle(directory)))

    def is_offline(self, key: tuple[str, int]) -> bool:
        return key in self.offline_partitions

    def mark_offline(self, keys: list[tuple[str, int]]) -> None:
        """Partitions whose log is absent while a directory is offline (a LeaderAndIsr not
        ``is_new`` after a restart: their log may be in the failed directory) go offline as
        the directory's own did (Kafka's ``markPartitionOffline``)."""
        self._take_offline(keys)

    def forget(self, key: tuple[str, int]) -> None:
        """A deleted partition: nothing of it is served or kept any more."""
        self.offline_partitions.discard(key)

    async def handle(self, directory: str) -> None:
        """Take ``directory``'s partitions offline, then tell the controller, or stop the
        broker when it was the last directory (see the module)."""
        broker = self.broker
        rm = broker.replica_manager
        async with rm.state_change_lock:
            gone = broker.log_manager.handle_log_dir_failure(directory)
            self._take_offline(gone)
        log.error("broker %d: log directory %s failed; %d partition(s) offline on this broker: %s",
                  broker.broker_id, directory, len(gone), ", ".join(f"{t}-{p}" for t, p in gone[:20]))
        if not broker.log_manager.log_dirs:
            broker.halt(f"Shutdown broker because all log dirs in {', '.join(broker.log_manager.all_log_dirs)} "
                        "have failed")
            return
        await self._notify_controller()

    def _take_offline(self, keys: list[tuple[str, int]]) -> None:
        broker = self.broker
        rm = broker.replica_manager
        self.offline_partitions.update(keys)
        if broker.replica_fetchers is not None:
            broker.replica_fetchers.remove_partitions(keys)
        hosted = [key for key in keys if rm.get(*key) is not None]
        for key in keys:
            rm.unhosted_roles.pop(key, None)
            rm.remove(key[0], key[1], delete=False)  # wakes its waiting produces and fetches
        for name, topic in COORDINATED_TOPICS:
            callback = getattr(getattr(broker, name, None), "on_leadership_change", None)
            lost = [key for key in hosted if key[0] == topic]
            if callback is not None and lost:
                callback(elected=[], resigned=lost)

    async def _notify_controller(self) -> None:
        """Kafka's ``propagateLogDirEvent``; retried while the store cannot be reached (the
        controller acts on nothing else)."""
        broker = self.broker
        data = log_dir_event(broker.broker_id)
        loop = asyncio.get_running_loop()
        while not broker.stopping:
            try:
                await loop.run_in_executor(None, lambda: broker.metadata.store.create(
                    layout.LOG_DIR_EVENT_PREFIX, data, sequential=True))
                return
            except (StoreError, MetadataError, OSError) as e:
                log.warning("cannot write the log directory event for the controller (retrying): %s", e)
                await asyncio.sleep(1)
