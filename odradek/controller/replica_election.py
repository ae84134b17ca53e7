"""Admin-requested leader elections: Kafka's ``KafkaController.processReplicaLeaderElection``
for the ElectLeaders API (``AdminClientTriggered``), without I/O.

``elect_leaders(ctx, partitions, event)`` sorts the requested partitions (None: every
partition the controller knows) and elects where an election is needed:

=============================  ===========================================================
partition                      outcome (`commands.ElectionOutcome`)
=============================  ===========================================================
unknown to the controller      UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
of a topic being deleted       INVALID_TOPIC_EXCEPTION, "The topic is being deleted"
PREFERRED, led by its first    ELECTION_NOT_NEEDED
replica already
UNCLEAN, led by a live broker  ELECTION_NOT_NEEDED
elected                        NONE, with the new leader (the broker's handler waits until
                               its metadata shows that leader, Kafka's DelayedElectLeader)
no replica may lead            PREFERRED_LEADER_NOT_AVAILABLE (preferred: the first replica
                               is dead or out of the ISR) or ELIGIBLE_LEADERS_NOT_AVAILABLE
                               (unclean: no assigned replica is live)
=============================  ===========================================================

The elections go through the partition state machine (`ElectionStrategy.PREFERRED`, or
`ElectionStrategy.OFFLINE_UNCLEAN`: a live ISR member if there is one, else the first live
assigned replica, out of sync or not), so their writes and LeaderAndIsr/UpdateMetadata are
batched like any other election's. Worked example: replicas [1, 2], ISR [1], leader 1; broker
1 dies and the partition has no leader (unclean election disabled). An UNCLEAN request elects
2 with ISR [2] at the next leader epoch; a PREFERRED one answers
PREFERRED_LEADER_NOT_AVAILABLE.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

from odradek.controller.commands import ElectionOutcome, TopicPartition
from odradek.controller.controller_context import ControllerContext
from odradek.controller.controller_context import PartitionStateName as P
from odradek.controller.leader_election import ElectionResult, ElectionStrategy
from odradek.controller.partition_state_machine import PartitionStateMachine, StateChangeFailed
from odradek.metadata.layout import NO_LEADER, PartitionState
from odradek.protocol.generated.error_codes import ErrorCode


class ElectionType(enum.IntEnum):
    """Kafka's ``ElectionType``: the byte of ElectLeaders v1+ (v0 is always PREFERRED)."""

    PREFERRED = 0
    UNCLEAN = 1


def elect_leaders(
    ctx: ControllerContext,
    partitions: PartitionStateMachine,
    requested: Iterable[TopicPartition] | None,
    election_type: ElectionType,
) -> tuple[list[ElectionOutcome], list[TopicPartition]]:
    """Elect leaders for ``requested`` (see the module docstring); returns an outcome per
    partition, in order, and the partitions that got an out-of-sync leader (to log)."""
    candidates = ctx.all_partitions() if requested is None else sorted(set(requested))
    outcomes: dict[TopicPartition, ElectionOutcome] = {}
    electable = []
    for tp in candidates:
        if tp not in ctx.assignments:
            outcomes[tp] = _failed(tp, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                   "The partition does not exist.")
        elif ctx.is_queued_for_deletion(tp[0]):
            outcomes[tp] = _failed(tp, ErrorCode.INVALID_TOPIC_EXCEPTION,
                                   "The topic is being deleted")
        elif _needs_election(ctx, tp, election_type):
            electable.append(tp)
        else:
            outcomes[tp] = _failed(tp, ErrorCode.ELECTION_NOT_NEEDED, None)
    strategy = (ElectionStrategy.PREFERRED if election_type is ElectionType.PREFERRED
                else ElectionStrategy.OFFLINE_UNCLEAN)
    unclean = []
    for tp, result in partitions.handle_state_changes(electable, P.ONLINE, strategy).items():
        outcomes[tp] = _outcome(tp, result, election_type)
        if isinstance(result, ElectionResult) and result.unclean:
            unclean.append(tp)
    return [outcomes[tp] for tp in candidates], unclean


def _needs_election(ctx: ControllerContext, tp: TopicPartition, election_type: ElectionType) -> bool:
    """Kafka's split into electable partitions and those with a valid leader already: for
    PREFERRED, a leader other than the first replica; for UNCLEAN, no live leader."""
    state = ctx.leadership.get(tp)
    leader = NO_LEADER if state is None else state.leader
    if election_type is ElectionType.PREFERRED:
        replicas = ctx.replicas(tp)
        return not replicas or leader != replicas[0]
    return leader == NO_LEADER or leader not in ctx.live_brokers


def _outcome(tp: TopicPartition, result, election_type: ElectionType) -> ElectionOutcome:
    """The state machine's answer for one partition as the API says it."""
    if isinstance(result, ElectionResult) and result.leader_and_isr is not None:
        return ElectionOutcome(tp[0], tp[1], ErrorCode.NONE, None, result.leader_and_isr.leader)
    if isinstance(result, PartitionState):  # a New partition got its first leader
        return ElectionOutcome(tp[0], tp[1], ErrorCode.NONE, None, result.leader)
    error = (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE if election_type is ElectionType.PREFERRED
             else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE)
    message = str(result) if isinstance(result, StateChangeFailed) else None
    return _failed(tp, error, message)


def _failed(tp: TopicPartition, error: ErrorCode, message: str | None) -> ElectionOutcome:
    return ElectionOutcome(tp[0], tp[1], error, message)
