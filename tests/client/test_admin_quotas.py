"""odradek's admin client: alter_client_quotas and describe_client_quotas against a broker
(Kafka's DescribeClientQuotas / AlterClientQuotas), its filters, errors and validate_only."""

from __future__ import annotations

import json

import pytest

from odradek.client.admin_quotas import ClientQuotaAlteration, ClientQuotaFilter, ClientQuotaFilterComponent as C
from odradek.client.sync import AdminClient
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.testing.broker import InProcessBroker


@pytest.fixture(scope="module")
def quota_broker(tmp_path_factory):
    with InProcessBroker(tmp_path_factory.mktemp("quotas") / "data") as b:
        yield b


def test_alter_then_describe_with_kafkas_filters(quota_broker):
    admin = AdminClient(quota_broker.bootstrap)
    try:
        results = admin.alter_client_quotas([
            ClientQuotaAlteration({"client-id": "greedy"}, [("producer_byte_rate", 204800)]),
            ClientQuotaAlteration({"user": "alice", "client-id": "c1"}, [("consumer_byte_rate", 1000)]),
            ClientQuotaAlteration({"user": None}, [("request_percentage", 50.5)]),
        ])
        assert list(results.values()) == [None, None, None]
        greedy, alice_c1, default_user = (("client-id", "greedy"),), (("client-id", "c1"), ("user", "alice")), \
            (("user", None),)
        everything = admin.describe_client_quotas(ClientQuotaFilter())
        assert everything[greedy] == {"producer_byte_rate": 204800.0}
        assert everything[alice_c1] == {"consumer_byte_rate": 1000.0}
        assert everything[default_user] == {"request_percentage": 50.5}
        # exact and strict: only that entity; not strict: every entity with that client id
        assert admin.describe_client_quotas(ClientQuotaFilter([C.of_entity("client-id", "greedy")], strict=True)) \
            == {greedy: {"producer_byte_rate": 204800.0}}
        assert set(admin.describe_client_quotas(ClientQuotaFilter([C.of_entity("client-id", "c1")]))) == {alice_c1}
        assert set(admin.describe_client_quotas(ClientQuotaFilter([C.of_default_entity("user")]))) == {default_user}
        assert set(admin.describe_client_quotas(ClientQuotaFilter([C.of_entity_type("user")], strict=True))) \
            == {default_user}
        # stored as Kafka stores it, and announced to every broker
        store = quota_broker.broker.metadata.store
        data = quota_broker.call(store.get, "/config/users/alice/clients/c1")[0]
        assert json.loads(data) == {"version": 1, "config": {"consumer_byte_rate": "1000"}}
        assert quota_broker.call(quota_broker.broker.client_quotas.find, "producer_byte_rate", "bob", "greedy") \
            == (greedy, 204800.0)
        admin.alter_client_quotas([ClientQuotaAlteration({"client-id": "greedy"}, [("producer_byte_rate", None)])])
        assert greedy not in admin.describe_client_quotas()
    finally:
        admin.close()


def test_errors_are_per_entity_and_validate_only_writes_nothing(quota_broker):
    admin = AdminClient(quota_broker.bootstrap)
    try:
        results = admin.alter_client_quotas([
            ClientQuotaAlteration({"client-id": "v"}, [("producer_byte_rate", 10)]),
            ClientQuotaAlteration({"client-id": "w"}, [("producer_byte_rate", 1.5)]),
            ClientQuotaAlteration({"client-id": "x"}, [("bogus", 1)]),
            ClientQuotaAlteration({"group": "g"}, [("producer_byte_rate", 1)]),
            ClientQuotaAlteration({"user": ""}, [("producer_byte_rate", 1)]),
        ], validate_only=True)
        codes = [None if e is None else e.code for e in results.values()]
        assert codes == [None] + [ErrorCode.INVALID_REQUEST] * 4
        assert "must be a LONG value" in results[(("client-id", "w"),)].message
        assert (("client-id", "v"),) not in admin.describe_client_quotas()
        with pytest.raises(Exception) as refused:
            admin.describe_client_quotas(ClientQuotaFilter([C.of_entity_type("user"), C.of_entity_type("user")]))
        assert getattr(refused.value, "code", None) == ErrorCode.INVALID_REQUEST
        with pytest.raises(Exception) as refused:
            admin.describe_client_quotas(ClientQuotaFilter([C.of_entity_type("group")]))
        assert getattr(refused.value, "code", None) == ErrorCode.UNSUPPORTED_VERSION
        assert admin.describe_client_quotas(ClientQuotaFilter([C.of_entity_type("ip")])) == {}
    finally:
        admin.close()


def test_under_an_authorizer_the_cluster_must_be_allowed(tmp_path):
    with InProcessBroker(tmp_path, authorizer_class_name="kafka.security.authorizer.AclAuthorizer") as b:
        admin = AdminClient(b.bootstrap)
        try:
            results = admin.alter_client_quotas([ClientQuotaAlteration({"client-id": "c"}, [("producer_byte_rate", 1)])])
            assert results[(("client-id", "c"),)].code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            with pytest.raises(Exception) as refused:
                admin.describe_client_quotas()
            assert getattr(refused.value, "code", None) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        finally:
            admin.close()
