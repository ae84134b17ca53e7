"""The console's ring buffers: rates from summed end offsets, the cluster's throughput, and
forgetting topics and groups that are gone."""

from odradek.console.samples import SampleBuffer, Samples


def test_a_buffer_keeps_the_last_points_and_rates_are_rises_per_second():
    buffer = SampleBuffer(capacity=3)
    for at, value in [(0, 0), (5, 50), (10, 150), (20, 150)]:
        buffer.add(at, value)
    assert buffer.points() == [(5, 50), (10, 150), (20, 150)]
    assert buffer.rates() == [(10, 20.0), (20, 0.0)]
    assert buffer.latest() == 150


def test_a_fall_in_end_offsets_is_no_negative_rate():
    buffer = SampleBuffer()
    buffer.add(0, 100)
    buffer.add(2, 10)  # the topic was deleted and made again
    assert buffer.rates() == [(2, 0.0)]


def test_samples_sum_topic_rates_into_throughput_and_drop_what_is_gone():
    samples = Samples()
    samples.record(0, {"a": 0, "b": 10}, {"g": 5})
    samples.record(2, {"a": 20, "b": 30}, {"g": 1, "h": 0})
    assert samples.throughput.points() == [(2, 20.0)]  # no made-up 0 before the first rate
    assert samples.topic_rate("a") == 10.0
    assert samples.groups["g"].points() == [(0, 5), (2, 1)]
    samples.record(4, {"a": 20}, {"h": 2})
    assert set(samples.topics) == {"a"} and set(samples.groups) == {"h"}
    assert samples.topic_rate("b") is None


def test_a_group_chart_ends_with_the_cards_lag():
    from odradek.console.samples import with_now as _with_now

    assert _with_now([], 7) == []  # nothing before the first sample
    points = _with_now([(1.0, 5), (2.0, 6)], 7)
    assert points[:2] == [(1.0, 5), (2.0, 6)] and points[-1][1] == 7 and points[-1][0] > 2.0
