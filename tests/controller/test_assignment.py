"""Replica assignment: worked examples over brokers 1000-1004 exactly (the one in
``controller.assignment``'s docstring among them), then properties over random inputs."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.controller.assignment import (
    RackAwareMode,
    assign_new_partitions,
    assign_replicas_rack_aware,
    assign_replicas_rack_unaware,
    assign_replicas_to_brokers,
    rack_alternated_brokers,
    replica_index,
)
from odradek.metadata.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
)

BROKERS = [1000, 1001, 1002, 1003, 1004]


def by_broker(assignment: dict[int, list[int]], slot: int) -> dict[int, set[int]]:
    """For each broker, the partitions whose replica number ``slot`` it holds (0 = leader):
    the shape of per-broker assignment tables."""
    table: dict[int, set[int]] = {b: set() for b in BROKERS}
    for partition, replicas in assignment.items():
        table[replicas[slot]].add(partition)
    return table


# -- leaders: five brokers 1000-1004, ten partitions --------------------------------------


def test_leaders_when_partition_0_lands_on_1000():
    assignment = assign_replicas_rack_unaware(10, 1, BROKERS, fixed_start_index=0)
    assert by_broker(assignment, 0) == {
        1000: {0, 5},
        1001: {1, 6},
        1002: {2, 7},
        1003: {3, 8},
        1004: {4, 9},
    }


def test_leaders_when_partition_0_lands_on_1002():
    assignment = assign_replicas_rack_unaware(10, 1, BROKERS, fixed_start_index=2)
    assert by_broker(assignment, 0) == {
        1000: {3, 8},
        1001: {4, 9},
        1002: {0, 5},
        1003: {1, 6},
        1004: {2, 7},
    }


# -- followers: the same brokers and partitions, three replicas ----------------------------
# The worked run has start index 0 (partition 0 on 1000) and a follower shift (random in Kafka)
# of 3: partition 1's first follower is 1000, four places after its leader 1001.


@pytest.fixture
def worked_example_run():
    return assign_replicas_rack_unaware(10, 3, BROKERS, fixed_start_index=0, replica_shift=3)


def test_worked_example_follower_table(worked_example_run):
    assert by_broker(worked_example_run, 0) == {
        1000: {0, 5},
        1001: {1, 6},
        1002: {2, 7},
        1003: {3, 8},
        1004: {4, 9},
    }
    assert by_broker(worked_example_run, 1) == {
        1000: {1, 9},
        1001: {2, 5},
        1002: {3, 6},
        1003: {4, 7},
        1004: {0, 8},
    }
    assert by_broker(worked_example_run, 2) == {
        1000: {4, 8},
        1001: {0, 9},
        1002: {1, 5},
        1003: {2, 6},
        1004: {3, 7},
    }


def test_worked_example_partitions(worked_example_run):
    # Partition 1: leader on 1001, followers on 1000 and 1002.
    assert worked_example_run[1] == [1001, 1000, 1002]
    # Partition 3: leader on 1003, followers from 1002: [1002, 1004].
    assert worked_example_run[3] == [1003, 1002, 1004]
    # Partition 7: from partition 5 on the shift is one more: followers [1003, 1004].
    assert worked_example_run[7][1:] == [1003, 1004]


def test_replica_index_never_lands_on_the_leader():
    for n in range(2, 8):
        for first in range(n):
            for shift in range(n):
                for j in range(n - 1):
                    assert replica_index(first, shift, j, n) != first


def test_fixed_start_index_also_fixes_the_shift():
    # Kafka: with fixedStartIndex >= 0 both the start and the shift take its value.
    assert assign_replicas_rack_unaware(5, 2, BROKERS, 1) == assign_replicas_rack_unaware(
        5, 2, BROKERS, 1, replica_shift=1
    )


def test_start_partition_id_numbers_on():
    assignment = assign_replicas_rack_unaware(3, 2, BROKERS, 0, start_partition_id=10)
    assert sorted(assignment) == [10, 11, 12]
    assert [r[0] for r in assignment.values()] == [1000, 1001, 1002]


# -- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize("rf", [0, -1, 6])
def test_bad_replication_factor(rf):
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas_rack_unaware(3, rf, BROKERS)
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas_to_brokers({b: None for b in BROKERS}, 3, rf)


@pytest.mark.parametrize("partitions", [0, -3])
def test_bad_partition_count(partitions):
    with pytest.raises(InvalidPartitionsError):
        assign_replicas_rack_unaware(partitions, 1, BROKERS)


def test_no_brokers_means_no_replication_factor_fits():
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas_to_brokers({}, 1, 1)


def test_racks_on_only_some_brokers():
    racks = {1: "a", 2: None, 3: "b"}
    with pytest.raises(InvalidReplicaAssignmentError):
        assign_replicas_to_brokers(racks, 3, 2)
    safe = assign_replicas_to_brokers(racks, 3, 2, 0, rack_aware_mode=RackAwareMode.SAFE)
    assert safe == assign_replicas_rack_unaware(3, 2, [1, 2, 3], 0)


# -- rack-aware -----------------------------------------------------------------------------


def test_rack_alternated_order():
    racks = {
        0: "rack1",
        1: "rack1",
        2: "rack1",
        3: "rack2",
        4: "rack2",
        5: "rack2",
        6: "rack3",
        7: "rack3",
    }
    assert rack_alternated_brokers(racks) == [0, 3, 6, 1, 4, 7, 2, 5]
    assert rack_alternated_brokers({5: "b", 9: "a", 1: "a"}) == [1, 5, 9]


def test_rack_aware_small_example():
    # arranged list [0, 2, 1, 3]; leaders go round it, followers take the other rack first.
    racks = {0: "a", 1: "a", 2: "b", 3: "b"}
    assert assign_replicas_rack_aware(4, 3, racks, 0) == {
        0: [0, 2, 1],
        1: [2, 1, 3],
        2: [1, 3, 0],
        3: [3, 0, 2],
    }


def test_disabled_mode_ignores_racks():
    racks = {0: "a", 1: "a", 2: "b"}
    assert assign_replicas_to_brokers(racks, 4, 2, 0, rack_aware_mode=RackAwareMode.DISABLED) == (
        assign_replicas_rack_unaware(4, 2, [0, 1, 2], 0)
    )


# Kafka's AdminRackAwareTest: six brokers in three racks, seven partitions, three replicas.
KAFKA_RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_kafkas_rack_alternated_list_and_assignment():
    assert rack_alternated_brokers(KAFKA_RACKS) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_brokers({b: r for b, r in KAFKA_RACKS.items() if b != 5}) == [0, 3, 1, 4, 2]
    assert assign_replicas_to_brokers(KAFKA_RACKS, 7, 3, 0, 0) == {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],  # the second round shifts the followers
    }


# The seed's five brokers, 1000-1004, in two racks of three and two.
SEED_RACKS = {1000: "rack-a", 1001: "rack-a", 1002: "rack-a", 1003: "rack-b", 1004: "rack-b"}


def test_seed_brokers_in_two_racks_worked_example():
    assert rack_alternated_brokers(SEED_RACKS) == [1000, 1003, 1001, 1004, 1002]
    assignment = assign_replicas_to_brokers(SEED_RACKS, 10, 3, 0)
    assert [assignment[p] for p in range(6)] == [
        [1000, 1003, 1001],  # leader from the alternated list, then the other rack first
        [1003, 1001, 1004],
        [1001, 1004, 1002],
        [1004, 1002, 1000],
        [1002, 1003, 1001],
        [1000, 1004, 1002],  # partition 5 starts the second round: followers shifted
    ]


def check_distribution(assignment, racks, rf, *, even_replicas=True):
    """Kafka's ``RackAwareTest.checkReplicaDistribution``: no broker twice in a partition,
    every partition on ``min(rf, racks)`` racks, leaders (and replicas) even over brokers."""
    n_racks = len(set(racks.values()))
    for replicas in assignment.values():
        assert len(set(replicas)) == rf
        assert len({racks[b] for b in replicas}) == min(rf, n_racks)
    leaders = Counter(r[0] for r in assignment.values())
    assert set(leaders.values()) == {len(assignment) // len(racks)}
    assert set(leaders) == set(racks)
    if even_replicas:
        load = Counter(b for r in assignment.values() for b in r)
        assert set(load.values()) == {len(assignment) * rf // len(racks)}


@pytest.mark.parametrize("rf", [2, 3])
@pytest.mark.parametrize("start", [-1, 0, 3])
def test_seed_brokers_in_two_racks_spread_and_balance(rf, start):
    # Two racks: RF 2 puts one replica in each; RF 3 keeps both racks in every partition.
    assignment = assign_replicas_to_brokers(SEED_RACKS, 10, rf, start, rng=random.Random(5))
    check_distribution(assignment, SEED_RACKS, rf, even_replicas=False)


@pytest.mark.parametrize(("racks", "partitions", "rf"), [
    (KAFKA_RACKS, 6, 3),
    ({0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}, 12, 2),
    ({0: "rack1", 1: "rack2", 4: "rack3"}, 3, 2),
    ({b: f"rack{1 + b % 3}" for b in range(12)}, 96, 3),
])
def test_kafkas_even_distributions(racks, partitions, rf):
    check_distribution(assign_replicas_to_brokers(racks, partitions, rf, rng=random.Random(1)), racks, rf)


def test_more_replicas_than_racks_use_every_rack():
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
    for replicas in assign_replicas_to_brokers(racks, 6, 5).values():
        assert len(set(replicas)) == 5 and {racks[b] for b in replicas} == {"rack1", "rack2", "rack3"}


def test_one_rack_is_the_rack_unaware_spread():
    racks = dict.fromkeys(range(6), "rack1")
    assignment = assign_replicas_to_brokers(racks, 6, 3)
    assert Counter(r[0] for r in assignment.values()) == Counter(range(6))


def test_new_partitions_of_a_rack_aware_topic_stay_rack_aware():
    existing = assign_replicas_to_brokers(SEED_RACKS, 4, 2, 0)
    added = assign_new_partitions(SEED_RACKS, existing, 9)
    assert sorted(added) == [4, 5, 6, 7, 8]
    assert all({SEED_RACKS[b] for b in r} == {"rack-a", "rack-b"} for r in added.values())
    with pytest.raises(InvalidReplicaAssignmentError):
        assign_new_partitions({**SEED_RACKS, 1005: None}, existing, 9)
    unaware = assign_new_partitions({**SEED_RACKS, 1005: None}, existing, 9,
                                    rack_aware_mode=RackAwareMode.DISABLED)
    assert sorted(unaware) == [4, 5, 6, 7, 8]


# -- new partitions -------------------------------------------------------------------------


def test_new_partitions_continue_from_partition_0s_leader():
    existing = assign_replicas_rack_unaware(3, 2, BROKERS, 1)
    added = assign_new_partitions({b: None for b in BROKERS}, existing, 6, rng=random.Random(7))
    assert sorted(added) == [3, 4, 5]
    assert [added[p][0] for p in (3, 4, 5)] == [1004, 1000, 1001]
    assert all(len(r) == 2 for r in added.values())
    with pytest.raises(InvalidPartitionsError):
        assign_new_partitions({b: None for b in BROKERS}, existing, 3)


# -- properties -----------------------------------------------------------------------------

broker_sets = st.lists(st.integers(0, 10_000), min_size=1, max_size=12, unique=True)


@given(data=st.data(), brokers=broker_sets)
def test_unaware_replicas_are_distinct_and_leaders_even(data, brokers):
    brokers.sort()
    rf = data.draw(st.integers(1, len(brokers)))
    partitions = data.draw(st.integers(1, 60))
    seed = data.draw(st.integers(0, 2**32))
    assignment = assign_replicas_rack_unaware(partitions, rf, brokers, rng=random.Random(seed))
    assert sorted(assignment) == list(range(partitions))
    for replicas in assignment.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
        assert set(replicas) <= set(brokers)
    leaders = Counter(r[0] for r in assignment.values())
    counts = [leaders.get(b, 0) for b in brokers]
    assert max(counts) - min(counts) <= 1


@given(data=st.data(), brokers=broker_sets)
def test_unaware_whole_rounds_give_every_broker_the_same_load(data, brokers):
    rf = data.draw(st.integers(1, len(brokers)))
    rounds = data.draw(st.integers(1, 4))
    start = data.draw(st.integers(0, len(brokers) - 1))
    assignment = assign_replicas_rack_unaware(len(brokers) * rounds, rf, sorted(brokers), start)
    load = Counter(b for replicas in assignment.values() for b in replicas)
    assert set(load.values()) == {rf * rounds}


@given(data=st.data())
def test_rack_aware_spreads_over_racks(data):
    n_racks = data.draw(st.integers(1, 4))
    brokers = data.draw(st.lists(st.integers(0, 500), min_size=n_racks, max_size=10, unique=True))
    racks = {b: f"rack{i % n_racks}" for i, b in enumerate(brokers)}
    rf = data.draw(st.integers(1, len(brokers)))
    partitions = data.draw(st.integers(1, 40))
    seed = data.draw(st.integers(0, 2**32))
    assignment = assign_replicas_to_brokers(racks, partitions, rf, rng=random.Random(seed))
    for replicas in assignment.values():
        assert len(set(replicas)) == rf
        assert len({racks[b] for b in replicas}) == min(rf, n_racks)
    leaders = Counter(r[0] for r in assignment.values())
    counts = [leaders.get(b, 0) for b in brokers]
    assert max(counts) - min(counts) <= 1
