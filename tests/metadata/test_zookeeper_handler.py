"""`zookeeper_handler.poll_select`: ``select``'s contract with one ``poll(2)``, for kazoo's
connection thread (`PollHandler`, the handler `ZooKeeperStore` gives kazoo)."""

from __future__ import annotations

import os
import resource
import socket

import pytest

from odradek.metadata.zookeeper_handler import PollHandler, poll_select


def test_ready_sockets_are_reported_as_select_reports_them():
    a, b = socket.socketpair()
    c, d = socket.socketpair()
    with a, b, c, d:
        assert poll_select([a, c], [], [], 0) == ([], [], [])
        b.send(b"x")
        assert poll_select([a, c], [a], [], 1.0) == ([a], [a], [])
        d.close()  # a hang-up reads as readable: kazoo reads and sees the end
        assert poll_select([c], [], [], 1.0)[0] == [c]
    with pytest.raises(ValueError):
        poll_select([], [], [], -1)


def test_descriptors_above_select_s_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 1100:
        pytest.skip("the open-files limit is too low for a descriptor above 1,024")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1100), hard))
    a, b = socket.socketpair()
    high = os.dup2(a.fileno(), 1050)
    try:
        b.send(b"x")
        assert PollHandler().select([high], [], [], 1.0) == ([high], [], [])
    finally:
        os.close(high)
        a.close()
        b.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
