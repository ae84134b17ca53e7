"""AlterConfigs (key 33) and IncrementalAlterConfigs (key 44).

AlterConfigs replaces a resource's whole set of overrides; IncrementalAlterConfigs applies
SET (0), DELETE (1), APPEND (2) and SUBTRACT (3) to single keys (APPEND and SUBTRACT only on
list configs such as ``cleanup.policy``). Topics take topic-level names; brokers (name "" for
the cluster-wide default, or this broker's id) take the dynamic broker keys. Values are
validated before anything is written; ``validate_only`` writes nothing. IncrementalAlterConfigs
also changes this broker's log levels (BROKER_LOGGER, SET and DELETE only; see
``server/broker_loggers.py``), which the legacy AlterConfigs does not know, as in Kafka, and a group's configs (GROUP, Kafka
4's KIP-848/KIP-932 group configs, ``server/group_configs.py``; also IncrementalAlterConfigs
only, as Kafka): ALTER_CONFIGS on the group, refused values INVALID_CONFIG.
"""

from __future__ import annotations

from odradek.protocol.generated.alter_configs_response import AlterConfigsResourceResponse, AlterConfigsResponse
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.protocol.generated.incremental_alter_configs_response import IncrementalAlterConfigsResponse
from odradek.protocol import acl_binding as acl
from odradek.server import broker_loggers, configs, group_configs, message_format_version
from odradek.server.handlers.describe_configs import config_authorization_error
from odradek.server.topics import TopicError

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def handle(ctx, request):
    results = [_denied(ctx, r) or _alter(ctx.broker, r, request.validate_only, incremental=False)
               for r in request.resources]
    return AlterConfigsResponse(throttle_time_ms=0, responses=results)


def handle_incremental(ctx, request):
    results = [_denied(ctx, r) or _alter(ctx.broker, r, request.validate_only, incremental=True)
               for r in request.resources]
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=results)


def _denied(ctx, resource) -> AlterConfigsResourceResponse | None:
    """The answer for a resource the principal may not ALTER_CONFIGS, else None."""
    error = config_authorization_error(ctx, acl.ALTER_CONFIGS, resource.resource_type, resource.resource_name)
    if error is None:
        return None
    return AlterConfigsResourceResponse(error_code=error, error_message="Authorization failed.",
                                        resource_type=resource.resource_type, resource_name=resource.resource_name)


def _alter(broker, resource, validate_only: bool, incremental: bool):
    result = AlterConfigsResourceResponse(resource_type=resource.resource_type,
                                          resource_name=resource.resource_name, error_message=None)
    try:
        if resource.resource_type == TOPIC:
            _alter_topic(broker, resource, validate_only, incremental)
        elif resource.resource_type == BROKER:
            _alter_broker(broker, resource, validate_only, incremental)
        elif resource.resource_type == BROKER_LOGGER and incremental:
            _alter_loggers(broker, resource, validate_only)
        elif resource.resource_type == GROUP and incremental:
            _alter_group(broker, resource, validate_only)
        else:
            raise TopicError(ErrorCode.INVALID_REQUEST, f"Unknown resource type {resource.resource_type}")
    except TopicError as e:
        result.error_code, result.error_message = e.error, e.message
    return result


def _alter_loggers(broker, resource, validate_only: bool) -> None:
    broker_loggers.check_broker_id(resource.resource_name, broker.broker_id)
    _check_names_and_values(resource)
    broker_loggers.validate(resource.configs)
    if not validate_only:
        broker_loggers.apply(resource.configs)


def _check_names_and_values(resource) -> None:
    """Each key once, and a value for every operation but DELETE (Kafka's
    ``ConfigAdminManager.preprocess``)."""
    names = [c.name for c in resource.configs]
    if len(set(names)) != len(names):
        raise TopicError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    missing = [c.name for c in resource.configs if c.value is None and c.config_operation != DELETE]
    if missing:
        raise TopicError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(missing)}")


def _apply(current: dict[str, str], resource, incremental: bool) -> dict[str, str]:
    if not incremental:
        new = {}
        for c in resource.configs:
            if c.value is None:
                raise TopicError(ErrorCode.INVALID_REQUEST, f"Null value not supported for {c.name}")
            new[c.name] = c.value
        return new
    new = dict(current)
    for c in resource.configs:
        op = c.config_operation
        if op == SET:
            if c.value is None:
                raise TopicError(ErrorCode.INVALID_REQUEST, f"Null value not supported for {c.name}")
            new[c.name] = c.value
        elif op == DELETE:
            new.pop(c.name, None)
        elif op in (APPEND, SUBTRACT):
            new[c.name] = _list_op(c.name, new.get(c.name), c.value, op)
        else:
            raise TopicError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {op}")
    return new


def _list_op(name: str, current: str | None, value: str | None, op: int) -> str:
    spec = configs.TOPIC_CONFIGS.get(name)
    if spec is None or spec[1] != configs.LIST:
        raise TopicError(ErrorCode.INVALID_CONFIG, f"Config {name} is not a list; APPEND/SUBTRACT need one")
    base = current if current is not None else spec[2]
    items = [i for i in base.split(",") if i]
    changes = [i.strip() for i in (value or "").split(",") if i.strip()]
    if op == APPEND:
        items += [i for i in changes if i not in items]
    else:
        items = [i for i in items if i not in changes]
    return ",".join(items)


def _alter_topic(broker, resource, validate_only: bool, incremental: bool) -> None:
    name = resource.resource_name
    if broker.metadata_image().topic(name) is None:
        raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist")
    new = _apply(broker.metadata.topic_config(name), resource, incremental)
    broker.topics.log_config_for(new)  # validates
    if not validate_only:
        broker.topics.set_topic_config(name, new)
        message_format_version.warn_ignored(name, new)


def _alter_group(broker, resource, validate_only: bool) -> None:
    """A group's overrides (Kafka's ControllerConfigurationValidator for GROUP): a name is
    required, values are never null, the whole new set validated against the broker's bounds."""
    if not resource.resource_name:
        raise TopicError(ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
    _check_names_and_values(resource)
    new = _apply(group_configs.read_config(broker.metadata.store, resource.resource_name), resource, incremental=True)
    try:
        broker.group_configs.validate(resource.resource_name, new)
    except group_configs.GroupConfigError as e:
        raise TopicError(ErrorCode.INVALID_CONFIG, str(e)) from None
    if not validate_only:
        broker.group_configs.set(resource.resource_name, new)


def _alter_broker(broker, resource, validate_only: bool, incremental: bool) -> None:
    """The cluster-wide default (name "") or this broker's own dynamic configs; which names may
    change where is ``server/dynamic_broker_config.py``'s business."""
    target = None if resource.resource_name == "" else _this_broker(broker, resource.resource_name)
    new = _apply(broker.metadata.broker_config(target), resource, incremental)
    broker.validate_dynamic_broker_config(target, new)
    if not validate_only:
        broker.set_dynamic_broker_config(target, new)


def _this_broker(broker, name: str) -> int:
    """This broker's id named by a resource, or INVALID_REQUEST as Kafka's ConfigAdminManager."""
    try:
        requested = int(name)
    except ValueError:
        raise TopicError(ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}") from None
    if requested != broker.broker_id:
        raise TopicError(ErrorCode.INVALID_REQUEST,
                         f"Unexpected broker id, expected {broker.broker_id}, but received {name}")
    return requested
