"""MirrorProgress: positions, records copied and lag per partition, summed per topic."""

from __future__ import annotations

from odradek.client import TopicPartition
from odradek.mirror.mirror_lag import MirrorProgress

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_progress_sums_partitions_per_topic():
    progress = MirrorProgress()
    for tp, start in ((A0, 100), (A1, 0), (B0, 5)):
        progress.start(tp, start)
    progress.committed({A0: 150, A1: 20}, {A0: 50, A1: 20})
    progress.committed({B0: 7}, {B0: 2})
    progress.ends({A0: 160, A1: 20})
    topics = progress.topics()
    assert list(topics) == ["a", "b"]
    a, b = topics["a"], topics["b"]
    assert (a.partitions, a.copied, a.position, a.end, a.lag) == (2, 70, 170, 180, 10)
    assert (b.copied, b.position, b.end, b.lag) == (2, 7, None, None)  # no end offset looked up yet
    assert a.line() == "a: 70 records copied, mirrored 170 of source end 180 (lag 10) over 2 partitions"
    assert "source end ? (lag ?)" in b.line()
    assert progress.copied == 72


def test_a_restarted_partition_keeps_its_count_and_a_forgotten_one_goes():
    progress = MirrorProgress()
    progress.start(A0, 0)
    progress.committed({A0: 10}, {A0: 10})
    progress.start(A0, 10)
    assert progress.partitions[A0].copied == 10 and progress.position(A0) == 10
    progress.ends({A0: 8})  # an end offset read before the last commit: no negative lag
    assert progress.topics()["a"].lag == 0
    progress.forget(A0)
    assert progress.topics() == {}
