"""Group configs (ConfigResource GROUP, ``server/group_configs.py``) end to end: set with
confluent-kafka's IncrementalAlterConfigs as librdkafka's share tests do, described, seen by the
group coordinator (a consumer group's heartbeat interval), kept across a restart, set and
described with ``odradek configs --entity-type groups``; invalid values INVALID_CONFIG; ALTER
and DESCRIBE_CONFIGS on the group checked."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding, AclOperation, AclPermissionType, AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
    ResourcePatternType, ResourceType,
)

from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode as E
from odradek.server import group_configs
from odradek.testing.broker import InProcessBroker
from tests.cli.conftest import run_cli
from tests.server.group_clients import wait_for
from tests.server.group_wire import WireClient

GROUP_CONFIG, DEFAULT_CONFIG = 8, 5


def alter(bootstrap: str, group: str, **values: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
               for k, v in values.items()]
    for future in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group,
                                                                  incremental_configs=entries)]).values():
        future.result(10)


def describe(bootstrap: str, group: str) -> dict:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    (future,) = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)]).values()
    return {name: (e.value, e.source) for name, e in future.result(10).items()}


def test_group_configs_with_confluent_kafka_survive_a_restart(tmp_path):
    data = tmp_path / "data"
    with InProcessBroker(data) as b:
        alter(b.bootstrap, "sg", share_auto_offset_reset="earliest", share_isolation_level="read_committed")
        seen = describe(b.bootstrap, "sg")
        assert seen["share.auto.offset.reset"] == ("earliest", GROUP_CONFIG)
        assert seen["share.isolation.level"] == ("read_committed", GROUP_CONFIG)
        assert seen["share.record.lock.duration.ms"] == ("30000", DEFAULT_CONFIG)
        assert set(seen) == set(group_configs.NAMES)
        got = b.broker.group_configs.get("sg")
        assert (got["share.auto.offset.reset"], got["share.record.lock.duration.ms"]) == ("earliest", 30000)
        assert b.broker.group_configs.get("other")["share.auto.offset.reset"] == "latest"
    with InProcessBroker(data) as b:
        assert b.broker.group_configs.get("sg")["share.isolation.level"] == "read_committed"
        assert describe(b.bootstrap, "sg")["share.auto.offset.reset"] == ("earliest", GROUP_CONFIG)


@pytest.mark.parametrize("name, value", [
    ("share.auto.offset.reset", "newest"),
    ("share.auto.offset.reset", "by_duration:-PT1H"),
    ("share.auto.offset.reset", "by_duration:1h"),
    ("share.isolation.level", "serializable"),
    ("share.record.lock.duration.ms", "5000"),      # below group.share.min.record.lock.duration.ms
    ("share.record.lock.duration.ms", "999999"),    # above group.share.max.record.lock.duration.ms
    ("consumer.heartbeat.interval.ms", "100"),      # below group.consumer.min.heartbeat.interval.ms
    ("share.session.timeout.ms", "ten"),
    ("no.such.group.config", "1"),
])
def test_invalid_group_configs_are_refused(shared_broker, name, value):
    with pytest.raises(KafkaException) as e:
        alter(shared_broker.bootstrap, "refused", **{name.replace(".", "_"): value})
    assert e.value.args[0].name() == "INVALID_CONFIG"
    assert shared_broker.broker.group_configs.overrides("refused") == {}


def test_a_valid_duration_and_the_session_above_the_interval(shared_broker):
    assert group_configs.by_duration_ms("by_duration:P1DT2H3M4.5S") == 93_784_500
    alter(shared_broker.bootstrap, "dur", share_auto_offset_reset="by_duration:PT10M")
    assert shared_broker.broker.group_configs.get("dur")["share.auto.offset.reset"] == "by_duration:pt10m"
    with pytest.raises(KafkaException):  # 15000 >= its 15000 session timeout
        alter(shared_broker.bootstrap, "dur", share_heartbeat_interval_ms="15000", share_session_timeout_ms="45000",
              consumer_session_timeout_ms="15000", consumer_heartbeat_interval_ms="15000")


def test_the_consumer_group_coordinator_uses_the_groups_heartbeat_interval(shared_broker):
    alter(shared_broker.bootstrap, "cg", consumer_heartbeat_interval_ms="7000")
    with WireClient(shared_broker.port) as c:
        c.call(ApiKey.FIND_COORDINATOR, 3, key="cg", key_type=0)  # creates __consumer_offsets

        def join():
            r = c.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, group_id="cg", member_id="m1", member_epoch=0,
                       rebalance_timeout_ms=30000, subscribed_topic_names=["t"], topic_partitions=[])
            return r if r.error_code not in (E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE,
                                             E.NOT_COORDINATOR) else None
        r = wait_for(join)
        assert (r.error_code, r.heartbeat_interval_ms) == (E.NONE, 7000)


def test_odradek_configs_groups(shared_broker):
    base = ("configs", "--bootstrap-server", shared_broker.bootstrap, "--entity-type", "groups", "--entity-name", "cli")
    done = run_cli(*base, "--alter", "--add-config", "share.auto.offset.reset=earliest")
    assert done.code == 0, done
    assert "Completed updating config for group cli." in done.out
    shown = run_cli(*base, "--describe")
    assert shown.code == 0 and "share.auto.offset.reset" in shown.out and "earliest" in shown.out
    assert "share.isolation.level" not in shown.out  # not set on the group: shown with --all only
    assert "share.isolation.level" in run_cli(*base, "--describe", "--all").out
    assert run_cli(*base, "--alter", "--delete-config", "share.auto.offset.reset").code == 0
    assert shared_broker.broker.group_configs.overrides("cli") == {}


def test_altering_and_describing_group_configs_need_their_acls(tmp_path):
    props = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
             "allow.everyone.if.no.acl.found": "true"}
    with InProcessBroker(tmp_path / "data", **{k.replace(".", "_"): v for k, v in props.items()}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        denials = [AclBinding(ResourceType.GROUP, "guarded", ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                              op, AclPermissionType.DENY)
                   for op in (AclOperation.ALTER_CONFIGS, AclOperation.DESCRIBE_CONFIGS)]
        for future in admin.create_acls(denials).values():
            future.result(10)
        with pytest.raises(KafkaException) as e:
            alter(b.bootstrap, "guarded", share_auto_offset_reset="earliest")
        assert e.value.args[0].name() == "GROUP_AUTHORIZATION_FAILED"
        assert b.broker.group_configs.overrides("guarded") == {}
        with pytest.raises(KafkaException) as e:
            describe(b.bootstrap, "guarded")
        assert e.value.args[0].name() == "GROUP_AUTHORIZATION_FAILED"
        alter(b.bootstrap, "open", share_auto_offset_reset="earliest")  # another group: allowed
