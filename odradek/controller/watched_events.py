"""What the controller's watches stand for, read from the store when the event thread takes
them (Kafka's ``KafkaControllerZkWatcher`` handlers re-read the znodes the same way): a watch
callback only names what changed (`ControllerService` queues the name); these functions turn
the name into the `events` value the controller handles.

Names: ``"brokers"`` (``/brokers/ids`` children), ``"topics"`` (``/brokers/topics``
children), ``("topic", name)`` (``/brokers/topics/<name>`` data), ``"delete_topics"``
(``/admin/delete_topics`` children), ``"preferred"`` (``/admin/preferred_replica_election``)
``"reassign"`` (``/admin/reassign_partitions``), ``"isr_changes"``
(``/isr_change_notification`` children: ISRs leaders wrote themselves, before AlterPartition)
and ``"log_dir_events"`` (``/log_dir_event_notification`` children: brokers whose log
directory failed, ``{"version":1,"broker":<id>,"event":1}``, each deleted once read). The two admin znodes hold Kafka's JSON
(``{"version": 1, "partitions": [{"topic": t, "partition": p[, "replicas": [..]]}]}``). The
preferred election's is deleted once read: the request is handed over. The reassignment's
stays, as in Kafka: the controller takes each partition off it when its reassignment is done
or failed, and deletes it when none is left (`reassignment`); a malformed one is deleted.
"""

from __future__ import annotations

import json
import logging

from odradek.controller import events as ev
from odradek.controller.snapshot import read_live_brokers, read_topics
from odradek.metadata import layout
from odradek.metadata.errors import BadVersionError, NoNodeError
from odradek.metadata.layout import PartitionState, TopicAssignment
from odradek.metadata.store import MetadataStore

log = logging.getLogger(__name__)

PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"


def broker_epochs(store: MetadataStore) -> dict[int, int]:
    """Each registered broker's epoch: the czxid of ``/brokers/ids/<id>`` (Kafka's)."""
    out: dict[int, int] = {}
    try:
        names = store.children(layout.BROKER_IDS)
    except NoNodeError:
        return out
    for name in names:
        try:
            out[int(name)] = store.creation_id(layout.broker_path(int(name)))
        except (NoNodeError, ValueError):
            continue
    return out


def read_watched_event(store: MetadataStore, key) -> ev.ControllerEvent | None:
    """The event the watch ``key`` stands for, read now (None: nothing to do)."""
    if key == "brokers":
        return ev.BrokerChange(read_live_brokers(store, broker_epochs(store)))
    if key == "topics":
        return ev.TopicChange(read_topics(store))
    if key == "delete_topics":
        try:
            names = store.children(layout.DELETE_TOPICS)
        except NoNodeError:
            return None
        return ev.TopicDeletion(tuple(sorted(names))) if names else None
    if isinstance(key, tuple) and key[0] == "topic":
        try:
            data, version = store.get(layout.topic_path(key[1]))
        except NoNodeError:
            return None
        return ev.PartitionModifications(TopicAssignment.from_json(key[1], data, version))
    if key == "preferred":
        return _admin_event(store, PREFERRED_REPLICA_ELECTION, _preferred_election)
    if key == "reassign":
        return _admin_event(store, REASSIGN_PARTITIONS, _reassignment, take=False)
    if key == "isr_changes":
        return _isr_change_notifications(store)
    if key == "log_dir_events":
        return _log_dir_event_notifications(store)
    return None


def _take_notifications(store: MetadataStore, root: str) -> list[tuple[str, bytes]]:
    """``(path, data)`` of the notifications under ``root``, in name order, each deleted once
    read (one another controller took first is skipped); none when ``root`` is missing."""
    try:
        names = store.children(root)
    except NoNodeError:
        return []
    taken = []
    for name in sorted(names):
        path = f"{root}/{name}"
        try:
            data, _ = store.get(path)
            store.delete(path)
        except NoNodeError:
            continue
        taken.append((path, data))
    return taken


def _log_dir_event_notifications(store: MetadataStore) -> ev.ControllerEvent | None:
    """Kafka's ``processLogDirEventNotification``: the brokers named by the notifications
    (each deleted once read); a malformed one is deleted and logged."""
    brokers: set[int] = set()
    for path, data in _take_notifications(store, layout.LOG_DIR_EVENT_NOTIFICATION):
        try:
            doc = json.loads(data)
            if int(doc["event"]) == layout.LOG_DIR_FAILURE_EVENT:
                brokers.add(int(doc["broker"]))
        except (ValueError, KeyError, TypeError) as e:
            log.error("controller: ignoring malformed %s: %r", path, e)
    return ev.LogDirEventNotification(tuple(sorted(brokers))) if brokers else None


def _isr_change_notifications(store: MetadataStore) -> ev.ControllerEvent | None:
    """Kafka's ``processIsrChangeNotification``: the partitions named by the notifications
    under ``/isr_change_notification`` (each deleted once read), with their states now."""
    partitions: set[tuple[str, int]] = set()
    for path, data in _take_notifications(store, layout.ISR_CHANGE_NOTIFICATION):
        try:
            partitions |= {(p["topic"], int(p["partition"])) for p in json.loads(data)["partitions"]}
        except (ValueError, KeyError, TypeError) as e:
            log.error("controller: ignoring malformed %s: %r", path, e)
    ordered = sorted(partitions)
    found = store.get_many([layout.partition_state_path(*tp) for tp in ordered])
    states = {tp: PartitionState.from_json(read[0], read[1])
              for tp, read in zip(ordered, found) if read is not None}
    return ev.IsrChangeNotification(states) if states else None


def _preferred_election(doc: dict) -> ev.ControllerEvent:
    parts = tuple((p["topic"], int(p["partition"])) for p in doc.get("partitions", ()))
    return ev.PreferredReplicaElection(parts or None)


def _reassignment(doc: dict) -> ev.ControllerEvent | None:
    targets = {
        (str(p["topic"]), int(p["partition"])): tuple(int(b) for b in p["replicas"])
        for p in doc.get("partitions", ())
    }
    return ev.PartitionReassignment(targets)


def encode_reassignment(targets) -> bytes:
    """``/admin/reassign_partitions``' JSON for ``{(topic, partition): replicas}``."""
    parts = [{"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in sorted(targets.items())]
    return json.dumps({"version": 1, "partitions": parts}, separators=(",", ":")).encode()


def _admin_event(store: MetadataStore, path: str, parse, take: bool = True) -> ev.ControllerEvent | None:
    """Read the admin znode ``path`` (deleted when ``take``, or when malformed); its event,
    or None if it is absent or malformed (logged)."""
    try:
        data, version = store.get(path)
    except NoNodeError:
        return None
    try:
        doc = json.loads(data)
        if not isinstance(doc, dict):
            raise ValueError("not a JSON object")
        event = parse(doc)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        log.error("controller: ignoring malformed %s: %r", path, e)
        event, take = None, True
    if take:
        try:
            store.delete(path, version)
        except (NoNodeError, BadVersionError):
            pass
    return event
