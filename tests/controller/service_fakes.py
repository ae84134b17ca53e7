"""Fakes for the controller edge's tests: a broker with just what `ControllerService` uses, on
an embedded store, and a channel that records requests instead of sending them."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
import uuid

from odradek.controller.channel_manager import stop_replica_outcome
from odradek.controller.commands import StopReplicaRequest
from odradek.metadata import layout
from odradek.metadata.cluster_metadata import ClusterMetadata
from odradek.metadata.embedded_store import EmbeddedStore
from odradek.metadata.layout import BrokerInfo, Endpoint, TopicAssignment
from odradek.protocol.generated.stop_replica_response import StopReplicaResponse
from odradek.server.config import BrokerConfig
from odradek.server.listener_security import inter_broker_listener


def config(broker_id: int, **extra) -> BrokerConfig:
    props = {
        "broker.id": broker_id,
        "listeners": f"PLAINTEXT://127.0.0.1:{19000 + broker_id}",
        "auto.leader.rebalance.enable": False,
    }
    props.update({k.replace("_", "."): v for k, v in extra.items()})
    return BrokerConfig.from_props(props)


def info(broker_id: int, port: int | None = None) -> BrokerInfo:
    return BrokerInfo(broker_id, (Endpoint("PLAINTEXT", "127.0.0.1", port or 19000 + broker_id),))


class FakeBroker:
    """``broker_id``, ``config``, ``metadata`` (a `ClusterMetadata`), ``dispatch`` (records
    in-process requests), ``metadata_image()``."""

    def __init__(self, broker_id: int, store=None, register: bool = True, **extra) -> None:
        self.broker_id = broker_id
        self.config = config(broker_id, **extra)
        self.inter_broker_listener = inter_broker_listener(self.config)
        self.metadata = ClusterMetadata(store if store is not None else EmbeddedStore())
        self.dispatched: list = []
        self.responses: dict = {}
        if register:
            self.metadata.register_broker(info(broker_id))
        self.broker_epoch = self.metadata.store.creation_id(layout.broker_path(broker_id)) \
            if register else -1

    def dispatch(self, ctx, body):
        self.dispatched.append((ctx, body))
        handler = self.responses.get(ctx.api_key)
        return handler(ctx, body) if handler else None

    def metadata_image(self):
        return self.metadata.snapshot()


class FakeChannel:
    """Records requests; answers a StopReplica with delete as every partition deleted (through
    ``on_event``, as the real channel does)."""

    def __init__(self) -> None:
        self.sent: list = []
        self.live: dict = {}
        self.on_event = None
        self.lock = threading.Lock()

    def start(self, loop) -> None:
        pass

    def update_brokers(self, live) -> None:
        self.live = dict(live)

    def send(self, request) -> concurrent.futures.Future:
        with self.lock:
            self.sent.append(request)
        future: concurrent.futures.Future = concurrent.futures.Future()
        future.set_result(None)
        if isinstance(request, StopReplicaRequest) and self.on_event is not None:
            if any(p.delete_partition for p in request.partitions):
                self.on_event(stop_replica_outcome(request, StopReplicaResponse()))
        return future

    def of(self, kind, broker_id=None) -> list:
        with self.lock:
            return [r for r in self.sent if isinstance(r, kind)
                    and (broker_id is None or r.broker_id == broker_id)]

    def shutdown(self) -> None:
        pass


def wait_until(predicate, timeout: float = 5.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


async def async_wait_until(predicate, timeout: float = 5.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def write_topic(store, name: str, partitions: dict[int, tuple[int, ...]], topic_id=None) -> None:
    """What AdminZkClient writes: the assignment only (the controller makes the states)."""
    topic = TopicAssignment(name, topic_id or uuid.uuid4(), partitions)
    store.create(layout.topic_path(name), topic.to_json())


def state(store, topic: str, partition: int):
    from odradek.metadata.errors import NoNodeError

    try:
        data, version = store.get(layout.partition_state_path(topic, partition))
    except NoNodeError:
        return None
    return layout.PartitionState.from_json(data, version)
