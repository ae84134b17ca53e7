import pytest

from odradek.protocol.jaas_config import JaasConfigError, client_credentials, parse, plain_users

BROKER = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
          'password="admin-secret" user_admin="admin-secret" user_alice="al\\"ice";')


def test_broker_plain_config_as_kafka_writes_it():
    (module,) = parse(BROKER)
    assert module.name.endswith("PlainLoginModule") and module.flag == "required"
    assert plain_users(BROKER) == {"admin": "admin-secret", "alice": 'al"ice'}
    assert client_credentials(BROKER) == ("admin", "admin-secret")


def test_bare_values_and_several_modules():
    text = "a.B required username=bob password=x; c.D optional;"
    assert [m.name for m in parse(text)] == ["a.B", "c.D"]
    assert client_credentials(text) == ("bob", "x")


@pytest.mark.parametrize("bad", ["", "a.B required username=x", "a.B maybe;", "a.B required username;",
                                 'a.B required password="x";'])
def test_bad_configs_refused(bad):
    with pytest.raises(JaasConfigError):
        client_credentials(bad)
