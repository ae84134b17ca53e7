"""The records of a KIP-848 consumer group in ``__consumer_offsets`` (Kafka's
``GroupCoordinatorRecordHelpers.newConsumerGroup*Record``), with Kafka's key versions, so
Kafka's tools read them::

    key 3  ConsumerGroupMetadata          group             value: epoch (the group epoch)
    key 4  ConsumerGroupPartitionMetadata group             value: the subscribed topics' id,
                                                            name, partition count (racks)
    key 5  ConsumerGroupMemberMetadata    group, member     value: instance id, rack, client
                                                            id/host, subscription, rebalance
                                                            timeout, server assignor
    key 6  ConsumerGroupTargetAssignmentMetadata  group     value: assignment epoch
    key 7  ConsumerGroupTargetAssignmentMember    group, member  value: topic id -> partitions
    key 8  ConsumerGroupCurrentMemberAssignment   group, member  value: member epoch, previous
                                                            member epoch, state, assigned and
                                                            pending-revocation partitions
    key 16 ConsumerGroupRegularExpression group, regex      value: the topics the regex
                                                            matched, the metadata version and
                                                            the time (ms) of the resolution

Each key and value is ``int16 version`` and the struct (``coordinator.versioned_message``);
every value is version 0. A null value is a tombstone: the member's (or group's) record is
gone. Kafka 4.0 still writes ConsumerGroupPartitionMetadata (4.1 replaced it with a metadata
hash in ConsumerGroupMetadata); the schemas odradek generates are 4.0's.

The record objects hold odradek's values (``ConsumerGroupMember``, ``TopicMetadata``,
``TopicPartitions``), None for a tombstone.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.coordinator import versioned_message
from odradek.coordinator.group.consumer.assignment import TopicMetadata, TopicPartitions
from odradek.coordinator.group.consumer.consumer_group_member import (
    ClassicMemberMetadata,
    ConsumerGroupMember,
    MemberState,
)
from odradek.protocol.generated import (
    consumer_group_current_member_assignment_key as cur_key,
    consumer_group_current_member_assignment_value as cur_value,
    consumer_group_member_metadata_key as member_key,
    consumer_group_member_metadata_value as member_value,
    consumer_group_metadata_key as epoch_key,
    consumer_group_metadata_value as epoch_value,
    consumer_group_partition_metadata_key as meta_key,
    consumer_group_partition_metadata_value as meta_value,
    consumer_group_regular_expression_key as regex_key,
    consumer_group_regular_expression_value as regex_value,
    consumer_group_target_assignment_member_key as target_key,
    consumer_group_target_assignment_member_value as target_value,
    consumer_group_target_assignment_metadata_key as target_epoch_key,
    consumer_group_target_assignment_metadata_value as target_epoch_value,
)

REGULAR_EXPRESSION_KEY_VERSION = 16
KEY_VERSIONS = frozenset((*range(3, 9), REGULAR_EXPRESSION_KEY_VERSION))


def _enc(module, message) -> bytes:
    return versioned_message.encode(module, module.VALID_VERSIONS[0], message)


def _partitions_out(cls, partitions: TopicPartitions) -> list:
    return [cls(topic_id=t, partitions=sorted(ps)) for t, ps in sorted(partitions.items()) if ps]


def _partitions_in(items) -> dict:
    return {i.topic_id: frozenset(i.partitions) for i in items if i.partitions}


@dataclass(frozen=True, slots=True)
class GroupEpochRecord:
    group_id: str
    epoch: int | None

    def key_bytes(self) -> bytes:
        return _enc(epoch_key, epoch_key.ConsumerGroupMetadataKey(group_id=self.group_id))

    def value_bytes(self) -> bytes | None:
        if self.epoch is None:
            return None
        return _enc(epoch_value, epoch_value.ConsumerGroupMetadataValue(epoch=self.epoch))


@dataclass(frozen=True, slots=True)
class SubscriptionMetadataRecord:
    group_id: str
    topics: dict[str, TopicMetadata] | None  # topic name -> metadata

    def key_bytes(self) -> bytes:
        return _enc(meta_key, meta_key.ConsumerGroupPartitionMetadataKey(group_id=self.group_id))

    def value_bytes(self) -> bytes | None:
        if self.topics is None:
            return None
        topics = [meta_value.TopicMetadata(
            topic_id=t.topic_id, topic_name=t.name, num_partitions=t.num_partitions,
            partition_metadata=[meta_value.PartitionMetadata(partition=p, racks=sorted(r))
                                for p, r in sorted(t.partition_racks.items())])
            for _, t in sorted(self.topics.items())]
        return _enc(meta_value, meta_value.ConsumerGroupPartitionMetadataValue(topics=topics))


@dataclass(frozen=True, slots=True)
class MemberSubscriptionRecord:
    group_id: str
    member_id: str
    member: ConsumerGroupMember | None  # its subscription fields

    def key_bytes(self) -> bytes:
        return _enc(member_key, member_key.ConsumerGroupMemberMetadataKey(group_id=self.group_id,
                                                                           member_id=self.member_id))

    def value_bytes(self) -> bytes | None:
        m = self.member
        if m is None:
            return None
        return _enc(member_value, member_value.ConsumerGroupMemberMetadataValue(
            instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=list(m.subscribed_topic_names), subscribed_topic_regex=m.subscribed_topic_regex,
            rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor,
            classic_member_metadata=None if m.classic is None else member_value.ClassicMemberMetadata(
                session_timeout_ms=m.classic.session_timeout_ms,
                supported_protocols=[member_value.ClassicProtocol(name=n, metadata=b)
                                     for n, b in m.classic.supported_protocols])))


@dataclass(frozen=True, slots=True)
class TargetAssignmentEpochRecord:
    group_id: str
    epoch: int | None

    def key_bytes(self) -> bytes:
        return _enc(target_epoch_key, target_epoch_key.ConsumerGroupTargetAssignmentMetadataKey(group_id=self.group_id))

    def value_bytes(self) -> bytes | None:
        if self.epoch is None:
            return None
        return _enc(target_epoch_value,
                    target_epoch_value.ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=self.epoch))


@dataclass(frozen=True, slots=True)
class TargetAssignmentMemberRecord:
    group_id: str
    member_id: str
    partitions: TopicPartitions | None

    def key_bytes(self) -> bytes:
        return _enc(target_key, target_key.ConsumerGroupTargetAssignmentMemberKey(group_id=self.group_id,
                                                                                   member_id=self.member_id))

    def value_bytes(self) -> bytes | None:
        if self.partitions is None:
            return None
        return _enc(target_value, target_value.ConsumerGroupTargetAssignmentMemberValue(
            topic_partitions=_partitions_out(target_value.TopicPartition, self.partitions)))


@dataclass(frozen=True, slots=True)
class CurrentAssignmentRecord:
    group_id: str
    member_id: str
    member: ConsumerGroupMember | None  # its epochs, state and partitions

    def key_bytes(self) -> bytes:
        return _enc(cur_key, cur_key.ConsumerGroupCurrentMemberAssignmentKey(group_id=self.group_id,
                                                                              member_id=self.member_id))

    def value_bytes(self) -> bytes | None:
        m = self.member
        if m is None:
            return None
        return _enc(cur_value, cur_value.ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch, state=int(m.state),
            assigned_partitions=_partitions_out(cur_value.TopicPartitions, m.assigned_partitions),
            partitions_pending_revocation=_partitions_out(cur_value.TopicPartitions,
                                                          m.partitions_pending_revocation)))


@dataclass(frozen=True, slots=True)
class ResolvedRegularExpression:
    """Kafka's ``ResolvedRegularExpression``: the topics a regex matched (only those the
    resolving principal may DESCRIBE), the metadata image ``version`` it was matched against
    (``regex_resolution``) and the time of the resolution (``timestamp``, ms)."""

    topics: frozenset[str]
    version: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class RegularExpressionRecord:
    group_id: str
    regex: str
    resolved: ResolvedRegularExpression | None

    def key_bytes(self) -> bytes:
        return _enc(regex_key, regex_key.ConsumerGroupRegularExpressionKey(group_id=self.group_id,
                                                                            regular_expression=self.regex))

    def value_bytes(self) -> bytes | None:
        r = self.resolved
        if r is None:
            return None
        return _enc(regex_value, regex_value.ConsumerGroupRegularExpressionValue(
            topics=sorted(r.topics), version=r.version, timestamp=r.timestamp))


ConsumerGroupRecord = (GroupEpochRecord | SubscriptionMetadataRecord | MemberSubscriptionRecord
                       | TargetAssignmentEpochRecord | TargetAssignmentMemberRecord | CurrentAssignmentRecord
                       | RegularExpressionRecord)


def _classic_in(c) -> ClassicMemberMetadata | None:
    if c is None:
        return None
    return ClassicMemberMetadata(c.session_timeout_ms, tuple((p.name, bytes(p.metadata)) for p in c.supported_protocols))


def decode_consumer_record(version: int, key, value, decode) -> ConsumerGroupRecord | None:
    """The record of key ``version`` (3-8, 16) with these bytes (``value`` None: a tombstone).
    ``decode(module, version, data)`` decodes one framed message (raising on bad bytes)."""

    def val(module):
        if value is None:
            return None
        return decode(module, versioned_message.read_version(value, ValueError, "value"), value)

    if version == 3:
        k, v = decode(epoch_key, version, key), val(epoch_value)
        return GroupEpochRecord(k.group_id, None if v is None else v.epoch)
    if version == 4:
        k, v = decode(meta_key, version, key), val(meta_value)
        topics = None if v is None else {
            t.topic_name: TopicMetadata(t.topic_id, t.topic_name, t.num_partitions,
                                        {p.partition: frozenset(p.racks) for p in t.partition_metadata})
            for t in v.topics}
        return SubscriptionMetadataRecord(k.group_id, topics)
    if version == 5:
        k, v = decode(member_key, version, key), val(member_value)
        member = None if v is None else ConsumerGroupMember(
            k.member_id, v.instance_id or None, v.rack_id or None, v.client_id, v.client_host, v.rebalance_timeout_ms,
            tuple(v.subscribed_topic_names), v.subscribed_topic_regex or None, v.server_assignor or None,
            classic=_classic_in(v.classic_member_metadata))
        return MemberSubscriptionRecord(k.group_id, k.member_id, member)
    if version == 6:
        k, v = decode(target_epoch_key, version, key), val(target_epoch_value)
        return TargetAssignmentEpochRecord(k.group_id, None if v is None else v.assignment_epoch)
    if version == 7:
        k, v = decode(target_key, version, key), val(target_value)
        return TargetAssignmentMemberRecord(k.group_id, k.member_id,
                                            None if v is None else _partitions_in(v.topic_partitions))
    if version == 8:
        k, v = decode(cur_key, version, key), val(cur_value)
        member = None if v is None else ConsumerGroupMember(
            k.member_id, member_epoch=v.member_epoch, previous_member_epoch=v.previous_member_epoch,
            state=MemberState.from_value(v.state), assigned_partitions=_partitions_in(v.assigned_partitions),
            partitions_pending_revocation=_partitions_in(v.partitions_pending_revocation))
        return CurrentAssignmentRecord(k.group_id, k.member_id, member)
    if version == REGULAR_EXPRESSION_KEY_VERSION:
        k, v = decode(regex_key, version, key), val(regex_value)
        resolved = None if v is None else ResolvedRegularExpression(frozenset(v.topics), v.version, v.timestamp)
        return RegularExpressionRecord(k.group_id, k.regular_expression, resolved)
    return None
