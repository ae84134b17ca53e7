"""A group's description whichever its type, for the console's group pages (groups_view.py).

Since KIP-848 a group is ``classic`` (JoinGroup/SyncGroup members, described by
DescribeGroups) or ``consumer`` (ConsumerGroupHeartbeat members, described by
ConsumerGroupDescribe, API 69). Each API answers GROUP_ID_NOT_FOUND for a group of the
other type, as Kafka 4's ``GroupCoordinatorService`` does, so the console asks as Kafka's
``Admin.describeConsumerGroups`` does: ConsumerGroupDescribe first, DescribeGroups for the
groups it does not know (client/admin_consumer_groups.py answers None for those, and for a
broker without the API).

A group may change type between the two questions (KIP-848's online upgrade converts a classic
group on a member's first ConsumerGroupHeartbeat; the last consumer member leaving for a
classic one converts it back). A DescribeGroups answered GROUP_ID_NOT_FOUND after a
ConsumerGroupDescribe answered None therefore asks ConsumerGroupDescribe once more: the page
then shows the group as it is now instead of "not found".

A KIP-932 share group (``share``, ShareGroupHeartbeat members) is known to neither API
(both answer GROUP_ID_NOT_FOUND) and is described by ShareGroupDescribe (API 77, the admin
client's ``describe_share_groups``, client/admin_share_groups.py): ``describe_any`` asks it
for a group the other two do not know, ``describe_listed`` straight away for a group listed
as ``share``. A broker without ShareGroupDescribe, like one answering GROUP_ID_NOT_FOUND,
knows no share group (``describe_share_group`` answers None).

Results are ``ConsumerGroupDescription`` (client/admin_consumer_groups.py: ``type``
"consumer", group and target assignment epochs, members with their epoch and target),
``GroupDescription`` (client/admin_types.py: a classic group, state "Dead" when there is
none) or ``ShareGroupDescription`` (client/admin_share_groups.py: ``type`` "share", the
assignor's name in ``assignor``; ``protocol_type`` and ``protocol`` read every kind alike).
"""

from __future__ import annotations

import asyncio

from odradek.client.errors import BrokerError, UnsupportedVersionError
from odradek.protocol.generated.error_codes import ErrorCode

CLASSIC = "classic"
CONSUMER = "consumer"
SHARE = "share"  # Kafka's GroupType names, as ListGroups v5 reports them


def group_type(description, listed_type: str = "") -> str:
    """Kafka's GroupType name: what ListGroups (v5+) said, else what the description is."""
    if listed_type:
        return listed_type.lower()
    return getattr(description, "type", CLASSIC)


def protocol_type(description) -> str:
    """The group's protocol type: "share" for a share group (KIP-932 has no other), else
    what the description says ("consumer", or a classic group's own)."""
    return SHARE if group_type(description) == SHARE else description.protocol_type


def protocol(description) -> str:
    """The group's protocol: a share group's assignor (Kafka's
    ``ShareGroupDescription.partitionAssignor``), else the description's protocol."""
    return description.assignor if group_type(description) == SHARE else description.protocol


async def describe_share_group(admin, group_id: str):
    """The share group's ``ShareGroupDescription``; None when there is no share group
    ``group_id`` (GROUP_ID_NOT_FOUND: none, or a group of another type) or the broker has no
    ShareGroupDescribe. Raises BrokerError for other refusals (e.g.
    GROUP_AUTHORIZATION_FAILED)."""
    try:
        return (await admin.describe_share_groups([group_id]))[group_id]
    except UnsupportedVersionError:
        return None
    except BrokerError as e:
        if e.code != ErrorCode.GROUP_ID_NOT_FOUND:
            raise
        return None


async def describe_group(admin, group_id: str):
    """The group's description, asked ConsumerGroupDescribe first (see the module's
    docstring). Raises what the broker refused (GROUP_AUTHORIZATION_FAILED, or
    GROUP_ID_NOT_FOUND for a group of neither type, e.g. a KIP-932 share group)."""
    modern = (await admin.describe_consumer_groups([group_id]))[group_id]
    if modern is not None:
        return modern
    try:
        return (await admin.describe_groups([group_id]))[group_id]
    except BrokerError as e:
        if e.code != ErrorCode.GROUP_ID_NOT_FOUND:
            raise
        converted = (await admin.describe_consumer_groups([group_id]))[group_id]  # upgraded meanwhile
        if converted is None:
            raise
        return converted


async def describe_any(admin, group_id: str):
    """``describe_group``, then ShareGroupDescribe for a group it does not know; raises
    GROUP_ID_NOT_FOUND when ShareGroupDescribe does not know it either."""
    try:
        return await describe_group(admin, group_id)
    except BrokerError as e:
        if e.code != ErrorCode.GROUP_ID_NOT_FOUND:
            raise
        shared = await describe_share_group(admin, group_id)
        if shared is None:
            raise
        return shared


async def _describe_share(admin, group_id: str):
    found = await describe_share_group(admin, group_id)
    if found is None:
        raise BrokerError(ErrorCode.GROUP_ID_NOT_FOUND, subject=f"share group {group_id!r}")
    return found


async def describe_listed(admin, listed) -> dict:
    """``{group_id: description | BrokerError}`` for ListGroups' ``GroupListing``s. A group
    listed as ``classic`` goes straight to DescribeGroups (no ConsumerGroupDescribe asked
    for nothing); one listed as ``share`` to ShareGroupDescribe; the others (``consumer``, or
    no type from a broker before ListGroups v5) through ``describe_group``. One group's refusal is its own entry, not the list's failure:
    the list shows that group from its listing alone."""
    async def one(g):
        try:
            if g.type.lower() == SHARE:
                return await _describe_share(admin, g.group_id)
            if g.type.lower() == CLASSIC:
                try:
                    return (await admin.describe_groups([g.group_id]))[g.group_id]
                except BrokerError as e:
                    if e.code != ErrorCode.GROUP_ID_NOT_FOUND:
                        raise
            return await describe_group(admin, g.group_id)  # not (or no longer) classic
        except BrokerError as e:
            return e

    found = await asyncio.gather(*(one(g) for g in listed))
    return {g.group_id: d for g, d in zip(listed, found)}
