"""`AliveBrokers`: the brokers the controller last said are alive, as clients are told them.

A broker's registration (``/brokers/ids/<id>``, an ephemeral znode) outlives its process until
its ZooKeeper session expires. odradek's controller fails a broker whose process is gone well
before that (``controller/broker_liveness.py``) and leaves it out of every UpdateMetadata's
``live_brokers`` from then on. Kafka's brokers answer Metadata and DescribeCluster from that
list alone (``MetadataCache.getAliveBrokers``); so do odradek's, through `of`: a client must
not be sent to a broker the controller knows is gone (kafka-python, for one, asks a broker it
was told of for its group coordinator and gives up when the connection is refused).

Contract: `update` takes the ``live_brokers`` of each UpdateMetadata the broker accepted
(controller and broker epochs checked) and replaces the set held, unless the list leaves out
the receiving broker itself: a controller sends UpdateMetadata to live brokers only and lists
them all, so such a list is not a controller's (a stray or forged request), and a broker must
not hide itself from its clients on its word. `of(registered)` answers
the registrations the controller also lists, or all of them before the first UpdateMetadata
(a broker just started, or one without a controller yet). A broker that registers is listed
once the controller's UpdateMetadata names it, as in Kafka. Registrations stay what the
broker's own work uses (endpoints of leaders and of the controller): only what clients see,
and where new replicas may go, follow the controller.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeVar

V = TypeVar("V")


class AliveBrokers:
    """The broker ids of the last UpdateMetadata accepted; see the module docstring.

    Updated on the broker's event loop, read from any thread (one reference swapped)."""

    def __init__(self) -> None:
        self._ids: frozenset[int] | None = None

    def update(self, broker_ids: Iterable[int], receiver: int) -> bool:
        """Take ``broker_ids`` if they name ``receiver``; whether they were taken."""
        ids = frozenset(broker_ids)
        if receiver not in ids:
            return False
        self._ids = ids
        return True

    def of(self, registered: Mapping[int, V]) -> Mapping[int, V]:
        """``registered`` (by broker id) less the brokers the controller left out."""
        ids = self._ids
        if ids is None or ids.issuperset(registered):
            return registered
        return {b: info for b, info in registered.items() if b in ids}
