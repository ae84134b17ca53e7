"""The states of an in-flight record, acknowledgement types and share-partition states.

Ids are Kafka's wire and persister ids (Kafka's RecordState, AcknowledgeType,
SharePartition.SharePartitionState):

    RecordState      0 AVAILABLE   may be acquired (delivered) by any member
                     1 ACQUIRED    held by one member until acknowledged or its lock expires
                     2 ACKNOWLEDGED  accepted: never delivered again
                     4 ARCHIVED    rejected, a gap, an aborted transaction's record, or released
                                   too often (group.share.delivery.count.limit): never again
    AcknowledgeType  0 GAP (archive: no record at this offset), 1 ACCEPT, 2 RELEASE,
                     3 REJECT, 4 RENEW (KIP-1222, Kafka 4.2: extend the acquisition lock)

ACQUIRED is never persisted: the share coordinator only sees 0, 2 and 4
(``odradek/coordinator/share/persister.py``).
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["RecordState", "AcknowledgeType", "SharePartitionState", "TERMINAL_STATES"]


class RecordState(IntEnum):
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


TERMINAL_STATES = frozenset({RecordState.ACKNOWLEDGED, RecordState.ARCHIVED})


class AcknowledgeType(IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


class SharePartitionState(IntEnum):
    """Lifecycle of a SharePartition (Kafka's SharePartitionState).

    EMPTY → INITIALIZING → ACTIVE; FAILED when the persisted state could not be read;
    FENCED when the persister refused a write by state or leader epoch: the share partition
    must be dropped and built again from the persister.
    """

    EMPTY = 0
    INITIALIZING = 1
    ACTIVE = 2
    FAILED = 3
    FENCED = 4
