"""Connection limits per client address and per broker (Kafka's ``ConnectionQuotas``).

``max.connections.per.ip`` bounds the connections one address may hold, with exceptions in
``max.connections.per.ip.overrides`` (``host:count,host:count``; a host name is resolved
once, when the setting is read). A connection over its address's limit is closed as soon as
it is accepted, and Kafka's line is logged: "Rejected connection from /127.0.0.1, address
already has the configured maximum of 2 connections." ``max.connections`` bounds them all:
where Kafka's acceptor stops accepting until a slot frees, odradek closes the new connection
at once (an asyncio server cannot hold back single accepts), so a client sees a closed
connection and retries. All three are dynamic broker configs: every check reads
``Broker.effective_config()``, so a change applies to the next connection.
"""

from __future__ import annotations

import logging
import socket
from collections import Counter

log = logging.getLogger("odradek.server")


def parse_overrides(text: str) -> dict[str, int]:
    """``"host:count,..."`` as ``{address: count}``; raises ValueError on a bad entry."""
    out: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in (text or "").split(","))):
        host, sep, count = item.rpartition(":")
        if not sep or not host or not count.strip().isdigit():
            raise ValueError(f"max.connections.per.ip.overrides: {item!r} is not host:count")
        try:
            address = socket.gethostbyname(host.strip())
        except OSError:
            address = host.strip()
        out[address] = int(count)
    return out


class ConnectionQuotas:
    """Counts of open, admitted connections by address."""

    def __init__(self, config_source) -> None:
        self._config = config_source  # () -> BrokerConfig with the dynamic configs applied
        self._counts: Counter[str] = Counter()
        self._total = 0
        self._overrides_text: str | None = None
        self._overrides: dict[str, int] = {}

    def admit(self, address: str) -> bool:
        """Count a new connection from ``address``; False (and nothing counted) when over a
        limit, so the caller closes it."""
        config = self._config()
        limit = self._per_ip_limit(config, address)
        if self._counts[address] >= limit:
            log.info("Rejected connection from /%s, address already has the configured maximum of %d connections.",
                     address, limit)
            return False
        if self._total >= config["max.connections"]:
            log.info("Rejected connection from /%s, the broker already has the configured maximum of %d "
                     "connections (max.connections).", address, config["max.connections"])
            return False
        self._counts[address] += 1
        self._total += 1
        return True

    def release(self, address: str) -> None:
        """Forget an admitted connection that closed."""
        self._total -= 1
        self._counts[address] -= 1
        if self._counts[address] <= 0:
            del self._counts[address]

    def _per_ip_limit(self, config, address: str) -> int:
        text = config["max.connections.per.ip.overrides"]
        if text != self._overrides_text:
            try:
                self._overrides = parse_overrides(text)
            except ValueError:  # checked when it was set; keep the last good one
                pass
            self._overrides_text = text
        return self._overrides.get(address, config["max.connections.per.ip"])
