"""LogRateLimiter: the first line of a kind, then one per interval with the count left out."""

from __future__ import annotations

import logging

from odradek.server.log_limiter import LogRateLimiter, message_key

log = logging.getLogger("odradek.test.limiter")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == log.name]


def test_first_line_then_one_per_interval_with_the_suppressed_count(caplog):
    caplog.set_level(logging.INFO, logger=log.name)
    clock = Clock()
    limiter = LogRateLimiter(interval=10, clock=clock)
    for i in range(50):
        limiter.warning(log, "k", "bad frame %d", i)
        clock.now += 0.5  # 50 events over 25 s: logged at 100, 110, 120
    assert lines(caplog) == [
        "bad frame 0",
        "bad frame 20 (19 similar messages suppressed)",
        "bad frame 40 (19 similar messages suppressed)",
    ]


def test_keys_are_limited_separately_and_numbers_do_not_make_a_new_kind(caplog):
    caplog.set_level(logging.INFO, logger=log.name)
    limiter = LogRateLimiter(interval=10, clock=Clock())
    for api in range(100):
        limiter.warning(log, message_key(f"unsupported API {api} v{api % 7}"), "unsupported %d", api)
        limiter.error(log, "other", "other %d", api)
    assert lines(caplog) == ["unsupported 0", "other 0"]


def test_a_flood_of_new_kinds_shares_one_overflow_key(caplog):
    caplog.set_level(logging.INFO, logger=log.name)
    clock = Clock()
    limiter = LogRateLimiter(interval=10, max_keys=4, clock=clock)
    for i in range(1000):
        limiter.warning(log, ("kind", i), "event %d", i)
    assert len(lines(caplog)) == 5  # four tracked kinds and the overflow
    assert len(limiter._keys) == 5
    clock.now += 11  # every kind idle again: new kinds are tracked on their own
    for i in range(1000, 1003):
        limiter.warning(log, ("kind", i), "event %d", i)
    assert lines(caplog)[-3:] == ["event 1000", "event 1001", "event 1002"]


def test_disabled_level_costs_nothing_and_counts_nothing(caplog):
    caplog.set_level(logging.ERROR, logger=log.name)
    limiter = LogRateLimiter(interval=10, clock=Clock())
    assert not limiter.warning(log, "k", "quiet")
    assert limiter.error(log, "k", "loud")
    assert lines(caplog) == ["loud"]
