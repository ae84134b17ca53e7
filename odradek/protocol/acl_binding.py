"""Kafka's ACL values: resource patterns, access control entries, bindings and their filters
(the broker's authorizer and the admin client share them).

Codes are the wire codes of CreateAcls/DescribeAcls/DeleteAcls (``ResourceType``,
``PatternType``, ``AclOperation``, ``AclPermissionType`` in org.apache.kafka.common); names are
those Kafka writes in ZooKeeper and prints (``SecurityUtils.resourceTypeName``,
``operationName``, ``permissionTypeName``): ``Topic``, ``Read``, ``Allow``.

A binding is a ``ResourcePattern`` (type, name, LITERAL or PREFIXED) and an
``AccessControlEntry`` (principal ``User:alice`` or ``User:*``, host or ``*``, operation,
ALLOW or DENY). A filter has the same fields where ``None`` and the ANY codes match anything;
its pattern type MATCH matches the patterns that would apply to a resource of that name
(literal equal or ``*``, prefixed a prefix of it), as Kafka's ``ResourcePatternFilter``.
"""

from __future__ import annotations

from dataclasses import dataclass

# ResourceType
UNKNOWN, ANY = 0, 1
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER = 2, 3, 4, 5, 6, 7
# PatternType
MATCH, LITERAL, PREFIXED = 2, 3, 4
# AclOperation (codes as in server/acl_operations.py)
ALL = 2
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
CREATE_TOKENS, DESCRIBE_TOKENS = 13, 14
# AclPermissionType
DENY, ALLOW = 2, 3

WILDCARD_RESOURCE = "*"
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"

RESOURCE_TYPE_NAMES = {TOPIC: "Topic", GROUP: "Group", CLUSTER: "Cluster", TRANSACTIONAL_ID: "TransactionalId",
                       DELEGATION_TOKEN: "DelegationToken", USER: "User"}
PATTERN_TYPE_NAMES = {LITERAL: "LITERAL", PREFIXED: "PREFIXED", MATCH: "MATCH", ANY: "ANY"}
OPERATION_NAMES = {ALL: "All", READ: "Read", WRITE: "Write", CREATE: "Create", DELETE: "Delete", ALTER: "Alter",
                   DESCRIBE: "Describe", CLUSTER_ACTION: "ClusterAction", DESCRIBE_CONFIGS: "DescribeConfigs",
                   ALTER_CONFIGS: "AlterConfigs", IDEMPOTENT_WRITE: "IdempotentWrite",
                   CREATE_TOKENS: "CreateTokens", DESCRIBE_TOKENS: "DescribeTokens"}
PERMISSION_NAMES = {ALLOW: "Allow", DENY: "Deny"}

# AclEntry.supportedOperations (groups as Kafka 4: with group configs, server/group_configs.py).
SUPPORTED_OPERATIONS = {
    TOPIC: {READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS},
    GROUP: {READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS},  # Kafka 4: group configs
    CLUSTER: {CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER, DESCRIBE},
    TRANSACTIONAL_ID: {DESCRIBE, WRITE},
    DELEGATION_TOKEN: {DESCRIBE},
    USER: {CREATE_TOKENS, DESCRIBE_TOKENS},
}


def code_of(names: dict[int, str], text: str) -> int:
    """The code of a name, case-insensitively and ignoring ``_`` (``read``, ``CLUSTER_ACTION``,
    ``ClusterAction``); ValueError for an unknown one."""
    wanted = text.replace("_", "").replace("-", "").lower()
    for code, name in names.items():
        if name.replace("_", "").lower() == wanted:
            return code
    raise ValueError(f"unknown value {text!r}; expected one of {', '.join(names.values())}")


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: int
    name: str
    pattern_type: int = LITERAL

    def __str__(self) -> str:
        return (f"ResourcePattern(resourceType={RESOURCE_TYPE_NAMES[self.resource_type].upper()}, "
                f"name={self.name}, patternType={PATTERN_TYPE_NAMES[self.pattern_type]})")


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: int
    permission_type: int

    def to_json(self) -> dict:
        """One entry of a ``/kafka-acl`` znode (``AclEntry.toMap``)."""
        return {"principal": self.principal, "permissionType": PERMISSION_NAMES[self.permission_type],
                "operation": OPERATION_NAMES[self.operation], "host": self.host}

    @classmethod
    def from_json(cls, doc: dict) -> "AccessControlEntry":
        return cls(str(doc["principal"]), str(doc["host"]), code_of(OPERATION_NAMES, doc["operation"]),
                   code_of(PERMISSION_NAMES, doc["permissionType"]))


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """None (or ANY) in a field matches every value of it."""

    resource_type: int = ANY
    name: str | None = None
    pattern_type: int = ANY
    principal: str | None = None
    host: str | None = None
    operation: int = ANY
    permission_type: int = ANY

    def unknown_field(self) -> str | None:
        """The name of a field holding an UNKNOWN or invalid code, Kafka's ``findIndefiniteField``."""
        if self.resource_type not in RESOURCE_TYPE_NAMES and self.resource_type != ANY:
            return "resource type"
        if self.pattern_type not in PATTERN_TYPE_NAMES:
            return "pattern type"
        if self.operation not in OPERATION_NAMES and self.operation != ANY:
            return "operation"
        if self.permission_type not in PERMISSION_NAMES and self.permission_type != ANY:
            return "permission type"
        return None

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        if self.resource_type not in (ANY, pattern.resource_type):
            return False
        if self.pattern_type in (LITERAL, PREFIXED):
            return pattern.pattern_type == self.pattern_type and self.name in (None, pattern.name)
        if self.name is None:
            return True
        if self.pattern_type == ANY:
            return pattern.name == self.name
        # MATCH: the patterns that apply to a resource named ``self.name``.
        if pattern.pattern_type == LITERAL:
            return pattern.name in (self.name, WILDCARD_RESOURCE)
        return self.name.startswith(pattern.name)

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        return (self.principal in (None, entry.principal) and self.host in (None, entry.host)
                and self.operation in (ANY, entry.operation)
                and self.permission_type in (ANY, entry.permission_type))

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)


def invalid_binding(binding: AclBinding) -> str | None:
    """Why Kafka refuses to create ``binding`` (INVALID_REQUEST), or None."""
    p, e = binding.pattern, binding.entry
    if p.resource_type not in RESOURCE_TYPE_NAMES:
        return "Invalid resource type"
    if p.pattern_type not in (LITERAL, PREFIXED):
        return "Invalid pattern type: only LITERAL and PREFIXED patterns can be created"
    if not p.name:
        return "Resource name must not be empty"
    if p.resource_type == CLUSTER and p.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if p.pattern_type == PREFIXED and p.name == WILDCARD_RESOURCE:
        return "A prefixed pattern cannot be the wildcard '*'"
    if e.operation not in OPERATION_NAMES:
        return "Invalid operation"
    if e.operation != ALL and e.operation not in SUPPORTED_OPERATIONS[p.resource_type]:
        names = ", ".join(sorted(OPERATION_NAMES[o].upper() for o in SUPPORTED_OPERATIONS[p.resource_type]))
        return f"ResourceType {RESOURCE_TYPE_NAMES[p.resource_type].upper()} only supports operations {names}"
    if e.permission_type not in PERMISSION_NAMES:
        return "Invalid permission type"
    kind, sep, name = e.principal.partition(":")
    if not sep or not kind:
        return f"Could not parse principal from `{e.principal}` (no colon is present separating the principal type from the principal name)"
    if not e.host:
        return "Host must not be empty"
    return None
