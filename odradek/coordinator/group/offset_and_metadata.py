"""``OffsetAndMetadata``: one committed offset of a group for one partition."""

from __future__ import annotations

from dataclasses import dataclass

NO_LEADER_EPOCH = -1


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """What a consumer committed for a partition.

    ``offset`` is the next offset to consume; ``leader_epoch`` the epoch of the record before it
    (-1 when unknown, as clients before KIP-320 send); ``metadata`` a client string (never
    None here: a null from the wire is stored as ""); ``commit_timestamp_ms`` when the
    coordinator took the commit; ``expire_timestamp_ms`` only for commits that asked for their
    own retention (OffsetCommit v2-v4 ``retention_time_ms``), else None: such offsets expire
    by the group's state and ``offsets.retention.minutes`` instead.
    """

    offset: int
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = ""
    commit_timestamp_ms: int = 0
    expire_timestamp_ms: int | None = None
