"""AclAuthorizer on an embedded store: Kafka's decision rules, the ZooKeeper layout it writes,
and a second authorizer on the same store following the change notifications."""

from __future__ import annotations

import json
import threading
import time

import pytest

from odradek.metadata.embedded_store import EmbeddedStore
from odradek.server.acl_authorizer import AclAuthorizer, make_authorizer, parse_super_users
from odradek.server.acl_store import AclStore
from odradek.protocol.acl_binding import (
    ALL, ALLOW, ALTER_CONFIGS, ANY, CLUSTER, CLUSTER_NAME, CREATE, DENY, DESCRIBE, DESCRIBE_CONFIGS, GROUP, LITERAL,
    MATCH, PREFIXED, READ, TOPIC, WRITE, AccessControlEntry, AclBinding, AclBindingFilter, ResourcePattern,
    invalid_binding,
)
from odradek.server.config import BrokerConfig
from odradek.server.principal import KafkaPrincipal
from odradek.testing.broker import InProcessBroker
from tests.server.held_read import HeldRead
from tests.server.wire import WireClient, message

ALICE, BOB = KafkaPrincipal.user("alice"), KafkaPrincipal.user("bob")


def bind(rtype, name, principal, op, perm=ALLOW, pattern=LITERAL, host="*"):
    return AclBinding(ResourcePattern(rtype, name, pattern), AccessControlEntry(principal, host, op, perm))


@pytest.fixture
def store(tmp_path):
    s = EmbeddedStore(tmp_path / "meta")
    yield s
    s.close()


@pytest.fixture
def authorizer(store):
    a = AclAuthorizer(store)
    a.start()
    yield a
    a.close()


def test_no_acl_answers_allow_everyone_if_no_acl_found(store):
    for allow in (False, True):
        a = AclAuthorizer(store, allow_everyone_if_no_acl_found=allow)
        a.start()
        assert a.authorize(ALICE, "127.0.0.1", READ, TOPIC, "t") is allow
        a.close()


def test_allow_deny_implied_describe_and_super_users(store):
    a = AclAuthorizer(store, super_users=parse_super_users("User:admin; User:ops"))
    a.start()
    a.create([bind(TOPIC, "t", "User:alice", READ), bind(TOPIC, "t", "User:*", WRITE),
              bind(TOPIC, "t", "User:bob", WRITE, DENY), bind(TOPIC, "t", "User:alice", ALTER_CONFIGS)])
    assert a.authorize(ALICE, "h", READ, TOPIC, "t")
    assert a.authorize(ALICE, "h", DESCRIBE, TOPIC, "t")  # implied by READ
    assert a.authorize(ALICE, "h", DESCRIBE_CONFIGS, TOPIC, "t")  # implied by ALTER_CONFIGS
    assert a.authorize(ALICE, "h", WRITE, TOPIC, "t")  # User:*
    assert not a.authorize(BOB, "h", WRITE, TOPIC, "t")  # deny wins over User:*
    assert a.authorize(BOB, "h", DESCRIBE, TOPIC, "t")  # a deny of WRITE does not deny DESCRIBE
    assert not a.authorize(BOB, "h", READ, TOPIC, "t")
    assert not a.authorize(ALICE, "h", READ, TOPIC, "other")
    assert a.authorize(KafkaPrincipal.user("ops"), "h", READ, TOPIC, "other")
    assert not a.authorize(ALICE, "h", READ, GROUP, "t")


def test_prefixed_wildcard_host_and_all(authorizer):
    authorizer.create([bind(TOPIC, "orders-", "User:alice", ALL, pattern=PREFIXED),
                       bind(TOPIC, "orders-secret", "User:alice", READ, DENY),
                       bind(TOPIC, "*", "User:bob", READ, host="10.0.0.1")])
    assert authorizer.authorize(ALICE, "h", WRITE, TOPIC, "orders-eu")
    assert not authorizer.authorize(ALICE, "h", READ, TOPIC, "orders-secret")
    assert authorizer.authorize(ALICE, "h", WRITE, TOPIC, "orders-secret")
    assert not authorizer.authorize(ALICE, "h", READ, TOPIC, "order")
    assert authorizer.authorize(BOB, "10.0.0.1", READ, TOPIC, "anything")
    assert not authorizer.authorize(BOB, "10.0.0.2", READ, TOPIC, "anything")


def test_by_resource_type_kip_679(authorizer):
    assert not authorizer.authorize_by_resource_type(ALICE, "h", WRITE, TOPIC)
    authorizer.create([bind(TOPIC, "a-", "User:alice", WRITE, pattern=PREFIXED),
                       bind(TOPIC, "b", "User:bob", WRITE), bind(TOPIC, "b", "User:bob", WRITE, DENY)])
    assert authorizer.authorize_by_resource_type(ALICE, "h", WRITE, TOPIC)
    assert not authorizer.authorize_by_resource_type(BOB, "h", WRITE, TOPIC)  # its only allow is denied
    authorizer.create([bind(TOPIC, "a", "User:alice", WRITE, DENY, pattern=PREFIXED)])
    assert not authorizer.authorize_by_resource_type(ALICE, "h", WRITE, TOPIC)


def test_zookeeper_layout_and_notifications(store, authorizer):
    authorizer.create([bind(TOPIC, "t", "User:alice", READ), bind(GROUP, "g-", "User:alice", READ, pattern=PREFIXED)])
    data, _ = store.get("/kafka-acl/Topic/t")
    assert json.loads(data) == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}]}
    assert store.exists("/kafka-acl-extended/prefixed/Group/g-") is not None
    [literal] = store.children("/kafka-acl-changes")
    assert literal.startswith("acl_changes_")
    assert store.get(f"/kafka-acl-changes/{literal}")[0] == b"Topic:t"
    [extended] = store.children("/kafka-acl-extended-changes")
    assert json.loads(store.get(f"/kafka-acl-extended-changes/{extended}")[0]) == {
        "version": 1, "resourceType": "Group", "name": "g-", "patternType": "PREFIXED"}
    # Another broker's authorizer on the same store: loads what exists, follows later changes.
    other = AclAuthorizer(store)
    other.start()
    assert other.authorize(ALICE, "h", READ, TOPIC, "t")
    authorizer.create([bind(TOPIC, "u", "User:bob", WRITE)])
    assert other.authorize(BOB, "h", WRITE, TOPIC, "u")
    authorizer.delete([AclBindingFilter(resource_type=TOPIC, name="t", pattern_type=LITERAL)])
    assert store.exists("/kafka-acl/Topic/t") is None
    assert not other.authorize(ALICE, "h", READ, TOPIC, "t")
    other.close()


def test_remembered_decisions_follow_every_change(authorizer):
    """Decisions are remembered until the ACLs change: a grant, a deny and a delete each show
    at once in the next answer to the very same question."""
    ask = (ALICE, "h", WRITE, TOPIC, "team-a")
    assert not authorizer.authorize(*ask)
    authorizer.create([bind(TOPIC, "team-", "User:alice", WRITE, pattern=PREFIXED)])
    assert authorizer.authorize(*ask) and authorizer.authorize(*ask)
    authorizer.create([bind(TOPIC, "team-a", "User:*", ALL, DENY)])
    assert not authorizer.authorize(*ask)
    authorizer.delete([AclBindingFilter(resource_type=TOPIC, name="team-a", pattern_type=LITERAL)])
    assert authorizer.authorize(*ask)
    authorizer.delete([AclBindingFilter(resource_type=TOPIC, pattern_type=ANY)])
    assert not authorizer.authorize(*ask)


def test_describe_and_delete_filters(authorizer):
    authorizer.create([bind(TOPIC, "t", "User:alice", READ), bind(TOPIC, "t-", "User:bob", READ, pattern=PREFIXED),
                       bind(TOPIC, "*", "User:carol", READ), bind(GROUP, "t", "User:alice", READ)])
    names = lambda bs: sorted((b.pattern.name, b.entry.principal) for b in bs)  # noqa: E731
    assert names(authorizer.describe(AclBindingFilter(TOPIC, "t-1", MATCH))) == [("*", "User:carol"), ("t-", "User:bob")]
    assert names(authorizer.describe(AclBindingFilter(ANY, "t", ANY))) == [("t", "User:alice"), ("t", "User:alice")]
    assert names(authorizer.describe(AclBindingFilter(TOPIC, None, PREFIXED))) == [("t-", "User:bob")]
    assert len(authorizer.describe(AclBindingFilter(principal="User:alice"))) == 2
    [removed, none] = authorizer.delete([AclBindingFilter(TOPIC, "t", MATCH, principal="User:carol"),
                                         AclBindingFilter(CLUSTER)])
    assert names(removed) == [("*", "User:carol")] and none == []
    assert len(authorizer.describe(AclBindingFilter())) == 3


def test_invalid_bindings():
    assert invalid_binding(bind(TOPIC, "t", "User:a", READ)) is None
    assert invalid_binding(bind(CLUSTER, CLUSTER_NAME, "User:a", ALTER_CONFIGS)) is None
    assert "CLUSTER" in invalid_binding(bind(CLUSTER, "x", "User:a", ALTER_CONFIGS))
    assert "only supports" in invalid_binding(bind(GROUP, "g", "User:a", WRITE))
    assert invalid_binding(bind(TOPIC, "t", "alice", READ)) is not None
    assert invalid_binding(bind(TOPIC, "t", "User:a", READ, pattern=MATCH)) is not None


def test_make_authorizer_accepts_kafkas_class_names(store):
    assert make_authorizer(BrokerConfig.from_props({}), store) is None
    for name in ("kafka.security.authorizer.AclAuthorizer", "org.apache.kafka.metadata.authorizer.StandardAuthorizer"):
        a = make_authorizer(BrokerConfig.from_props({"authorizer.class.name": name, "super.users": "User:x"}), store)
        assert a.super_users == {"User:x"}
        a.close()
    with pytest.raises(ValueError, match="odradek provides"):
        make_authorizer(BrokerConfig.from_props({"authorizer.class.name": "com.example.Mine"}), store)


def test_by_resource_type_passes_a_made_up_name_first(store):
    """As Kafka: super users, and allow.everyone.if.no.acl.found while no ACL applies to the
    made-up name, pass without an allowing ACL."""
    a = AclAuthorizer(store, super_users={"User:admin"}, allow_everyone_if_no_acl_found=True)
    a.start()
    a.create([bind(TOPIC, "t", "User:bob", WRITE, DENY)])
    assert a.authorize_by_resource_type(BOB, "h", WRITE, TOPIC)  # nothing names "hardcode"
    a.create([bind(TOPIC, "*", "User:bob", WRITE, DENY)])
    assert not a.authorize_by_resource_type(BOB, "h", WRITE, TOPIC)
    assert a.authorize_by_resource_type(KafkaPrincipal.user("admin"), "h", WRITE, TOPIC)
    a.close()


def test_a_change_from_another_broker_is_read_off_the_event_loop(tmp_path):
    """While the authorizer reads an ACL that another broker changed, the broker's event loop
    still answers requests; the ACL applies once the read returns."""
    with InProcessBroker(tmp_path / "data", authorizer_class_name="kafka.security.authorizer.AclAuthorizer",
                         allow_everyone_if_no_acl_found="true") as b:
        store, authorizer = b.broker.metadata.store, b.broker.authorizer
        pattern = ResourcePattern(TOPIC, "held", LITERAL)
        read = HeldRead(store, "/kafka-acl/Topic/held", armed=False)
        entry = AccessControlEntry("User:alice", "*", READ, ALLOW)

        def add(current):  # the writer's own read is done: hold the authorizer's, after the write
            read.armed.set()
            return current | {entry}

        writer = threading.Thread(target=AclStore(store).update, args=(pattern, add))
        writer.start()  # as another broker: the watch runs in the writer's thread here
        client = WireClient(b.bootstrap, timeout=5)
        try:
            assert read.held.wait(10)
            _, answer = client.request("ApiVersions", 0, message("ApiVersionsRequest"))
            assert answer.error_code == 0
            assert b.call(authorizer.authorize, BOB, "h", READ, TOPIC, "held")  # not applied yet: open
        finally:
            read.release()
            client.close()
            writer.join(10)
        deadline = time.monotonic() + 10
        while b.call(authorizer.authorize, BOB, "h", READ, TOPIC, "held"):
            assert time.monotonic() < deadline, "the ACL never applied"
        assert b.call(authorizer.authorize, ALICE, "h", READ, TOPIC, "held")


def test_a_prefixed_acl_covers_the_name_equal_to_its_prefix(authorizer):
    """Kafka's PREFIXED matches a name that starts with the prefix, the prefix itself included:
    ``orders-`` covers the topic ``orders-`` as it covers ``orders-eu``, for an allow and a deny,
    and in authorizeByResourceType's deny cover."""
    carol = KafkaPrincipal.user("carol")
    authorizer.create([bind(TOPIC, "c-", "User:carol", CREATE),
                       bind(TOPIC, "c-", "User:carol", CREATE, DENY, PREFIXED)])
    assert not authorizer.authorize(carol, "h", CREATE, TOPIC, "c-")
    assert not authorizer.authorize_by_resource_type(carol, "h", CREATE, TOPIC)  # its only allow is covered
    authorizer.create([bind(TOPIC, "orders-", "User:alice", READ, pattern=PREFIXED),
                       bind(TOPIC, "audit-", "User:*", ALL, pattern=PREFIXED),
                       bind(TOPIC, "audit-", "User:bob", READ, DENY, pattern=PREFIXED)])
    assert authorizer.authorize(ALICE, "h", READ, TOPIC, "orders-")
    assert authorizer.authorize(ALICE, "h", READ, TOPIC, "orders-eu")
    assert not authorizer.authorize(ALICE, "h", READ, TOPIC, "orders")
    assert authorizer.authorize(BOB, "h", WRITE, TOPIC, "audit-")
    assert not authorizer.authorize(BOB, "h", READ, TOPIC, "audit-")
