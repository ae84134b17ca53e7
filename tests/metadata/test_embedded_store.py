"""EmbeddedStore: the shared contract, in memory and on disk, plus durability and recovery."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.metadata import journal as journal_module
from odradek.metadata.embedded_store import EmbeddedStore
from odradek.metadata.errors import (
    CorruptStoreError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    StoreLockedError,
)
from odradek.metadata.store import CreateOp, SetOp
from tests.metadata.store_contract import Recorder, StoreContract


class TestEmbeddedStoreOnDisk(StoreContract):
    @pytest.fixture
    def open_store(self, tmp_path):
        opened: list[EmbeddedStore] = []

        def open_store() -> EmbeddedStore:
            opened.append(EmbeddedStore(tmp_path / "meta"))
            return opened[-1]

        yield open_store
        for store in opened:
            store.close()


class TestEmbeddedStoreInMemory(StoreContract):
    @pytest.fixture
    def open_store(self):
        # One in-memory store is one session and its own data; "reopening" gives a new,
        # empty store, which is exactly what the ephemeral test needs to observe.
        opened: list[EmbeddedStore] = []

        def open_store() -> EmbeddedStore:
            if opened and not opened[-1]._closed:
                return opened[-1]
            opened.append(EmbeddedStore(None))
            return opened[-1]

        yield open_store
        for store in opened:
            store.close()

    def test_ephemeral_nodes_vanish_with_their_session(self, open_store):
        store = open_store()
        store.create("/e", ephemeral=True)
        store.close()
        assert open_store().exists("/e") is None


def dump(store: EmbeddedStore, path: str = "/") -> dict[str, tuple[bytes, int]]:
    """Every znode under ``path`` with its data and version."""
    out = {path: store.get(path)}
    for name in store.children(path):
        out.update(dump(store, path.rstrip("/") + "/" + name))
    return out


def test_reopen_keeps_persistent_nodes_versions_and_sequence_counters(tmp_path):
    with EmbeddedStore(tmp_path) as store:
        store.create("/a", b"1")
        store.set("/a", b"2")
        store.create("/a/e-", ephemeral=True, sequential=True)
        store.create("/a/s-", b"x", sequential=True)
        store.create("/gone")
        store.delete("/gone")
    with EmbeddedStore(tmp_path) as store:
        assert store.get("/a") == (b"2", 1)
        assert store.children("/a") == ["s-0000000001"]
        assert store.exists("/gone") is None
        assert store.create("/a/s-", sequential=True) == "/a/s-0000000002"


def test_a_directory_is_opened_by_one_store_at_a_time(tmp_path):
    first = EmbeddedStore(tmp_path)
    with pytest.raises(StoreLockedError):
        EmbeddedStore(tmp_path)
    first.close()
    EmbeddedStore(tmp_path).close()


def test_torn_journal_tail_is_dropped_and_earlier_batches_kept(tmp_path):
    with EmbeddedStore(tmp_path) as store:
        store.create("/kept", b"k")
        store.create("/torn", b"t")
    journal = tmp_path / "journal-0.log"
    raw = journal.read_bytes()
    journal.write_bytes(raw[:-3])
    with EmbeddedStore(tmp_path) as store:
        assert store.get("/kept") == (b"k", 0)
        assert store.exists("/torn") is None
        store.create("/after", b"a")
    with EmbeddedStore(tmp_path) as store:
        assert store.children("/") == ["after", "kept"]


def test_a_batch_with_a_bad_crc_ends_the_journal(tmp_path):
    with EmbeddedStore(tmp_path) as store:
        store.create("/one")
        store.create("/two")
    journal = tmp_path / "journal-0.log"
    raw = bytearray(journal.read_bytes())
    raw[-1] ^= 0xFF
    journal.write_bytes(bytes(raw))
    with EmbeddedStore(tmp_path) as store:
        assert store.children("/") == ["one"]


def test_compaction_writes_a_snapshot_and_starts_a_new_journal(tmp_path, monkeypatch):
    monkeypatch.setattr(journal_module, "COMPACT_MIN_BYTES", 2000)
    with EmbeddedStore(tmp_path) as store:
        store.create("/c")
        for i in range(200):
            store.create(f"/c/n{i}", str(i).encode())
            store.set("/c", str(i).encode())
        store.create("/c/eph", ephemeral=True)
        before = dump(store)
        del before["/c/eph"]
    names = sorted(os.listdir(tmp_path))
    assert "snapshot.json" in names and "journal-0.log" not in names
    assert sum(1 for n in names if n.startswith("journal-")) == 1
    snapshot = json.loads((tmp_path / "snapshot.json").read_text())
    assert snapshot["generation"] >= 1
    with EmbeddedStore(tmp_path) as store:
        assert dump(store) == before


def test_a_crash_between_snapshot_and_new_journal_loses_nothing(tmp_path):
    with EmbeddedStore(tmp_path) as store:
        for i in range(40):
            store.create(f"/n{i}", b"v" * 20)
        before = dump(store)
        store._journal.compact(store._tree.persistent_nodes())
    generation = json.loads((tmp_path / "snapshot.json").read_text())["generation"]
    # As if the process died right after renaming the snapshot: no journal of its generation,
    # and the previous generation's journal and a temp file still around.
    (tmp_path / f"journal-{generation}.log").unlink()
    (tmp_path / f"journal-{generation - 1}.log").write_bytes(b"old, already in the snapshot")
    (tmp_path / "snapshot.json.tmp").write_bytes(b"{half")
    with EmbeddedStore(tmp_path) as store:
        assert dump(store) == before
    assert not (tmp_path / "snapshot.json.tmp").exists()
    assert not (tmp_path / f"journal-{generation - 1}.log").exists()


def test_unreadable_snapshot_is_reported_and_unlocks(tmp_path):
    EmbeddedStore(tmp_path).close()
    (tmp_path / "snapshot.json").write_text('{"format": "something else"}')
    with pytest.raises(CorruptStoreError):
        EmbeddedStore(tmp_path)
    (tmp_path / "snapshot.json").unlink()
    EmbeddedStore(tmp_path).close()


def test_failed_journal_write_leaves_the_tree_unchanged(tmp_path, monkeypatch):
    store = EmbeddedStore(tmp_path)
    store.create("/a", b"0")
    seen = Recorder()
    store.watch_data("/a", seen)

    def broken_append(entries):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store._journal, "append", broken_append)
    with pytest.raises(OSError):
        store.multi([SetOp("/a", b"1"), CreateOp("/a/b")])
    assert store.get("/a") == (b"0", 0)
    assert store.children("/a") == []
    assert seen.calls == []
    monkeypatch.undo()
    store.close()
    with EmbeddedStore(tmp_path) as again:
        assert again.get("/a") == (b"0", 0)


def test_callbacks_run_synchronously_once_per_event(tmp_path):
    with EmbeddedStore(None) as store:
        store.create("/t")
        data, children = Recorder(), Recorder()
        store.watch_data("/t/x", data)
        store.watch_children("/t", children)
        store.multi([CreateOp("/t/x"), SetOp("/t/x", b"1"), CreateOp("/t/y")])
        assert data.calls == ["/t/x"]
        assert children.calls == ["/t"]


def test_a_failing_callback_does_not_undo_the_change_or_stop_others():
    with EmbeddedStore(None) as store:
        seen = Recorder()

        def explode(path):
            raise RuntimeError("boom")

        store.watch_data("/a", explode)
        store.watch_data("/a", seen)
        store.create("/a")
        assert store.exists("/a") == 0
        assert seen.calls == ["/a"]


# -- random operation sequences survive a restart exactly (an "opfuzz" of the store) ----------

_names = st.sampled_from(["/a", "/b", "/a/x", "/a/y", "/b/z", "/a/x/deep"])
_ops = st.lists(
    st.one_of(
        st.tuples(st.just("create"), _names, st.binary(max_size=8), st.booleans(), st.booleans()),
        st.tuples(st.just("set"), _names, st.binary(max_size=8)),
        st.tuples(st.just("delete"), _names, st.booleans()),
    ),
    max_size=40,
)


@settings(max_examples=40)
@given(ops=_ops, compact_at=st.sampled_from([0, 200, 10**9]))
def test_random_operations_survive_reopen(tmp_path_factory, ops, compact_at):
    directory = tmp_path_factory.mktemp("opfuzz")
    saved = journal_module.COMPACT_MIN_BYTES
    journal_module.COMPACT_MIN_BYTES = compact_at
    try:
        with EmbeddedStore(directory) as store:
            for op in ops:
                _try(store, op)
            expected = {p: v for p, v in dump(store).items() if not store._tree.nodes[p].ephemeral}
        with EmbeddedStore(directory) as store:
            assert dump(store) == expected
            # Sequence counters never hand out a name that is still taken.
            for name in ["/a", "/a/x", "/b/z"]:
                try:
                    store.create(name, sequential=True)
                except NoNodeError:
                    pass
    finally:
        journal_module.COMPACT_MIN_BYTES = saved


def _try(store: EmbeddedStore, op: tuple) -> None:
    try:
        if op[0] == "create":
            store.create(op[1], op[2], ephemeral=op[3], sequential=op[4])
        elif op[0] == "set":
            store.set(op[1], op[2])
        else:
            store.delete(op[1], recursive=op[2])
    except (NoNodeError, NodeExistsError, NotEmptyError, NoChildrenForEphemeralsError):
        pass


def test_a_failed_compaction_keeps_the_old_files_in_charge(tmp_path, monkeypatch):
    monkeypatch.setattr(journal_module, "COMPACT_MIN_BYTES", 300)
    real_replace = os.replace

    def failing_replace(src, dst):
        raise OSError(28, "No space left on device")

    with EmbeddedStore(tmp_path) as store:
        monkeypatch.setattr(journal_module.os, "replace", failing_replace)
        for i in range(30):
            store.create(f"/n{i}", b"v" * 20)  # each write succeeds; compactions fail
        monkeypatch.setattr(journal_module.os, "replace", real_replace)
        before = dump(store)
    assert sorted(os.listdir(tmp_path)) == ["journal-0.log", "lock"]
    with EmbeddedStore(tmp_path) as store:
        assert dump(store) == before
