"""MirrorConfig: the transactional id, and settings refused."""

from __future__ import annotations

import pytest

from odradek.mirror import MirrorConfig


def test_transactional_id_is_the_prefix_and_the_group():
    assert MirrorConfig("s:1", "t:1", "x").transactional_id == "odradek-mirror-odradek-mirror"
    config = MirrorConfig("s:1", "t:1", "x", group_id="dc1-dc2", transactional_id_prefix="mm-")
    assert config.transactional_id == "mm-dc1-dc2"


@pytest.mark.parametrize("setting, message", [
    ({"group_id": ""}, "group_id must not be empty"),
    ({"commit_interval_ms": 0}, "commit_interval_ms must be positive"),
    ({"refresh_topics_interval_s": -1}, "refresh_topics_interval_s must be positive"),
    ({"reporting_interval_ms": 0}, "reporting_interval_ms must be positive"),
    ({"replication_factor": 0}, "replication_factor must be positive"),
])
def test_bad_settings_are_refused(setting, message):
    with pytest.raises(ValueError, match=message):
        MirrorConfig("s:1", "t:1", "x", **setting)
