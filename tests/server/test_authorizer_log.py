"""The authorizer's audit log (``server/authorizer_log.py``): every decision on the logger
``kafka.authorizer.logger``, denials at INFO, grants at DEBUG; a denial that only filters (a
Metadata listing) at DEBUG, a grant only asked about (authorized operations) at TRACE. Checked
on ``AclAuthorizer`` alone and on a broker answering real requests."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, AdminClient, ResourcePatternType
from confluent_kafka.admin import ResourceType

from odradek.metadata.embedded_store import EmbeddedStore
from odradek.protocol import codec
from odradek.protocol.acl_binding import (
    ALLOW, DENY, LITERAL, READ, TOPIC, WRITE, AccessControlEntry, AclBinding as Binding, ResourcePattern,
)
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server.acl_authorizer import AclAuthorizer
from odradek.server.authorizer_log import AUDIT_LOGGER, TRACE, request_name
from odradek.server.principal import KafkaPrincipal
from odradek.testing.broker import InProcessBroker
from tests.server.test_bad_input import create_topic
from tests.server.wire import WireClient, message, produce_body, simple_batch

ALICE = KafkaPrincipal.user("alice")


def audit(caplog) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == AUDIT_LOGGER]


@pytest.fixture
def authorizer(tmp_path):
    store = EmbeddedStore(tmp_path / "meta")
    a = AclAuthorizer(store)
    a.start()
    pattern = ResourcePattern(TOPIC, "secret", LITERAL)
    a.create([Binding(pattern, AccessControlEntry("User:alice", "*", WRITE, ALLOW)),
              Binding(pattern, AccessControlEntry("User:alice", "*", READ, DENY))])
    yield a
    a.close()
    store.close()


def test_each_decision_is_one_line_at_its_level(authorizer, caplog):
    caplog.set_level(TRACE, logger=AUDIT_LOGGER)
    assert not authorizer.authorize(ALICE, "127.0.0.1", READ, TOPIC, "secret", api_key=ApiKey.FETCH)
    assert authorizer.authorize(ALICE, "127.0.0.1", WRITE, TOPIC, "secret", api_key=ApiKey.PRODUCE)
    assert audit(caplog) == [
        (logging.INFO, "Denied: principal=User:alice operation=Read host=127.0.0.1 "
                       "resource=Topic:LITERAL:secret request=Fetch"),
        (logging.DEBUG, "Allowed: principal=User:alice operation=Write host=127.0.0.1 "
                        "resource=Topic:LITERAL:secret request=Produce")]
    caplog.clear()
    # A remembered decision is logged again; Kafka's Action flags lower the level of a filter's
    # denial and of an authorized-operations grant.
    assert not authorizer.authorize(ALICE, "127.0.0.1", READ, TOPIC, "secret", api_key=ApiKey.FETCH)
    assert not authorizer.authorize(ALICE, "h", READ, TOPIC, "secret", api_key=ApiKey.METADATA, log_if_denied=False)
    assert authorizer.authorize(ALICE, "h", WRITE, TOPIC, "secret", api_key=ApiKey.METADATA, log_if_allowed=False)
    assert [level for level, _ in audit(caplog)] == [logging.INFO, logging.DEBUG, TRACE]


def test_the_loggers_level_decides_what_is_written(authorizer, caplog):
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    authorizer.authorize(ALICE, "h", WRITE, TOPIC, "secret", api_key=ApiKey.PRODUCE)
    authorizer.authorize(ALICE, "h", READ, TOPIC, "secret", api_key=ApiKey.FETCH)
    assert [level for level, _ in audit(caplog)] == [logging.INFO]


def test_request_names_are_kafkas():
    assert [request_name(k) for k in (ApiKey.LEADER_AND_ISR, ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.LIST_OFFSETS)] == [
        "LeaderAndIsr", "AddPartitionsToTxn", "ListOffsets"]
    assert request_name(None) == "?"


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory):
    """ACLs on; clients are User:ANONYMOUS; ``log-open`` has no ACL (open to everyone),
    ``log-closed``, ``log-hidden`` and the cluster only ACLs for someone else."""
    with InProcessBroker(tmp_path_factory.mktemp("audit") / "data",
                         authorizer_class_name="kafka.security.authorizer.AclAuthorizer",
                         allow_everyone_if_no_acl_found="true") as b:
        c = WireClient(b.bootstrap)
        for name in ("log-open", "log-closed", "log-hidden"):
            create_topic(c, name)
        c.close()
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        acls = [AclBinding(ResourceType.TOPIC, name, ResourcePatternType.LITERAL, "User:ops", "*", AclOperation.ALL,
                           AclPermissionType.ALLOW) for name in ("log-closed", "log-hidden")]
        acls.append(AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:ops", "*",
                               AclOperation.DESCRIBE, AclPermissionType.ALLOW))
        for future in admin.create_acls(acls).values():
            future.result(10)
        yield b


@pytest.fixture
def wire(acl_broker):
    c = WireClient(acl_broker.bootstrap)
    yield c
    c.close()


def produce(wire: WireClient, topic: str) -> int:
    _, resp = wire.request("Produce", 8, produce_body(topic, 0, simple_batch([b"x"])))
    return resp.responses[0].partition_responses[0].error_code


def test_a_denied_produce_is_one_info_line(wire, caplog):
    caplog.set_level(logging.DEBUG, logger=AUDIT_LOGGER)
    assert produce(wire, "log-closed") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    infos = [text for level, text in audit(caplog) if level == logging.INFO]
    assert infos == ["Denied: principal=User:ANONYMOUS operation=Write host=127.0.0.1 "
                     "resource=Topic:LITERAL:log-closed request=Produce"]


def test_an_allowed_produce_logs_at_debug_only(wire, caplog):
    caplog.set_level(logging.DEBUG, logger=AUDIT_LOGGER)
    assert produce(wire, "log-open") == ErrorCode.NONE
    lines = audit(caplog)
    assert lines and {level for level, _ in lines} == {logging.DEBUG}
    assert all(text.startswith("Allowed: principal=User:ANONYMOUS operation=Write") for _, text in lines)


def test_metadata_filtering_a_listing_logs_its_denials_at_debug(wire, caplog):
    """Kafka's handleTopicMetadataRequest: every topic asked for, the ones the principal may
    not describe are left out quietly; one named and refused is a denial at INFO."""
    caplog.set_level(logging.DEBUG, logger=AUDIT_LOGGER)
    _, listing = wire.request("Metadata", 9, message("MetadataRequest", topics=None, allow_auto_topic_creation=False))
    assert "log-hidden" not in {t.name for t in listing.topics}
    hidden = [level for level, text in audit(caplog) if "log-hidden" in text]
    assert hidden == [logging.DEBUG]
    caplog.clear()
    mr = codec.module("MetadataRequest")
    _, answer = wire.request("Metadata", 9, mr.MESSAGE(topics=[mr.MetadataRequestTopic(name="log-hidden")],
                                                       allow_auto_topic_creation=False))
    assert answer.topics[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert [level for level, text in audit(caplog) if "log-hidden" in text] == [logging.INFO]


def test_list_groups_filtering_logs_its_denials_at_debug(wire, caplog):
    """Kafka's handleListGroupsRequest: without DESCRIBE on the cluster the listing keeps the
    describable groups; the cluster's denial refuses nothing, so it is not an INFO line."""
    caplog.set_level(logging.DEBUG, logger=AUDIT_LOGGER)
    _, answer = wire.request("ListGroups", 4, message("ListGroupsRequest", states_filter=[]))
    assert answer.error_code == ErrorCode.NONE
    assert audit(caplog) == [(logging.DEBUG, "Denied: principal=User:ANONYMOUS operation=Describe host=127.0.0.1 "
                                             "resource=Cluster:LITERAL:kafka-cluster request=ListGroups")]


def test_the_audit_logger_is_a_broker_logger():
    """``kafka-configs --entity-type broker-loggers`` lists it and sets its level at run time,
    as Kafka's Log4jController does (``server/broker_loggers.py``)."""
    from types import SimpleNamespace

    from odradek.server import broker_loggers

    logger = logging.getLogger(AUDIT_LOGGER)
    before = logger.level
    try:
        assert AUDIT_LOGGER in broker_loggers.loggers()
        change = [SimpleNamespace(name=AUDIT_LOGGER, value="DEBUG", config_operation=broker_loggers.SET)]
        broker_loggers.validate(change)
        broker_loggers.apply(change)
        assert broker_loggers.loggers()[AUDIT_LOGGER] == "DEBUG" and logger.isEnabledFor(logging.DEBUG)
    finally:
        logger.setLevel(before)
