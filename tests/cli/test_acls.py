"""``odradek acls`` as kafka-acls.sh: --add, --list, --remove with its flags and output, on a
broker with Kafka's authorizer (this test's connections are User:ANONYMOUS, a super user)."""

from __future__ import annotations

import pytest
from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, KafkaAdminClient
from kafka.admin import ResourcePatternFilter, ResourceType

from odradek.testing.broker import InProcessBroker
from tests.cli.conftest import BROKER_ID


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with InProcessBroker(tmp_path_factory.mktemp("cli-acls") / "data", node_id=BROKER_ID,
                         authorizer_class_name="kafka.security.authorizer.AclAuthorizer",
                         super_users="User:ANONYMOUS") as b:
        yield b


def test_add_list_remove(cli, broker):
    added = cli("acls", "--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Describe",
                "--topic", "orders", "--group", "billing")
    assert added.code == 0, added.err
    assert "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`: " in added.out
    assert "\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in added.out
    listed = cli("acls", "--list", "--topic", "orders")
    assert listed.out == (
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`: \n"
        " \t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)\n"
        "\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) \n\n")
    # kafka-python sees what the command wrote.
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        acls, _ = kp.describe_acls(ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                             ResourcePatternFilter(ResourceType.GROUP, "billing",
                                                                   ACLResourcePatternType.LITERAL)))
        assert {(a.principal, a.operation) for a in acls} == {("User:alice", ACLOperation.READ),
                                                              ("User:alice", ACLOperation.DESCRIBE)}
    finally:
        kp.close()
    removed = cli("acls", "--remove", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders",
                  "--force")
    assert removed.code == 0, removed.err
    assert "operation=READ" not in cli("acls", "--list", "--topic", "orders").out
    # without --force it asks; "n" keeps them
    kept = cli("acls", "--remove", "--group", "billing", stdin="n\n")
    assert "Are you sure you want to delete all ACLs for resource filter" in kept.out
    assert "billing" in cli("acls", "--list", "--group", "billing").out


def test_producer_consumer_prefixed_and_match(cli):
    assert cli("acls", "--add", "--allow-principal", "User:bob", "--producer", "--topic", "logs-",
               "--resource-pattern-type", "prefixed", "--transactional-id", "tx-").code == 0
    assert cli("acls", "--add", "--deny-principal", "User:eve", "--deny-host", "10.0.0.9", "--consumer",
               "--topic", "logs-app", "--group", "readers").code == 0
    listed = cli("acls", "--list", "--topic", "logs-app", "--resource-pattern-type", "match").out
    assert "name=logs-, patternType=PREFIXED" in listed and "name=logs-app, patternType=LITERAL" in listed
    for op in ("WRITE", "DESCRIBE", "CREATE"):
        assert f"(principal=User:bob, host=*, operation={op}, permissionType=ALLOW)" in listed
    assert "(principal=User:eve, host=10.0.0.9, operation=READ, permissionType=DENY)" in listed
    bob = cli("acls", "--list", "--principal", "User:bob").out
    assert bob.startswith("ACLs for principal `User:bob`\n") and "User:eve" not in bob
    assert "resourceType=TRANSACTIONAL_ID, name=tx-, patternType=PREFIXED" in bob


def test_refusals(cli):
    assert cli("acls", "--topic", "t").code == 1  # no action
    bad_group_op = cli("acls", "--add", "--allow-principal", "User:a", "--operation", "Write", "--group", "g")
    assert bad_group_op.code == 1 and "only supports operations" in bad_group_op.err
    assert cli("acls", "--add", "--allow-principal", "alice", "--topic", "t").code == 1
    assert cli("acls", "--add", "--operation", "Read", "--topic", "t").code == 1  # no principal
    match_add = cli("acls", "--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match")
    assert match_add.code == 1 and "not valid when adding acls" in match_add.err
    assert cli("acls", "--add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t").code == 1
