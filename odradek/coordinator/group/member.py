"""``GroupMember``: one member of a classic group, as the coordinator tracks it.

A member is known by its ``member_id`` (the coordinator assigns it: ``client_id-uuid``, or
``group_instance_id-uuid`` for a static member) and, when static, by its
``group_instance_id``, which survives restarts. It supports one or more protocols (for a
consumer: assignors such as ``range`` or ``cooperative-sticky``), in order of preference, each
with opaque metadata (the subscription). ``assignment`` is what the leader gave it in the last
completed rebalance.

The two callbacks are the member's waiting requests: ``join_callback`` is set while its
JoinGroup waits for the rebalance to complete, ``sync_callback`` while its SyncGroup waits
for the leader's assignment. Each is called at most once and then cleared.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

Protocols = tuple[tuple[str, bytes], ...]


@dataclass(eq=False, slots=True)
class GroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    join_callback: Callable | None = field(default=None, repr=False)
    sync_callback: Callable | None = field(default=None, repr=False)
    # True from its first JoinGroup until its first generation: such a member is removed when
    # its (long) join timer runs out, even while it is awaiting the join.
    is_new: bool = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def awaiting_join(self) -> bool:
        return self.join_callback is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_callback is not None

    def protocol_names(self) -> list[str]:
        """Each name once, in the member's order of preference: a request may list a name
        twice, and the group counts members per protocol (Kafka keeps a set)."""
        return list(dict.fromkeys(name for name, _ in self.protocols))

    def metadata(self, protocol: str) -> bytes:
        """The member's metadata for ``protocol``; KeyError if it does not support it."""
        for name, data in self.protocols:
            if name == protocol:
                return data
        raise KeyError(protocol)

    def matches(self, protocols: Protocols) -> bool:
        """Same protocols, same order, same metadata: a rejoin that changes nothing."""
        return len(protocols) == len(self.protocols) and all(
            a[0] == b[0] and bytes(a[1]) == bytes(b[1]) for a, b in zip(protocols, self.protocols))

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")
