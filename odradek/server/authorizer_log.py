"""The authorizer's audit log: one line per decision of ``AclAuthorizer.authorize``, written to
the logger Kafka writes them to, ``kafka.authorizer.logger``, so a logging configuration that
routes or silences Kafka's audit lines (``log4j.logger.kafka.authorizer.logger``) finds the same
name here. Nothing is dropped or throttled in odradek: the logger's level and handlers decide.

The level says how much the decision matters (Kafka's ``AclAuthorizer.logAuditMessage`` and the
``logIfAllowed`` / ``logIfDenied`` flags of ``org.apache.kafka.server.authorizer.Action``):

    allowed, and the request goes on to act on it          DEBUG
    allowed, only asked (authorized operations, KIP-430)  TRACE (5, under DEBUG)
    denied, the request asked for this resource            INFO
    denied, only a filter or a probe (Metadata listing     DEBUG
      every topic, ListGroups, CREATE on the cluster
      before CREATE on each topic, ...)

A line names the outcome, then the principal, the operation (Kafka's ``AclOperation`` name),
the client's host, the resource as type:pattern:name (always LITERAL: a request names one
resource) and the request's API (Kafka's ``ApiKeys`` name)::

    Denied: principal=User:alice operation=Read host=127.0.0.1 resource=Topic:LITERAL:payroll request=Fetch
"""

from __future__ import annotations

import logging

from odradek.protocol.acl_binding import OPERATION_NAMES, RESOURCE_TYPE_NAMES
from odradek.protocol.generated import ApiKey

AUDIT_LOGGER = "kafka.authorizer.logger"
TRACE = 5  # Kafka's TRACE, under Python's DEBUG (as server/broker_loggers.py names it)

audit_log = logging.getLogger(AUDIT_LOGGER)


def request_name(api_key: int | None) -> str:
    """Kafka's name of an API (``ApiKeys.name``): ``LEADER_AND_ISR`` is ``LeaderAndIsr``; ``?``
    for a decision asked outside any request."""
    if api_key is None:
        return "?"
    try:
        return "".join(word.capitalize() for word in ApiKey(api_key).name.split("_"))
    except ValueError:
        return str(api_key)


def level_of(allowed: bool, log_if_allowed: bool, log_if_denied: bool) -> int:
    """The level of a decision (the table of the module docstring)."""
    if allowed:
        return logging.DEBUG if log_if_allowed else TRACE
    return logging.INFO if log_if_denied else logging.DEBUG


def log_decision(allowed: bool, principal, host: str, operation: int, resource_type: int, name: str,
                 api_key: int | None, log_if_allowed: bool = True, log_if_denied: bool = True) -> None:
    """Write one decision, if the logger takes its level (the line is only built then: the
    produce path asks for every topic of every request)."""
    level = level_of(allowed, log_if_allowed, log_if_denied)
    if not audit_log.isEnabledFor(level):
        return
    audit_log.log(level, "%s: principal=%s operation=%s host=%s resource=%s:LITERAL:%s request=%s",
                  "Allowed" if allowed else "Denied", principal, OPERATION_NAMES.get(operation, operation), host,
                  RESOURCE_TYPE_NAMES.get(resource_type, resource_type), name, request_name(api_key))
