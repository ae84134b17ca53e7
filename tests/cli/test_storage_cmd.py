"""``odradek storage format --add-scram`` (``cli/storage_cmd.py``): credentials written into the
embedded store a broker's properties name, readable as the broker reads them; bad values and a
store held by a running broker refused in one line. (ZooKeeper: the secured cluster test in
``tests/server/cluster/test_inter_broker_tls.py``; a login with a formatted credential:
``tests/server/test_secured_server_properties.py``.)"""

from __future__ import annotations

import pytest

from odradek.metadata.embedded_store import EmbeddedStore
from odradek.protocol.scram import credential_from_salted, salted_password
from odradek.server import scram_credentials
from odradek.server.metadata_setup import EMBEDDED_DIR
from odradek.testing.broker import InProcessBroker
from odradek.testing.broker import test_config as broker_props
from tests.cli.conftest import run_cli


def _properties(tmp_path) -> str:
    path = tmp_path / "server.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in broker_props(tmp_path / "data").items()))
    return str(path)


def test_format_writes_each_credential_where_the_broker_reads_it(tmp_path):
    result = run_cli("storage", "format", "-c", _properties(tmp_path),
                     "--add-scram", "SCRAM-SHA-512=[name=admin,password=admin-secret]",
                     "-S", "SCRAM-SHA-256=[name=alice,iterations=8192,password=a=b]")
    assert result.code == 0, result.err
    assert result.lines() == ["Added SCRAM-SHA-512 credential for user admin.",
                              "Added SCRAM-SHA-256 credential for user alice."]
    store = EmbeddedStore(tmp_path / "data" / EMBEDDED_DIR)
    try:
        admin = scram_credentials.lookup(store, "SCRAM-SHA-512", "admin")
        alice = scram_credentials.lookup(store, "SCRAM-SHA-256", "alice")
    finally:
        store.close()
    assert admin.iterations == 4096 and alice.iterations == 8192
    # the stored keys are those of the password given: a login with it would succeed
    expected = credential_from_salted("SCRAM-SHA-256", salted_password("SCRAM-SHA-256", b"a=b", alice.salt, 8192),
                                      alice.salt, 8192)
    assert alice.stored_key == expected.stored_key and alice.server_key == expected.server_key


@pytest.mark.parametrize("value, message", [
    ("SCRAM-SHA-1=[name=a,password=p]", "expected SCRAM-SHA-256 or SCRAM-SHA-512"),
    ("SCRAM-SHA-512=[name=a]", "needs name=<user> and password=<password>"),
    ("SCRAM-SHA-512=[name=a,password=p,salt=x]", "unknown field 'salt=x'"),
    ("SCRAM-SHA-512=[name=a,password=p,iterations=100]", "Iterations 100 is less than the minimum 4096"),
])
def test_a_bad_credential_is_one_line(tmp_path, value, message):
    result = run_cli("storage", "format", "-c", _properties(tmp_path), "--add-scram", value)
    assert result.code == 1 and message in result.err and len(result.err.splitlines()) == 1, result.err


def test_the_store_of_a_running_broker_is_refused(tmp_path):
    properties = _properties(tmp_path)
    with InProcessBroker(tmp_path / "data"):
        result = run_cli("storage", "format", "-c", properties, "-S", "SCRAM-SHA-512=[name=a,password=p]")
    assert result.code == 1 and "is the broker running?" in result.err, result.err
