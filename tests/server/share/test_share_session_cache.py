"""ShareSessionCache: share session epochs (0 opens, n continues, -1 closes), partitions added
and forgotten, the session limit, and refusals that change nothing."""

from __future__ import annotations

import uuid

from odradek.protocol.generated.error_codes import ErrorCode as E
from odradek.server.share.share_session_cache import ShareSessionCache, next_epoch

T = uuid.UUID(int=1)


def test_epochs_open_continue_and_close():
    cache = ShareSessionCache()
    opened = cache.share_fetch("g", "m", 0, [(T, 0)])
    assert opened.error is E.NONE and opened.is_new and opened.session.epoch == 1
    assert cache.share_fetch("g", "m", 2).error is E.INVALID_SHARE_SESSION_EPOCH
    assert cache.share_fetch("g", "other", 1).error is E.SHARE_SESSION_NOT_FOUND
    assert cache.share_fetch("g2", "m", 1).error is E.SHARE_SESSION_NOT_FOUND  # keyed by (group, member)
    step = cache.share_fetch("g", "m", 1, [(T, 1)], forgotten=[(T, 0)])
    assert step.error is E.NONE and list(step.session.partitions) == [(T, 1)] and step.session.epoch == 2
    assert cache.share_acknowledge("g", "m", 0).error is E.INVALID_SHARE_SESSION_EPOCH
    assert cache.share_acknowledge("g", "m", 2).session.epoch == 3
    closed = cache.share_fetch("g", "m", -1)
    assert closed.error is E.NONE and closed.session is None and list(closed.closed.partitions) == [(T, 1)]
    assert cache.share_fetch("g", "m", -1).error is E.SHARE_SESSION_NOT_FOUND
    assert cache.share_acknowledge("g", "m", 3).error is E.SHARE_SESSION_NOT_FOUND
    assert len(cache) == 0


def test_epoch_zero_replaces_the_members_session():
    cache = ShareSessionCache()
    cache.share_fetch("g", "m", 0, [(T, 0)])
    again = cache.share_fetch("g", "m", 0, [(T, 1)])
    assert again.error is E.NONE and list(again.closed.partitions) == [(T, 0)]
    assert list(cache.get("g", "m").partitions) == [(T, 1)] and len(cache) == 1


def test_session_limit():
    cache = ShareSessionCache(max_sessions=1)
    cache.share_fetch("g", "a", 0)
    assert cache.share_fetch("g", "b", 0).error is E.SHARE_SESSION_LIMIT_REACHED
    assert cache.share_fetch("g", "a", 0).error is E.NONE  # replacing its own is not a new one
    cache.share_fetch("g", "a", -1)
    assert cache.share_fetch("g", "b", 0).error is E.NONE


def test_epoch_wraps_to_one():
    assert next_epoch(2**31 - 1) == 1 and next_epoch(5) == 6
