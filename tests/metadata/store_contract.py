"""The behaviour every `MetadataStore` backend must have, mixed into each backend's tests.

A backend's test class inherits `StoreContract` and provides the ``open_store`` fixture: a
function that opens a new store (a new session) on the same backing data, and closes whatever
it opened at teardown. Watch callbacks may arrive on another thread (ZooKeeper), so tests wait
for them with `wait_for`, a bounded poll, and check that a cancelled watch stayed quiet by
making a later change on another watched path: callbacks of one store arrive in order.
"""

from __future__ import annotations

import threading
import time

import pytest

from odradek.metadata.errors import (
    BadVersionError,
    DataTooLargeError,
    InvalidPathError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    StoreClosedError,
)
from odradek.metadata.store import MAX_DATA_BYTES, CheckOp, CreateOp, DeleteOp, SetOp


def wait_for(predicate, what: str, limit: float = 10.0) -> None:
    """Poll ``predicate`` until true; fail the test if it is still false after ``limit`` s."""
    deadline = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.005)


class Recorder:
    """A watch callback that remembers the paths it was called with."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, path: str) -> None:
        with self._lock:
            self.calls.append(path)

    def count(self) -> int:
        with self._lock:
            return len(self.calls)


class StoreContract:
    @pytest.fixture
    def open_store(self):
        raise NotImplementedError("a backend's test class provides open_store")

    @pytest.fixture
    def store(self, open_store):
        return open_store()

    # -- create / get ----------------------------------------------------------------------

    def test_create_then_get_returns_data_at_version_zero(self, store):
        assert store.create("/a", b"hello") == "/a"
        assert store.get("/a") == (b"hello", 0)
        assert store.exists("/a") == 0

    def test_root_exists_and_cannot_be_created_or_deleted(self, store):
        assert store.exists("/") is not None
        with pytest.raises(NodeExistsError):
            store.create("/")
        with pytest.raises(InvalidPathError):
            store.delete("/")

    def test_data_is_kept_byte_for_byte(self, store):
        blob = bytes(range(256)) * 4
        store.create("/bin", blob)
        assert store.get("/bin")[0] == blob
        store.create("/empty")
        assert store.get("/empty") == (b"", 0)

    def test_create_twice_raises_node_exists(self, store):
        store.create("/a")
        with pytest.raises(NodeExistsError):
            store.create("/a", b"other")
        assert store.get("/a") == (b"", 0)

    def test_create_without_parent_raises_no_node(self, store):
        with pytest.raises(NoNodeError):
            store.create("/missing/child")
        assert store.exists("/missing") is None

    def test_make_parents_creates_empty_persistent_ancestors(self, store):
        store.create("/x")
        assert store.create("/x/y/z", b"leaf", make_parents=True) == "/x/y/z"
        assert store.get("/x/y") == (b"", 0)
        assert store.get("/x/y/z") == (b"leaf", 0)
        with pytest.raises(NodeExistsError):
            store.create("/x/y/z", make_parents=True)

    def test_get_missing_raises_no_node(self, store):
        with pytest.raises(NoNodeError):
            store.get("/nothing")
        assert store.exists("/nothing") is None

    @pytest.mark.parametrize("path", ["", "a", "/a/", "//a", "/a//b", "/a/./b", "/a/../b", "/."])
    def test_invalid_paths_are_rejected(self, store, path):
        with pytest.raises(InvalidPathError):
            store.create(path)
        with pytest.raises(InvalidPathError):
            store.get(path)

    def test_data_over_the_limit_is_rejected(self, store):
        with pytest.raises(DataTooLargeError):
            store.create("/big", b"x" * (MAX_DATA_BYTES + 1))
        assert store.exists("/big") is None
        store.create("/big", b"x" * MAX_DATA_BYTES)
        with pytest.raises(DataTooLargeError):
            store.set("/big", b"x" * (MAX_DATA_BYTES + 1))

    # -- set -------------------------------------------------------------------------------

    def test_a_creation_id_grows_with_each_creation_at_a_path(self, store):
        store.create("/c", ephemeral=True)
        first = store.creation_id("/c")
        store.set("/c", b"x")
        assert store.creation_id("/c") == first
        store.delete("/c")
        with pytest.raises(NoNodeError):
            store.creation_id("/c")
        store.create("/c", ephemeral=True)
        assert store.creation_id("/c") > first

    def test_set_increments_the_version(self, store):
        store.create("/a", b"0")
        assert store.set("/a", b"1") == 1
        assert store.set("/a", b"2", version=1) == 2
        assert store.get("/a") == (b"2", 2)

    def test_set_with_a_stale_version_fails_and_changes_nothing(self, store):
        store.create("/a", b"0")
        store.set("/a", b"1")
        with pytest.raises(BadVersionError):
            store.set("/a", b"stale", version=0)
        assert store.get("/a") == (b"1", 1)

    def test_set_missing_raises_no_node(self, store):
        with pytest.raises(NoNodeError):
            store.set("/nothing", b"x")

    # -- delete ----------------------------------------------------------------------------

    def test_delete_removes_the_node(self, store):
        store.create("/a")
        store.delete("/a")
        assert store.exists("/a") is None
        with pytest.raises(NoNodeError):
            store.delete("/a")

    def test_delete_checks_the_version(self, store):
        store.create("/a")
        store.set("/a", b"1")
        with pytest.raises(BadVersionError):
            store.delete("/a", version=0)
        store.delete("/a", version=1)
        assert store.exists("/a") is None

    def test_delete_with_children_needs_recursive(self, store):
        store.create("/t/p/0/state", b"s", make_parents=True)
        store.create("/t/p/1", make_parents=True)
        with pytest.raises(NotEmptyError):
            store.delete("/t")
        with pytest.raises(BadVersionError):
            store.delete("/t", version=7, recursive=True)
        assert store.exists("/t/p/0/state") == 0
        store.delete("/t", recursive=True)
        assert store.exists("/t") is None
        assert store.exists("/t/p/0/state") is None
        with pytest.raises(NoNodeError):
            store.delete("/t", recursive=True)

    # -- children / sequential / ephemeral --------------------------------------------------

    def test_children_are_sorted_names(self, store):
        store.create("/p")
        for name in ["b", "a", "10", "2"]:
            store.create(f"/p/{name}")
        assert store.children("/p") == ["10", "2", "a", "b"]
        assert store.children("/p/a") == []
        with pytest.raises(NoNodeError):
            store.children("/nothing")

    def test_sequential_names_count_child_creations(self, store):
        store.create("/q")
        first = store.create("/q/item-", b"1", sequential=True)
        second = store.create("/q/item-", b"2", sequential=True)
        assert (first, second) == ("/q/item-0000000000", "/q/item-0000000001")
        store.create("/q/plain")
        store.delete("/q/plain")
        assert store.get(first) == (b"1", 0)
        store.delete(first)
        assert store.create("/q/item-", sequential=True) == "/q/item-0000000003"

    def test_ephemeral_nodes_cannot_have_children(self, store):
        store.create("/e", ephemeral=True)
        with pytest.raises(NoChildrenForEphemeralsError):
            store.create("/e/child")

    def test_ephemeral_nodes_vanish_with_their_session(self, open_store):
        first = open_store()
        first.create("/brokers", make_parents=True)
        first.create("/brokers/1", b"me", ephemeral=True)
        first.create("/brokers/kept", b"stays")
        seq = first.create("/brokers/s-", ephemeral=True, sequential=True)
        assert first.get("/brokers/1") == (b"me", 0)
        first.close()
        second = open_store()
        assert second.exists("/brokers/1") is None
        assert second.exists(seq) is None
        assert second.children("/brokers") == ["kept"]

    # -- the writes a store retries ---------------------------------------------------------

    def test_ensure_path_creates_what_is_missing_and_keeps_what_is_there(self, store):
        store.ensure_path("/x/y/z", b"first")
        assert store.get("/x/y/z") == (b"first", 0)
        assert store.get("/x/y") == (b"", 0)
        store.ensure_path("/x/y/z", b"second")
        store.ensure_path("/x", b"ignored")
        store.ensure_path("/")
        assert store.get("/x/y/z") == (b"first", 0)
        assert store.get("/x") == (b"", 0)

    def test_checked_ephemeral_create_accepts_the_sessions_own_znode(self, store):
        store.create("/ids")
        created = store.create_checked_ephemeral("/ids/1", b"me")
        assert store.get("/ids/1") == (b"me", 0)
        assert created == store.creation_id("/ids/1")
        assert store.create_checked_ephemeral("/ids/1", b"again") == created
        assert store.get("/ids/1") == (b"me", 0)  # an earlier call's data is left as it is
        with pytest.raises(NoChildrenForEphemeralsError):
            store.create("/ids/1/child")

    def test_checked_ephemeral_create_refuses_other_znodes(self, store):
        store.create("/p", b"persistent")
        with pytest.raises(NodeExistsError):
            store.create_checked_ephemeral("/p", b"me")
        with pytest.raises(NodeExistsError):
            store.create_checked_ephemeral("/")
        with pytest.raises(NoNodeError):
            store.create_checked_ephemeral("/missing/child")
        assert store.get("/p") == (b"persistent", 0)

    # -- multi -----------------------------------------------------------------------------

    def test_multi_applies_all_and_returns_results(self, store):
        store.create("/m", b"0")
        results = store.multi(
            [
                CheckOp("/m", 0),
                CreateOp("/m/a", b"a"),
                CreateOp("/m/s-", sequential=True),
                SetOp("/m", b"1", version=0),
                DeleteOp("/m/a"),
            ]
        )
        assert results == [None, "/m/a", "/m/s-0000000001", 1, None]
        assert store.children("/m") == ["s-0000000001"]
        assert store.get("/m") == (b"1", 1)

    def test_multi_applies_nothing_when_one_op_fails(self, store):
        store.create("/m", b"0")
        with pytest.raises(NoNodeError):
            store.multi([CreateOp("/m/a"), SetOp("/m", b"x"), CreateOp("/none/b")])
        assert store.children("/m") == []
        assert store.get("/m") == (b"0", 0)
        with pytest.raises(BadVersionError):
            store.multi([CreateOp("/m/a"), CheckOp("/m", 5)])
        assert store.exists("/m/a") is None
        with pytest.raises(NodeExistsError):
            store.multi([CreateOp("/m/a"), CreateOp("/m/a")])
        assert store.exists("/m/a") is None

    def test_multi_of_nothing_is_nothing(self, store):
        assert store.multi([]) == []

    # -- bulk reads ------------------------------------------------------------------------

    def test_get_many_answers_in_order_with_none_for_missing(self, store):
        store.create("/g", b"g")
        store.create("/g/a", b"a")
        store.set("/g/a", b"a2")
        assert store.get_many(["/g/a", "/missing", "/g", "/g/none"]) == [
            (b"a2", 1), None, (b"g", 0), None,
        ]
        assert store.get_many([]) == []

    def test_children_many_answers_sorted_names_with_none_for_missing(self, store):
        store.create("/c")
        for name in ("b", "a", "c"):
            store.create(f"/c/{name}")
        assert store.children_many(["/c", "/c/a", "/nothing"]) == [["a", "b", "c"], [], None]

    def test_bulk_reads_of_many_znodes(self, store):
        store.create("/many")
        store.multi([CreateOp(f"/many/{i:04d}", str(i).encode()) for i in range(1500)])
        paths = [f"/many/{i:04d}" for i in range(1500)]
        assert store.get_many(paths) == [(str(i).encode(), 0) for i in range(1500)]
        assert store.children_many(["/many"]) == [[f"{i:04d}" for i in range(1500)]]

    # -- watches ---------------------------------------------------------------------------

    def test_data_watch_reports_create_set_and_delete(self, store):
        seen = Recorder()
        store.watch_data("/w", seen)
        store.create("/w", b"1")
        wait_for(lambda: seen.count() >= 1, "the creation")
        store.set("/w", b"2")
        wait_for(lambda: seen.count() >= 2, "the change")
        store.delete("/w")
        wait_for(lambda: seen.count() >= 3, "the deletion")
        assert set(seen.calls) == {"/w"}

    def test_data_watches_set_together_each_report_every_change(self, store):
        store.create("/d")
        store.create("/d/there", b"0")
        calls = {name: Recorder() for name in ("there", "later", "never")}
        handles = store.watch_data_many([(f"/d/{n}", r) for n, r in calls.items()])
        assert len(handles) == 3
        store.set("/d/there", b"1")
        store.create("/d/later", b"")
        wait_for(lambda: calls["there"].count() >= 1 and calls["later"].count() >= 1,
                 "both changes")
        for _ in range(3):  # each change seen, the watch set again after each
            before = calls["there"].count()
            store.set("/d/there", b"x")
            wait_for(lambda: calls["there"].count() > before, "the next change")  # noqa: B023
        handles[1].cancel()
        store.set("/d/later", b"y")
        store.set("/d/there", b"z")  # callbacks of one store arrive in order
        wait_for(lambda: calls["there"].count() >= 5, "the last change")
        assert calls["later"].count() == 1 and calls["never"].count() == 0

    def test_children_watch_reports_children_coming_and_going(self, store):
        store.create("/c")
        seen = Recorder()
        store.watch_children("/c", seen)
        store.create("/c/a")
        wait_for(lambda: seen.count() >= 1, "the new child")
        store.delete("/c/a")
        wait_for(lambda: seen.count() >= 2, "the removed child")
        assert set(seen.calls) == {"/c"}

    def test_children_watch_on_a_missing_path_reports_its_creation(self, store):
        seen = Recorder()
        store.watch_children("/later", seen)
        store.create("/later")
        wait_for(lambda: seen.count() >= 1, "the creation")
        before = seen.count()
        store.create("/later/x")
        wait_for(lambda: seen.count() > before, "the child")

    def test_cancelled_watch_is_not_called(self, store):
        store.create("/quiet")
        store.create("/loud")
        quiet, loud = Recorder(), Recorder()
        store.watch_data("/quiet", quiet).cancel()
        store.watch_data("/loud", loud)
        store.set("/quiet", b"1")
        store.set("/loud", b"1")
        wait_for(lambda: loud.count() >= 1, "the later change")
        assert quiet.calls == []

    def test_callbacks_may_use_the_store(self, store):
        store.create("/r", b"0")
        read: list[bytes] = []
        store.watch_data("/r", lambda path: read.append(store.get(path)[0]))
        store.set("/r", b"1")
        wait_for(lambda: b"1" in read, "the callback's read")

    # -- lifecycle -------------------------------------------------------------------------

    def test_closed_store_refuses_work(self, open_store):
        store = open_store()
        store.close()
        store.close()
        with pytest.raises(StoreClosedError):
            store.get("/")
        with pytest.raises(StoreClosedError):
            store.create("/a")
