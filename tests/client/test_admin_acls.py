"""odradek's admin client: create_acls, describe_acls, delete_acls against a broker with Kafka's
authorizer, and the errors of a broker without one."""

from __future__ import annotations

import pytest

from odradek.client.errors import BrokerError
from odradek.client.sync import AdminClient
from odradek.protocol.acl_binding import (
    ALLOW, ANY, DENY, GROUP, LITERAL, MATCH, PREFIXED, READ, TOPIC, WRITE, AccessControlEntry, AclBinding,
    AclBindingFilter, ResourcePattern,
)
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.testing.broker import InProcessBroker


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory):
    with InProcessBroker(tmp_path_factory.mktemp("acl") / "data",
                         authorizer_class_name="kafka.security.authorizer.AclAuthorizer",
                         super_users="User:ANONYMOUS") as b:
        yield b


def binding(rtype, name, principal, op, perm=ALLOW, pattern=LITERAL):
    return AclBinding(ResourcePattern(rtype, name, pattern), AccessControlEntry(principal, "*", op, perm))


def test_create_describe_delete(acl_broker):
    admin = AdminClient(acl_broker.bootstrap)
    try:
        wanted = [binding(TOPIC, "od-t", "User:alice", READ), binding(TOPIC, "od-", "User:bob", WRITE, DENY, PREFIXED),
                  binding(GROUP, "od-g", "User:alice", READ)]
        bad = binding(GROUP, "od-g", "User:alice", WRITE)  # groups know no WRITE
        results = admin.create_acls(wanted + [bad])
        assert [results[b] for b in wanted] == [None, None, None]
        assert results[bad].code == ErrorCode.INVALID_REQUEST
        assert set(admin.describe_acls(AclBindingFilter())) >= set(wanted)
        assert set(admin.describe_acls(AclBindingFilter(TOPIC, "od-t", MATCH))) == set(wanted[:2])
        flt = AclBindingFilter(ANY, None, ANY, principal="User:alice")
        assert set(admin.delete_acls([flt])[flt]) == {wanted[0], wanted[2]}
        assert admin.describe_acls(AclBindingFilter(principal="User:alice")) == []
    finally:
        admin.close()


def test_without_an_authorizer_security_is_disabled(broker):
    admin = AdminClient(broker.bootstrap)
    try:
        with pytest.raises(BrokerError) as e:
            admin.describe_acls()
        assert e.value.code == ErrorCode.SECURITY_DISABLED
        [result] = admin.create_acls([binding(TOPIC, "t", "User:a", READ)]).values()
        assert result.code == ErrorCode.SECURITY_DISABLED
    finally:
        admin.close()
