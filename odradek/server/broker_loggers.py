"""Log levels changed at run time: the BROKER_LOGGER config resource (type 8) of
DescribeConfigs and IncrementalAlterConfigs, as ``kafka-configs --entity-type broker-loggers``
uses it (Kafka's ``Log4jController`` and ``RuntimeLoggerManager``).

The loggers are Python ``logging`` loggers: ``root``, every logger that exists under
``odradek`` (``odradek.broker``, ``odradek.topics``, ...), and the loggers odradek writes to
under Kafka's own names (``kafka.authorizer.logger``, ``server/authorizer_log.py``). Each is
described by its effective level under Kafka's level names; SET gives a logger its own level,
DELETE removes it, so the logger inherits its parent's (up to root's) again. Nothing is
persisted: a restart brings back the levels the logging configuration gives.

Kafka's names map to Python's levels as below (TRACE sits under DEBUG; Python has no such
level of its own). SET accepts exactly the names Kafka's ``LogLevelConfig.VALID_LOG_LEVELS``
lists, in upper case; a level above FATAL (CRITICAL) is described as OFF.
"""

from __future__ import annotations

import logging

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server.authorizer_log import AUDIT_LOGGER
from odradek.server.topics import TopicError

log = logging.getLogger("odradek.broker_loggers")

ROOT = "root"
PACKAGE = "odradek"
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

TRACE = 5
LEVELS = {"TRACE": TRACE, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
          "ERROR": logging.ERROR, "FATAL": logging.CRITICAL}
_VALID = ", ".join(sorted(LEVELS))
_OPERATION_NAMES = {APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

logging.getLogger(PACKAGE)  # the package's own logger always exists, as a level for all below it
KAFKA_LOGGERS = frozenset({AUDIT_LOGGER})


def _served(name: str) -> bool:
    return name == PACKAGE or name.startswith(PACKAGE + ".") or name in KAFKA_LOGGERS


def level_name(level: int) -> str:
    """Kafka's name for a Python level: the most verbose Kafka level that lets it through."""
    for name, value in sorted(LEVELS.items(), key=lambda item: item[1]):
        if level <= value:
            return name
    return "OFF"


def loggers() -> dict[str, str]:
    """Every logger with its effective level, ``root`` included."""
    out = {ROOT: level_name(logging.getLogger().level)}
    for name, logger in sorted(logging.Logger.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger) and _served(name):
            out[name] = level_name(logger.getEffectiveLevel())
    return out


def _existing(name: str | None) -> logging.Logger | None:
    if name == ROOT:
        return logging.getLogger()
    logger = logging.Logger.manager.loggerDict.get(name or "")
    if isinstance(logger, logging.Logger) and _served(name):
        return logger
    return None


def check_broker_id(resource_name: str, broker_id: int) -> None:
    """The resource names this broker, or INVALID_REQUEST as Kafka answers."""
    try:
        requested = int(resource_name)
    except ValueError:
        raise TopicError(ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {resource_name}") from None
    if requested != broker_id:
        raise TopicError(ErrorCode.INVALID_REQUEST,
                         f"Unexpected node id. Expected {broker_id}, but received {requested}")


def validate(ops) -> None:
    """Check every operation before any is applied (``ops``: ``AlterableConfig``-like objects
    with ``name``, ``value``, ``config_operation``)."""
    for op in ops:
        kind = op.config_operation
        if kind in (SET, DELETE):
            if _existing(op.name) is None:
                raise TopicError(ErrorCode.INVALID_CONFIG, f"Logger {op.name} does not exist!")
        if kind == SET:
            if op.value not in LEVELS:
                raise TopicError(ErrorCode.INVALID_CONFIG,
                                 f"Cannot set the log level of {op.name} to {op.value} as it is not a supported "
                                 f"log level. Valid log levels are {_VALID}")
        elif kind == DELETE:
            if op.name == ROOT:
                raise TopicError(ErrorCode.INVALID_REQUEST,
                                 f"Removing the log level of the {ROOT} logger is not allowed")
        elif kind in _OPERATION_NAMES:
            raise TopicError(ErrorCode.INVALID_REQUEST,
                             f"{_OPERATION_NAMES[kind]} operation is not allowed for the BROKER_LOGGER resource")
        else:
            raise TopicError(ErrorCode.INVALID_REQUEST,
                             f"Unknown operation type {kind} is not allowed for the BROKER_LOGGER resource")


def apply(ops) -> None:
    """Apply operations that ``validate`` accepted."""
    for op in ops:
        logger = _existing(op.name)
        if op.config_operation == SET:
            logger.setLevel(LEVELS[op.value])
            log.warning("Updated the log level of %s to %s", op.name, op.value)
        else:
            logger.setLevel(logging.NOTSET)
            log.warning("Unset the log level of %s", op.name)
