"""odradek clients shared by everything running in one Python process of a Spark job.

Spark reuses its Python workers across tasks, and a task only carries what its pickled
reader or writer holds, so connections are not passed around: each process keeps one event
loop thread and, per bootstrap address, one ``ClusterClient`` (connections and metadata)
and one ``AsyncProducer``, per client configuration, created on first use. Tasks of the same worker then skip the
connect and metadata round trips. A fork (Spark's daemon forks its workers) leaves threads
behind, so the pool notices a new process id and starts afresh.

Everything here is called from the task's thread; the asyncio objects are only touched on
the loop's thread (``run``/``call``), as ``odradek.client.sync`` does.

A client is made once a bootstrap server accepts a connection (``reachability``): a producer
waits up to its ``max_block_ms`` (``kafka.max.block.ms``), a cluster client as long as its
caller's ``reach`` says; past that, ``BrokersUnreachable`` names the servers in one line.
"""

from __future__ import annotations

import atexit
import os
import threading

from odradek.client.client_security import connection_settings
from odradek.client.cluster import ClusterClient
from odradek.client.producer import AsyncProducer
from odradek.client.sync import EventLoopThread
from odradek.spark.reachability import wait_reachable

__all__ = ["loop_thread", "cluster", "producer", "reset"]

_lock = threading.Lock()
_state: dict = {"pid": None, "thread": None, "clusters": {}, "producers": {}}


def _fresh() -> dict:
    """The pool of this process (a new, empty one after a fork)."""
    if _state["pid"] != os.getpid():
        _state.update(pid=os.getpid(), thread=None, clusters={}, producers={})
    return _state


def loop_thread() -> EventLoopThread:
    with _lock:
        state = _fresh()
        if state["thread"] is None:
            state["thread"] = EventLoopThread("odradek-spark")
        return state["thread"]


def cluster(bootstrap: str, config: tuple = (), reach: tuple[int, str] | None = None) -> ClusterClient:
    """The started ``ClusterClient`` of ``bootstrap`` with ``config`` (its keywords as sorted
    pairs; use it through ``loop_thread()``). ``reach``: (timeout in ms, the option that sets
    it) to wait for a new client's cluster to accept a connection."""
    thread = loop_thread()
    key = (bootstrap, config)
    with _lock:
        client = _fresh()["clusters"].get(key)
        if client is None:
            if reach is not None:
                wait_reachable(bootstrap, *reach)
            settings = {"client_id": "odradek-spark", **dict(config)}
            # security.protocol, ssl.*, sasl.* as pairs: the TLS context is made in this process
            settings.update(connection_settings(settings.pop("security", ())))
            client = ClusterClient(bootstrap, **settings)
            thread.run(client.start())
            _state["clusters"][key] = client
        return client


def producer(bootstrap: str, **config) -> AsyncProducer:
    """The started ``AsyncProducer`` of ``bootstrap`` with ``config`` (idempotent, acks=all
    unless ``config`` says otherwise)."""
    thread = loop_thread()
    key = (bootstrap, tuple(sorted(config.items())))
    with _lock:
        client = _fresh()["producers"].get(key)
        if client is None:
            wait_reachable(bootstrap, config.get("max_block_ms", 60_000), "kafka.max.block.ms")
            settings = {"acks": "all", "linger_ms": 5, "batch_size": 262_144, "client_id": "odradek-spark"}
            settings.update(config)
            client = AsyncProducer(bootstrap, **settings)
            thread.run(client.start())
            _state["producers"][key] = client
        return client


def reset() -> None:
    """Close every client of this process (tests; and at exit, to deliver what is queued)."""
    with _lock:
        state = _fresh()
        thread = state["thread"]
        if thread is None:
            return
        for client in list(state["producers"].values()) + list(state["clusters"].values()):
            try:
                thread.run(client.close(), 30)
            except Exception:  # noqa: BLE001 - closing is best effort
                pass
        thread.stop()
        state.update(thread=None, clusters={}, producers={})


atexit.register(reset)
