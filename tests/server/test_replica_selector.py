"""``RackAwareReplicaSelector`` (server/replica_selector.py) and the candidates the leader gives
it (server/fetch_from_follower.partition_view), without a broker: Kafka's rules of
``ReplicaSelectorTest`` and ``ReplicaManager.findPreferredReadReplica``."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import pytest

from odradek.metadata.layout import BrokerInfo
from odradek.replication.follower_state import FollowerState
from odradek.server.config import BrokerConfig, ConfigError
from odradek.server.fetch_from_follower import partition_view, preferred_read_replica
from odradek.server.replica_selector import (
    RACK_AWARE,
    ClientMetadata,
    PartitionView,
    RackAwareReplicaSelector,
    ReplicaView,
    make_replica_selector,
)

SELECTOR = RackAwareReplicaSelector()
LEADER = ReplicaView(1, "r1", 100, 0)


def select(rack: str, *followers: ReplicaView) -> int:
    return SELECTOR.select(ClientMetadata(rack), PartitionView((LEADER, *followers), LEADER)).broker_id


def test_the_leader_without_a_rack_or_a_replica_in_the_consumers_rack():
    follower = ReplicaView(2, "r2", 100, 0)
    assert select("", follower) == 1
    assert select("r9", follower) == 1


def test_the_leader_when_it_is_in_the_consumers_rack():
    assert select("r1", ReplicaView(2, "r1", 100, 0)) == 1


def test_the_most_caught_up_replica_of_the_consumers_rack():
    behind, ahead = ReplicaView(2, "r2", 90, 0), ReplicaView(3, "r2", 95, 5_000)
    assert select("r2", behind, ahead, ReplicaView(4, "r3", 100, 0)) == 3
    # the same log end offset: the one caught up most recently, then the highest broker id
    assert select("r2", ReplicaView(2, "r2", 95, 10), ReplicaView(3, "r2", 95, 2_000)) == 2
    assert select("r2", ReplicaView(2, "r2", 95, 10), ReplicaView(3, "r2", 95, 10)) == 3


def test_a_replica_without_a_rack_never_matches():
    assert select("r2", ReplicaView(2, None, 100, 0)) == 1


def test_the_config_names_the_selector():
    assert make_replica_selector(BrokerConfig.from_props({})) is None
    assert isinstance(make_replica_selector(BrokerConfig.from_props({"replica.selector.class": RACK_AWARE})),
                      RackAwareReplicaSelector)
    with pytest.raises(ConfigError, match="replica.selector.class"):
        make_replica_selector(BrokerConfig.from_props({"replica.selector.class": "com.example.Nearest"}))


# --- the leader's candidates ---------------------------------------------------------------

@dataclass
class _Part:
    """What partition_view reads of a ``Partition`` led by broker 1."""
    isr: tuple[int, ...]
    followers: dict[int, FollowerState]
    log_end_offset: int = 10
    leader_id: int = 1

    def is_leader(self, broker_id: int) -> bool:
        return broker_id == self.leader_id


RACKS = {1: "r1", 2: "r2", 3: "r3"}
BROKERS = {b: BrokerInfo(b, (), rack) for b, rack in RACKS.items()}


def _follower(start: int, end: int, caught_up_ms: int = 1_000) -> FollowerState:
    return FollowerState(log_start_offset=start, log_end_offset=end, last_caught_up_time_ms=caught_up_ms)


def _broker(part_brokers=BROKERS, selector=SELECTOR):
    image = SimpleNamespace(brokers=part_brokers)
    return SimpleNamespace(broker_id=1, replica_selector=selector, metadata_image=lambda: image,
                           clock=SimpleNamespace(milliseconds=lambda: 5_000))


def test_candidates_are_the_live_in_sync_replicas_that_hold_the_offset():
    part = _Part(isr=(1, 2, 3), followers={2: _follower(0, 10), 3: _follower(0, 10, 4_000)})
    view = partition_view(part, 1, BROKERS, 7, 5_000)
    assert view.leader == ReplicaView(1, "r1", 10, 0)
    assert set(view.replicas) == {view.leader, ReplicaView(2, "r2", 10, 4_000), ReplicaView(3, "r3", 10, 1_000)}
    client = ClientMetadata("r2")
    assert preferred_read_replica(_broker(), part, client, 7) == 2
    assert preferred_read_replica(_broker(), part, ClientMetadata("r1"), 7) == -1  # the leader: not named


def test_a_replica_out_of_the_isr_is_never_preferred():
    """Kafka's findPreferredReadReplica: a follower out of the ISR may lag without bound."""
    part = _Part(isr=(1, 3), followers={2: _follower(0, 10), 3: _follower(0, 10)})
    assert [r.broker_id for r in partition_view(part, 1, BROKERS, 7, 5_000).replicas] == [1, 3]
    assert preferred_read_replica(_broker(), part, ClientMetadata("r2"), 7) == -1


@pytest.mark.parametrize("offset", [3, 11])
def test_a_replica_whose_log_does_not_hold_the_offset_is_not_a_candidate(offset):
    part = _Part(isr=(1, 2), followers={2: _follower(5, 10)})
    assert preferred_read_replica(_broker(), part, ClientMetadata("r2"), offset) == -1
    assert preferred_read_replica(_broker(), part, ClientMetadata("r2"), 10) == 2  # at its log end: yes


def test_a_dead_broker_is_not_a_candidate():
    part = _Part(isr=(1, 2), followers={2: _follower(0, 10)})
    alive = {b: info for b, info in BROKERS.items() if b != 2}
    assert preferred_read_replica(_broker(alive), part, ClientMetadata("r2"), 5) == -1


def test_only_a_leader_with_a_selector_names_a_replica_and_only_for_client_metadata():
    part = _Part(isr=(1, 2), followers={2: _follower(0, 10)})
    assert preferred_read_replica(_broker(selector=None), part, ClientMetadata("r2"), 5) == -1
    assert preferred_read_replica(_broker(), part, None, 5) == -1  # Fetch before v11
    follower_here = _Part(isr=(1, 2), followers={}, leader_id=2)
    assert preferred_read_replica(_broker(), follower_here, ClientMetadata("r2"), 5) == -1
