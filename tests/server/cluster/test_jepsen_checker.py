"""The partition tests' checker (tests/server/cluster/jepsen_checker.py) on made-up histories."""

from __future__ import annotations

from tests.server.cluster.jepsen_checker import Write, check, replica_divergence


def acked(producer: str, seq: int, partition: int, offset: int) -> Write:
    return Write(producer, seq, partition, "ok", offset)


def v(producer: str, seq: int) -> bytes:
    return f"{producer}-{seq}".encode()


def test_a_value_names_its_producer_and_sequence():
    assert Write("odradek", 3, 0, "ok", 9).value == b"odradek-3"


def test_a_clean_history_passes_and_unacknowledged_records_may_be_anywhere():
    writes = [acked("a", 0, 0, 0), acked("a", 1, 1, 0), Write("a", 2, 0, "failed"), Write("a", 3, 1, "unknown"),
              acked("b", 0, 0, 1), Write("b", 1, 0, "unknown")]
    read = {0: [(0, v("a", 0)), (1, v("b", 0)), (2, v("a", 2))], 1: [(0, v("a", 1))]}
    verdict = check(writes, read)
    assert verdict.ok, verdict.describe()
    assert (verdict.writes, verdict.acknowledged, verdict.read) == (6, 3, 4)


def test_lost_acknowledged_records_are_counted_with_examples():
    writes = [acked("a", s, 0, s) for s in range(10)]
    read = {0: [(s, v("a", s)) for s in range(4)]}  # offsets 4..9 truncated away
    verdict = check(writes, read)
    assert not verdict.ok
    assert [w.seq for w in verdict.lost] == [4, 5, 6, 7, 8, 9]
    message = verdict.describe()
    assert "6 acknowledged lost" in message and "a-4 (p0 @4)" in message and "a-9" not in message
    assert "by producer {'a': 6}" in message


def test_an_acknowledged_record_found_at_another_offset_has_moved():
    writes = [acked("a", 0, 0, 0), acked("a", 1, 0, 1)]
    read = {0: [(0, v("a", 0)), (1, v("x", 0)), (2, v("a", 1))]}
    verdict = check(writes, read)
    assert [(w.seq, at) for w, at in verdict.moved] == [(1, [2])]
    assert [(p, o) for p, o, _ in verdict.unexpected] == [(0, 1)]
    assert "acked @1, read @[2]" in verdict.describe()


def test_a_record_written_twice_is_duplicated_even_when_it_failed():
    writes = [acked("a", 0, 0, 0), Write("a", 1, 0, "failed"), acked("a", 2, 0, 3)]
    read = {0: [(0, v("a", 0)), (1, v("a", 1)), (2, v("a", 1)), (3, v("a", 2))]}
    verdict = check(writes, read)
    assert [(value, at) for value, at in verdict.duplicated] == [(v("a", 1), [(0, 1), (0, 2)])]
    assert not verdict.reordered and not verdict.lost and not verdict.moved  # a repeat is a duplicate only
    assert "1 duplicated" in verdict.summary()


def test_a_producers_records_out_of_sequence_in_a_partition_are_reordered():
    writes = [acked("a", s, 0, None) for s in range(4)] + [acked("b", 0, 0, None)]
    read = {0: [(0, v("a", 0)), (1, v("b", 0)), (2, v("a", 2)), (3, v("a", 1)), (4, v("a", 3))]}
    verdict = check(writes, read)
    assert verdict.reordered == [(0, "a", 2, 1, 3)]  # interleaving producers is not reordering
    assert "p0 a-1 @3 after a-2" in verdict.describe()


def test_a_record_in_a_partition_it_was_not_sent_to_is_unexpected():
    verdict = check([acked("a", 0, 0, 0)], {0: [(0, v("a", 0))], 1: [(0, v("a", 0)), (1, b"garbage")]})
    assert [(p, o) for p, o, _ in verdict.unexpected] == [(1, 0), (1, 1)]
    assert len(verdict.duplicated) == 1


def test_replicas_are_compared_batch_by_batch():
    same = [(0, 4, b"A"), (5, 9, b"B")]
    assert replica_divergence(0, {1: same, 2: list(same), 3: list(same)}) is None
    assert replica_divergence(0, {1: [], 2: []}) is None
    behind = replica_divergence(0, {1: same, 2: same[:1]})
    assert behind == ("p0: replicas differ: log end offsets {1: 10, 2: 5}; "
                      "their batch #1 holds offsets {1: '5-9', 2: 'none'}")
    forked = replica_divergence(2, {1: same, 2: [(0, 4, b"A"), (5, 7, b"C")], 3: same})
    assert "log end offsets {1: 10, 2: 8, 3: 10}" in forked and "{1: '5-9', 2: '5-7', 3: '5-9'}" in forked
