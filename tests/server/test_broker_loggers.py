"""Log levels changed at run time through the BROKER_LOGGER resource, as ``kafka-configs
--entity-type broker-loggers`` does, seen through kafka-python's admin client."""

from __future__ import annotations

import logging

import pytest
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient

from odradek.protocol.generated.alter_configs_request import AlterConfigsResource
from odradek.protocol.generated.describe_configs_request import DescribeConfigsResource
from tests.server.wire import WireClient, message

BROKER_ID = "1"
LOGGER = "odradek.topics"


@pytest.fixture
def admin(shared_broker):
    client = KafkaAdminClient(bootstrap_servers=shared_broker.bootstrap)
    levels = {name: logging.getLogger(name).level for name in ("", "odradek", LOGGER)}
    yield client
    client.close()
    for name, level in levels.items():  # the broker runs in this process: leave logging as found
        logging.getLogger(name).setLevel(level)


def loggers(admin) -> dict[str, str]:
    found = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER_LOGGER, BROKER_ID)], config_filter="all")
    return {name: entry["value"] for name, entry in found["broker_logger"][BROKER_ID].items()}


def alter(admin, configs: dict) -> str:
    result = admin.alter_configs([ConfigResource(ConfigResourceType.BROKER_LOGGER, BROKER_ID, configs)],
                                 incremental=True, raise_on_unknown=False)
    return result["broker_logger"][BROKER_ID]


def test_set_and_delete_change_a_loggers_level_at_run_time(admin):
    logging.getLogger().setLevel(logging.WARNING)
    logging.getLogger("odradek").setLevel(logging.NOTSET)
    before = loggers(admin)
    assert before["root"] == "WARN"
    assert before["odradek.broker"] == "WARN"  # inherited from root
    assert before[LOGGER] == "WARN"

    assert alter(admin, {LOGGER: "TRACE", "odradek": "ERROR"}) == "OK"
    after = loggers(admin)
    assert (after[LOGGER], after["odradek"], after["odradek.broker"], after["root"]) == (
        "TRACE", "ERROR", "ERROR", "WARN")
    assert logging.getLogger(LOGGER).isEnabledFor(5) and not logging.getLogger("odradek.broker").isEnabledFor(
        logging.WARNING)

    assert alter(admin, {LOGGER: (AlterConfigOp.DELETE, None), "odradek": (AlterConfigOp.DELETE, None)}) == "OK"
    reset = loggers(admin)
    assert (reset[LOGGER], reset["odradek"]) == ("WARN", "WARN")  # back to the root's level
    assert logging.getLogger(LOGGER).level == logging.NOTSET


@pytest.mark.parametrize(("configs", "error"), [
    ({"odradek.no.such.logger": "DEBUG"}, "[Error 40] InvalidConfigurationError: "
                                          "Logger odradek.no.such.logger does not exist!"),
    ({LOGGER: "LOUD"}, f"[Error 40] InvalidConfigurationError: Cannot set the log level "
                       f"of {LOGGER} to LOUD as it is not a supported log level. "
                       f"Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN"),
    ({"root": (AlterConfigOp.DELETE, None)}, "[Error 42] InvalidRequestError: "
                                              "Removing the log level of the root logger is not allowed"),
    ({LOGGER: (AlterConfigOp.SET, None)}, f"[Error 42] InvalidRequestError: Null value not supported for : {LOGGER}"),
    ({LOGGER: (AlterConfigOp.APPEND, "DEBUG")}, "[Error 42] InvalidRequestError: "
                                                 "APPEND operation is not allowed for the BROKER_LOGGER resource"),
])
def test_bad_changes_are_refused_as_kafka_refuses_them(admin, configs, error):
    logging.getLogger(LOGGER).setLevel(logging.INFO)
    assert alter(admin, {LOGGER: "DEBUG", **configs} if LOGGER not in configs else configs) == error
    assert logging.getLogger(LOGGER).level == logging.INFO  # nothing applied, not even the valid change


def test_other_broker_ids_and_the_legacy_alter_configs_are_refused(shared_broker):
    wire = WireClient(shared_broker.bootstrap)
    try:
        _, described = wire.request("DescribeConfigs", 4, message("DescribeConfigsRequest", resources=[
            DescribeConfigsResource(resource_type=8, resource_name="2", configuration_keys=None)]))
        assert (described.results[0].error_code, described.results[0].error_message) == (
            42, "Unexpected broker id, expected 1 but received 2")
        _, legacy = wire.request("AlterConfigs", 2, message("AlterConfigsRequest", resources=[
            AlterConfigsResource(resource_type=8, resource_name=BROKER_ID, configs=[])]))
        assert (legacy.responses[0].error_code, legacy.responses[0].error_message) == (42, "Unknown resource type 8")
    finally:
        wire.close()
