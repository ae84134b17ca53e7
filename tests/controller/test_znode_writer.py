"""`ZnodeWriter`: grouped guarded multis, the culprit found write by write, retries through
an unreachable store."""

from __future__ import annotations

import errno
import os

import pytest

from odradek.controller import znode_writer as module
from odradek.controller.commands import CreateZnode, DeleteZnode, SetZnode
from odradek.controller.znode_writer import ZnodeWriter
from odradek.metadata import layout
from odradek.metadata.embedded_store import EmbeddedStore
from odradek.metadata.errors import StoreUnavailableError


@pytest.fixture
def store():
    s = EmbeddedStore()
    s.create(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(1))  # version 0
    s.create("/a", b"")
    return s


def counting(store):
    calls = []
    real = store.multi

    def multi(ops):
        calls.append(len(ops))
        return real(ops)

    store.multi = multi
    return calls


def test_creates_and_sets_go_in_one_multi(store):
    calls = counting(store)
    writes = [CreateZnode("/a/p", 0, exists_ok=True)]
    writes += [CreateZnode(f"/a/p/{i}", 0, exists_ok=True) for i in range(5)]
    writes += [CreateZnode(f"/a/p/{i}/state", 0, b"s") for i in range(5)]
    writes += [SetZnode("/a", 0, b"x", 0), SetZnode("/a", 0, b"y", 1)]  # chained versions
    assert ZnodeWriter(lambda: store, 1).apply(writes) is None
    assert calls == [1 + 6 + 5 + 2]
    assert store.get("/a") == (b"y", 2)
    assert store.children("/a/p") == [str(i) for i in range(5)]


def test_existing_parents_are_left_out(store):
    store.create("/a/p", b"")
    calls = counting(store)
    writes = [CreateZnode("/a/p", 0, exists_ok=True), CreateZnode("/a/p/0", 0, b"")]
    assert ZnodeWriter(lambda: store, 1).apply(writes) is None
    assert calls == [2]


def test_a_failing_group_is_replayed_to_find_the_culprit(store):
    writes = [CreateZnode("/a/b", 0, b"1"), SetZnode("/a", 0, b"x", 7), CreateZnode("/a/c", 0)]
    failed = ZnodeWriter(lambda: store, 1).apply(writes)
    assert failed is writes[1]
    assert store.exists("/a/b") == 0  # the write before it happened
    assert store.exists("/a/c") is None  # those after did not


def test_every_group_is_guarded_by_the_controller_epoch(store):
    store.set(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(2))  # a newer controller
    writes = [CreateZnode("/a/b", 0), CreateZnode("/a/c", 0)]
    assert ZnodeWriter(lambda: store, 1).apply(writes) is writes[0]
    assert store.exists("/a/b") is None


def test_creates_and_deletes_of_one_list_share_a_multi(store):
    store.create("/a/gone/x", b"", make_parents=True)
    calls = counting(store)
    writes = [CreateZnode("/a/b", 0), DeleteZnode("/a/gone", 0, recursive=True)]
    assert ZnodeWriter(lambda: store, 1).apply(writes) is None
    assert calls == [1 + 1 + 2]
    assert store.exists("/a/gone") is None and store.exists("/a/b") == 0


def test_a_create_under_a_path_deleted_before_it_waits_for_the_delete(store):
    store.create("/a/t/old", b"", make_parents=True)
    writes = [DeleteZnode("/a/t", 0, recursive=True), CreateZnode("/a/t", 0, b"new"),
              CreateZnode("/a/t/p", 0, exists_ok=True)]
    assert ZnodeWriter(lambda: store, 1).apply(writes) is None
    assert store.get("/a/t")[0] == b"new" and store.children("/a/t") == ["p"]


def test_unreachable_store_is_waited_out_then_given_up(store, monkeypatch):
    monkeypatch.setattr(module, "STORE_RETRY_BACKOFF_S", 0.01)
    real, failures = store.multi, []

    def flaky(ops):
        if len(failures) < 3:
            failures.append(1)
            raise StoreUnavailableError("down")
        return real(ops)

    store.multi = flaky
    assert ZnodeWriter(lambda: store, 5).apply([SetZnode("/a", 0, b"x", 0)]) is None
    assert store.get("/a")[0] == b"x"
    failures.clear()
    with pytest.raises(StoreUnavailableError):
        ZnodeWriter(lambda: store, 0.0).apply([SetZnode("/a", 0, b"y", 1)])
    failures.clear()
    with pytest.raises(StoreUnavailableError):
        ZnodeWriter(lambda: store, 5, stopped=lambda: True).apply([SetZnode("/a", 0, b"y", 1)])


def test_a_write_the_disk_refused_is_repeated_until_it_lands_or_the_controller_stops(store, monkeypatch):
    monkeypatch.setattr(module, "STORE_RETRY_BACKOFF_S", 0.01)
    real, refusals = store.multi, []

    def full_disk(ops):
        if len(refusals) < 20:  # far past any session timeout's worth of retries
            refusals.append(1)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(ops)

    store.multi = full_disk
    assert ZnodeWriter(lambda: store, 0.0).apply([SetZnode("/a", 0, b"x", 0)]) is None
    assert store.get("/a")[0] == b"x" and len(refusals) == 20
    refusals.clear()
    with pytest.raises(OSError):
        ZnodeWriter(lambda: store, 5, stopped=lambda: True).apply([SetZnode("/a", 0, b"y", 1)])
    assert store.get("/a")[0] == b"x"
