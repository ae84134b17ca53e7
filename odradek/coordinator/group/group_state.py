"""The states of a classic group and the one table of allowed transitions (Kafka's).

::

    Empty ──join──▶ PreparingRebalance ──all joined / rebalance timeout──▶ CompletingRebalance
      ▲                 ▲       │                                              │
      │                 │       └──every member gone──▶ Empty                  │ leader's
      │                 │                                                      │ SyncGroup
      │                 └──join, leave, member death, metadata change── Stable ◀┘
      │
      └── (any state) ──▶ Dead: the group was deleted, expired, or its partition moved away

- Empty: no members; the group may still have committed offsets (a group that only stores
  offsets, or whose consumers all left). It becomes Dead when its offsets expire.
- PreparingRebalance: waiting for every member to (re)send JoinGroup, at most the rebalance
  timeout; members that do not come back are removed.
- CompletingRebalance: JoinGroup responses have gone out; waiting for the leader's
  SyncGroup carrying the assignment.
- Stable: every member has its assignment and heartbeats.
- Dead: nothing left; requests for it get COORDINATOR_NOT_AVAILABLE or GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

import enum


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    @classmethod
    def parse(cls, name: str) -> GroupState | None:
        """The state named ``name`` (any case, as ListGroups filters send it), or None."""
        return _BY_LOWER_NAME.get(name.lower())


_BY_LOWER_NAME = {s.value.lower(): s for s in GroupState}

# state -> the states it may be entered from.
VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalStateTransition(RuntimeError):
    """A transition the table does not allow: a bug in the coordinator, never bad input."""
