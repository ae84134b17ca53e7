"""The embedded store's files are the broker user's alone (metadata/journal.py, "File modes"):
they hold SCRAM credentials and dynamic passwords unencoded."""

from __future__ import annotations

import os
import stat

from odradek.metadata import journal as journal_module
from odradek.metadata.embedded_store import EmbeddedStore

CREDENTIAL = b'{"SCRAM-SHA-256":"salt=c2FsdA==,stored_key=a2V5,server_key=a2V5,iterations=4096"}'


def modes(directory) -> dict[str, int]:
    return {p.name: stat.S_IMODE(p.stat().st_mode) for p in directory.iterdir()
            if p.name.startswith(("journal-", "snapshot"))}


def test_journal_and_snapshot_are_created_owner_only_whatever_the_umask(tmp_path, monkeypatch):
    monkeypatch.setattr(journal_module, "COMPACT_MIN_BYTES", 300)
    old_umask = os.umask(0o002)  # a permissive umask must not widen them
    try:
        with EmbeddedStore(tmp_path / "meta") as store:
            store.create("/config/users/alice", CREDENTIAL, make_parents=True)
            assert modes(tmp_path / "meta") == {"journal-0.log": 0o600}
            for i in range(10):  # past COMPACT_MIN_BYTES: a snapshot and a new journal
                store.set("/config/users/alice", CREDENTIAL + str(i).encode())
        found = modes(tmp_path / "meta")
        assert "snapshot.json" in found and len(found) == 2
        assert set(found.values()) == {0o600}
        assert stat.S_IMODE((tmp_path / "meta").stat().st_mode) == 0o700
    finally:
        os.umask(old_umask)


def test_files_of_an_older_store_are_narrowed_at_open(tmp_path, monkeypatch):
    monkeypatch.setattr(journal_module, "COMPACT_MIN_BYTES", 300)
    with EmbeddedStore(tmp_path) as store:
        for i in range(10):
            store.create(f"/config/users/u{i}", CREDENTIAL, make_parents=True)
    for path in tmp_path.iterdir():  # as a store made before the modes were narrowed left them
        if path.name.startswith(("journal-", "snapshot")):
            path.chmod(0o644)
    with EmbeddedStore(tmp_path) as store:
        assert store.get("/config/users/u9")[0] == CREDENTIAL
    assert set(modes(tmp_path).values()) == {0o600} and len(modes(tmp_path)) == 2
