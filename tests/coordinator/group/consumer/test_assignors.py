"""The assignor registry and group.consumer.assignors (odradek/coordinator/group/consumer/assignors.py)."""

from __future__ import annotations

import pytest

from odradek.coordinator.group.consumer.assignors import (
    ASSIGNORS,
    DEFAULT_ASSIGNOR,
    UnsupportedAssignorError,
    consumer_group_assignors,
)
from odradek.coordinator.group.consumer.range_assignor import RangeAssignor
from odradek.coordinator.group.consumer.uniform_assignor import UniformAssignor
from odradek.protocol.generated.error_codes import ErrorCode


def test_registry_and_default():
    assert DEFAULT_ASSIGNOR == "uniform"
    assert isinstance(ASSIGNORS["uniform"], UniformAssignor)
    assert isinstance(ASSIGNORS["range"], RangeAssignor)
    assert all(assignor.name == name for name, assignor in ASSIGNORS.items())


def test_default_config_is_uniform_then_range():
    assignors = consumer_group_assignors()
    assert assignors.names == ("uniform", "range")
    assert assignors.default is ASSIGNORS["uniform"]


@pytest.mark.parametrize(
    "configured",
    ["range, uniform", ["range", "uniform"],
     "org.apache.kafka.coordinator.group.assignor.RangeAssignor,"
     "org.apache.kafka.coordinator.group.assignor.UniformAssignor"],
)
def test_first_configured_is_the_default(configured):
    assignors = consumer_group_assignors(configured)
    assert assignors.names == ("range", "uniform")
    assert assignors.default.name == "range"


@pytest.mark.parametrize("configured", ["", [], "uniform,sticky", "range,range"])
def test_bad_config_is_refused(configured):
    with pytest.raises(ValueError):
        consumer_group_assignors(configured)


def test_requested_server_assignor():
    assignors = consumer_group_assignors("uniform")
    assert assignors.resolve(None).name == "uniform"
    assert assignors.resolve("uniform").name == "uniform"
    assert assignors.is_supported("uniform") and not assignors.is_supported("range")
    assignors.validate_server_assignor(None)
    with pytest.raises(UnsupportedAssignorError) as raised:
        assignors.validate_server_assignor("range")
    assert raised.value.error_code == ErrorCode.UNSUPPORTED_ASSIGNOR == 112
    assert "ServerAssignor range is not supported. Supported assignors: uniform." in str(raised.value)
    with pytest.raises(UnsupportedAssignorError):
        assignors.resolve("range")


def test_preferred_assignor_is_the_most_requested():
    assignors = consumer_group_assignors()
    assert assignors.preferred({}).name == "uniform"
    assert assignors.preferred({"range": 2, "uniform": 1}).name == "range"
    assert assignors.preferred({"range": 1, "uniform": 1}).name == "uniform"  # tie: configured first
    assert assignors.preferred({"sticky": 5, "range": 1}).name == "range"
