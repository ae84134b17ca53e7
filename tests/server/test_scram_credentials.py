"""SCRAM credentials in the metadata store as Kafka keeps them: ``/config/users/<user>`` JSON
with ScramCredentialUtils strings, other user configs (quotas) kept, names sanitized."""

import json

import pytest

from odradek.metadata.embedded_store import EmbeddedStore
from odradek.protocol.scram import ScramCredential, make_credential
from odradek.server import scram_credentials as creds


@pytest.fixture
def store(tmp_path):
    with EmbeddedStore(tmp_path / "meta") as s:
        yield s


def test_layout_is_kafkas_and_other_configs_are_kept(store):
    store.create("/config/users/alice", json.dumps({"version": 1, "config": {"producer_byte_rate": "1024"}}).encode(),
                 make_parents=True)
    credential = make_credential("SCRAM-SHA-512", "pw", b"salt", 4096)
    creds.alter(store, "alice", {"SCRAM-SHA-512": credential}, [])
    stored = json.loads(store.get("/config/users/alice")[0])
    assert stored == {"version": 1, "config": {"producer_byte_rate": "1024", "SCRAM-SHA-512": credential.to_string()}}
    assert stored["config"]["SCRAM-SHA-512"].startswith("salt=c2FsdA==,stored_key=")
    assert creds.lookup(store, "SCRAM-SHA-512", "alice") == credential
    assert creds.lookup(store, "SCRAM-SHA-256", "alice") is None
    creds.alter(store, "alice", {}, ["SCRAM-SHA-512"])
    assert creds.user_config(store, "alice") == {"producer_byte_rate": "1024"}


def test_credentials_written_by_kafkas_tools_are_read(store):
    """A znode as ``kafka-configs.sh --zookeeper`` writes it (a real Kafka credential string)."""
    text = ("salt=MWtxOG56dHVyNHRyMHdtbWhvenB6dDJmbnE=,stored_key=R/XFiAGyz6bQ0xlPDXcQmH7Snd0nbCSCTahcvl3nfZE=,"
            "server_key=nhjDBaTYBtIgwMwGHwKcgFu5WdIz4Hg/yuCpdOPCd7c=,iterations=4096")
    store.create("/config/users/bob", json.dumps({"version": 1, "config": {"SCRAM-SHA-256": text}}).encode(),
                 make_parents=True)
    assert creds.lookup(store, "SCRAM-SHA-256", "bob") == ScramCredential.from_string(text)
    assert creds.users(store) == ["bob"]


def test_names_are_sanitized_and_bad_ones_refused(store):
    creds.alter(store, "CN=a b,O=x", {"SCRAM-SHA-256": make_credential("SCRAM-SHA-256", "pw")}, [])
    assert store.children("/config/users") == ["CN%3Da%20b%2CO%3Dx"]
    assert creds.users(store) == ["CN=a b,O=x"]
    assert creds.lookup(store, "SCRAM-SHA-256", "..") is None
    with pytest.raises(ValueError):
        creds.alter(store, "..", {}, [])
    store.set("/config/users/CN%3Da%20b%2CO%3Dx", b'{"version":1,"config":{"SCRAM-SHA-256":"garbage"}}')
    assert creds.lookup(store, "SCRAM-SHA-256", "CN=a b,O=x") is None
