"""DescribeConfigs (key 32): the configs of topics and brokers, with sources and synonyms, and
the log levels of this broker's loggers (BROKER_LOGGER, see ``server/broker_loggers.py``), and
the configs of a group (GROUP, Kafka 4's ``ConfigHelper``: every key with its effective value,
source GROUP_CONFIG when the group sets it, else DEFAULT_CONFIG; ``server/group_configs.py``)."""

from __future__ import annotations

from odradek.protocol.generated.describe_configs_response import (
    DescribeConfigsResourceResult, DescribeConfigsResponse, DescribeConfigsResult, DescribeConfigsSynonym,
)
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol import acl_binding as acl
from odradek.server import authorize, broker_loggers, configs, group_configs
from odradek.server.topics import TopicError

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
GROUP_CONFIG = 8  # DescribeConfigsResponse.ConfigSource (Kafka 4)


def topic_config_entries(broker, overrides: dict[str, str]) -> list[configs.Entry]:
    return configs.topic_entries(broker.config.props, broker.dynamic_broker_config(), overrides)


def config_authorization_error(ctx, operation: int, resource_type: int, name: str):
    """Kafka's check for a config resource: ``operation`` (DESCRIBE_CONFIGS, ALTER_CONFIGS) on
    the topic, on the group, or on the cluster for a broker or its loggers; the error, or None
    if allowed."""
    if resource_type == TOPIC:
        return None if authorize.allowed(ctx, operation, acl.TOPIC, name) else ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if resource_type == GROUP:
        return None if authorize.allowed(ctx, operation, acl.GROUP, name) else ErrorCode.GROUP_AUTHORIZATION_FAILED
    if resource_type in (BROKER, BROKER_LOGGER):
        return None if authorize.allowed_cluster(ctx, operation) else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return None


def handle(ctx, request):
    results = [_describe(ctx, r, request.include_synonyms) for r in request.resources]
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


def _describe(ctx, resource, include_synonyms: bool) -> DescribeConfigsResult:
    broker = ctx.broker
    result = DescribeConfigsResult(resource_type=resource.resource_type, resource_name=resource.resource_name,
                                   error_message=None)
    denied = config_authorization_error(ctx, acl.DESCRIBE_CONFIGS, resource.resource_type, resource.resource_name)
    if denied is not None:
        result.error_code, result.error_message = denied, "Authorization failed."
        return result
    if resource.resource_type == TOPIC:
        if broker.metadata_image().topic(resource.resource_name) is None:
            result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            result.error_message = f"Topic {resource.resource_name} does not exist"
            return result
        entries = topic_config_entries(broker, broker.metadata.topic_config(resource.resource_name))
    elif resource.resource_type == BROKER and resource.resource_name == "":
        # The cluster-wide default: only what is set there (Kafka's currentDynamicDefaultConfigs).
        entries = configs.broker_entries({}, {}, broker.metadata.broker_config(None), defaults=False)
    elif resource.resource_type == BROKER:
        if resource.resource_name != str(broker.broker_id):
            result.error_code = ErrorCode.INVALID_REQUEST
            result.error_message = (f"Unexpected broker id, expected {broker.broker_id} or empty string, "
                                    f"but received {resource.resource_name}")
            return result
        entries = configs.broker_entries(broker.config.props, broker.metadata.broker_config(broker.broker_id),
                                         broker.metadata.broker_config(None))
    elif resource.resource_type == GROUP:
        if not resource.resource_name:
            result.error_code, result.error_message = ErrorCode.INVALID_REQUEST, "Group name must not be empty"
            return result
        entries = group_config_entries(broker, resource.resource_name)
    elif resource.resource_type == BROKER_LOGGER:
        try:
            entries = _logger_entries(broker, resource.resource_name)
        except TopicError as e:
            result.error_code, result.error_message = e.error, e.message
            return result
    else:
        result.error_code = ErrorCode.INVALID_REQUEST
        result.error_message = f"Unsupported resource type {resource.resource_type}"
        return result
    wanted = resource.configuration_keys
    result.configs = [_entry(e, ctx.api_version, include_synonyms) for e in entries if not wanted or e.name in wanted]
    return result


def group_config_entries(broker, group_id: str) -> list[configs.Entry]:
    """Every group config of ``group_id`` (read from the store, as topics' are): its override
    (GROUP_CONFIG) or the broker's default (DEFAULT_CONFIG), one synonym of that source."""
    overrides = group_configs.read_config(broker.metadata.store, group_id)
    values = group_configs.effective(overrides, broker.effective_config())
    out = []
    for name in group_configs.NAMES:
        value = str(values[name])
        source = GROUP_CONFIG if name in overrides else configs.DEFAULT_CONFIG
        type_ = configs.INT if name in group_configs.INT_KEYS else configs.STRING
        out.append(configs.Entry(name, value, source, config_type=type_, synonyms=[(name, value, source)]))
    return out


def _logger_entries(broker, resource_name: str) -> list[configs.Entry]:
    """Each logger and its level, as Kafka's ``ConfigHelper`` describes BROKER_LOGGER: source
    DYNAMIC_BROKER_LOGGER_CONFIG, not read-only, no synonyms, type unknown."""
    if not resource_name:
        raise TopicError(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
    try:
        requested = int(resource_name)
    except ValueError:
        raise TopicError(ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {resource_name}") from None
    if requested != broker.broker_id:
        raise TopicError(ErrorCode.INVALID_REQUEST,
                         f"Unexpected broker id, expected {broker.broker_id} but received {resource_name}")
    return [configs.Entry(name, level, configs.DYNAMIC_BROKER_LOGGER_CONFIG, config_type=configs.UNKNOWN_TYPE)
            for name, level in broker_loggers.loggers().items()]


def _entry(e: configs.Entry, version: int, include_synonyms: bool) -> DescribeConfigsResourceResult:
    out = DescribeConfigsResourceResult(
        name=e.name, value=e.value, read_only=e.read_only, is_default=e.is_default,
        config_source=e.config_source if version >= 1 else -1, is_sensitive=e.is_sensitive,
        config_type=e.config_type, documentation=None,
    )
    if include_synonyms and version >= 1:
        out.synonyms = [DescribeConfigsSynonym(name=n, value=v, source=s) for n, v, s in e.synonyms]
    return out
