"""Kafka's ``AclOperation`` codes and the operations each resource type supports, as the
bitfields that DescribeGroups, Metadata and DescribeCluster answer as authorized operations.

Bit ``n`` of a bitfield stands for the operation with code ``n`` (Kafka's
``Utils.to32BitField``): READ is 3, so a set holding only READ is ``1 << 3 = 8``. odradek has
no authorizer, so every operation a resource supports is authorized (Kafka's
``AclEntry.supportedOperations``). A response that was not asked for them carries
``NOT_REQUESTED`` (Integer.MIN_VALUE), the schema default.
"""

from __future__ import annotations

# AclOperation codes (org.apache.kafka.common.acl.AclOperation).
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12

NOT_REQUESTED = -(2**31)


def bitfield(*operations: int) -> int:
    """The 32-bit field with one bit set per operation code."""
    out = 0
    for op in operations:
        out |= 1 << op
    return out


TOPIC_OPERATIONS = bitfield(READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS)
CLUSTER_OPERATIONS = bitfield(CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER,
                              DESCRIBE)
# Kafka 3.x groups (before group configs, KIP-848): READ, DESCRIBE, DELETE.
GROUP_OPERATIONS = bitfield(READ, DESCRIBE, DELETE)


def authorized(wanted: bool, operations: int) -> int:
    """What a response carries: the resource's operations when the request asked for them."""
    return operations if wanted else NOT_REQUESTED
