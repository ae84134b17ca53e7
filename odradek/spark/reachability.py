"""The first contact of a Spark job's process with the cluster: wait, up to a timeout, for
one of the bootstrap servers to accept a TCP connection.

odradek's clients give up connecting after three times ``socket.connection.setup.timeout.ms``
(30 s by default), and the source's offset lookups are then tried again
``fetchOffset.numRetries`` times, so a read against a broker that is down used to fail after
two minutes with a traceback of the client's internals. Kafka's own clients wait for a cluster
as long as the call's timeout allows; so does this, with the timeout of the setting that bounds
that first call in Spark's Kafka connector:

    driver, source (partitions and offsets)   kafka.default.api.timeout.ms   60000
    executor, source (a range's fetches)      kafkaConsumer.pollTimeoutMs    120000
    driver and executors, sink                kafka.max.block.ms             60000

and then fails with ``BrokersUnreachable``, one line naming the servers, the timeout and
the option (``errors``). Attempts go round the servers, each connect bounded by what is left
of the timeout and by 10 s (Kafka's ``socket.connection.setup.timeout.ms``), with a backoff
between rounds from 50 ms doubling to 1 s (``reconnect.backoff.ms``,
``reconnect.backoff.max.ms``). A server that accepts is enough: what follows (the protocol,
TLS, SASL) is the clients' to report.
"""

from __future__ import annotations

import socket
import time

from odradek.client.cluster import parse_bootstrap
from odradek.spark.errors import BrokersUnreachable

__all__ = ["wait_reachable"]

_CONNECT_TIMEOUT_S = 10.0
_BACKOFF_S, _BACKOFF_MAX_S = 0.05, 1.0


def wait_reachable(bootstrap: str, timeout_ms: int, option: str) -> None:
    """Return once a server of ``bootstrap`` ("host:port,...") accepts a connection; raise
    ``BrokersUnreachable`` (naming ``option``) when none did within ``timeout_ms``."""
    servers = parse_bootstrap(bootstrap)
    deadline = time.monotonic() + timeout_ms / 1000
    backoff = _BACKOFF_S
    errors: dict[str, str] = {}  # server -> its latest failure
    while True:
        for host, port in servers:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                socket.create_connection((host, port), timeout=min(left, _CONNECT_TIMEOUT_S)).close()
                return
            except OSError as e:
                errors[f"{host}:{port}"] = f"{host}:{port}: {e.strerror or e}"
        left = deadline - time.monotonic()
        if left <= 0:
            raise BrokersUnreachable(bootstrap, timeout_ms, option, list(errors.values()))
        time.sleep(min(backoff, left))
        backoff = min(backoff * 2, _BACKOFF_MAX_S)
