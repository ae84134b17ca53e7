"""What Kafka versions newer than ``../shared/kafka-protocol`` changed on the wire, in our own notation.

``../shared/kafka-protocol`` holds Kafka 4.0's message specs: the share-group APIs of KIP-932
only at their early-access version 0, and none of the share-group records. This module records
the wire facts of Kafka 4.2 that the codec needs beyond them (gathered from Kafka 4.2's message
specs and cross-checked against other clients' generated codecs and librdkafka 2.15's encoders),
and ``protocol_model.load_all`` merges them into the specs read from ``../shared`` before
``generate_protocol.py`` generates anything. It holds no copy of Kafka's JSON: only names, types
and version ranges, in the notation below.

Field lines (one field per line; a struct's fields follow it, indented two spaces more)::

    Name Type Versions [nullable=V] [default=D] [tagged=V tag=N]

``Type`` is a primitive (``int32``, ``string``, ``uuid``, ...), ``[]T``, or a struct name (its
fields indented below, or a struct the spec already declares). ``Versions`` and ``V`` are
ranges as Kafka writes them (``0+``, ``1-2``, ``0``). ``default=null`` for a nullable field.

``CHANGES[spec name]`` amends a spec ``../shared`` has, one directive per line::

    valid=1-2                 the message's valid versions as Kafka 4.2 serves them
    after Path.To.Field:      the indented field lines below go after that field, in its struct
    versions Path.To.Field V  the field exists only in versions V (Kafka removed it later)

``NEW[spec name]`` declares a whole spec: a head line, then its field lines::

    request api=90 valid=0-1 flexible=0+      (or response ...; or data for a record)

Coordinator records follow ``../shared``'s own convention for the ``__consumer_offsets``
records: a key's one valid version is its record type (the ``int16`` before the key on disk;
Kafka 4.x calls it the record's ``apiKey``) and a value's versions are the value's own.
Share-group records of the group coordinator are types 10-15 in ``__consumer_offsets``
(``ShareGroupMemberMetadata`` 10, ``ShareGroupMetadata`` 11, ``ShareGroupTargetAssignmentMetadata``
12, ``ShareGroupTargetAssignmentMember`` 13, ``ShareGroupCurrentMemberAssignment`` 14,
``ShareGroupStatePartitionMetadata`` 15; Kafka 4.1 dropped type 9, ``ShareGroupPartitionMetadata``);
a consumer group's resolved regular expressions are type 16 (``ConsumerGroupRegularExpression``, Kafka 4.0);
the share coordinator's records in ``__share_group_state`` are ``ShareSnapshot`` 0 and
``ShareUpdate`` 1 (Kafka's ``ShareCoordinatorRecordSerde``).

``ERRORS`` adds the error codes Kafka 4.2 defines beyond ``errors.tsv`` (``Errors.java``).
"""

from __future__ import annotations

import copy
from pathlib import Path

SOURCE = "tools/protocol_supplement.py"

# --- amendments to specs ../shared has -----------------------------------------------------
# KIP-932 went GA in Kafka 4.1: version 0 of the client APIs (early access in 4.0) was removed
# and version 1 is the first stable one; Kafka 4.2 added version 2 of ShareFetch and
# ShareAcknowledge (KIP-1206 acquire modes, KIP-1222 renewing acquisition locks).
CHANGES: dict[str, str] = {}

CHANGES["ShareGroupHeartbeatRequest"] = "valid=1"
CHANGES["ShareGroupHeartbeatResponse"] = "valid=1"
CHANGES["ShareGroupDescribeRequest"] = "valid=1"
CHANGES["ShareGroupDescribeResponse"] = "valid=1"

CHANGES["ShareFetchRequest"] = """
valid=1-2
after MaxBytes:
  MaxRecords int32 1+
  BatchSize int32 1+
  ShareAcquireMode int8 2+
  IsRenewAck bool 2+
versions Topics.Partitions.PartitionMaxBytes 0
"""
CHANGES["ShareFetchResponse"] = """
valid=1-2
after ErrorMessage:
  AcquisitionLockTimeoutMs int32 1+
"""
CHANGES["ShareAcknowledgeRequest"] = """
valid=1-2
after ShareSessionEpoch:
  IsRenewAck bool 2+
"""
CHANGES["ShareAcknowledgeResponse"] = """
valid=1-2
after ErrorMessage:
  AcquisitionLockTimeoutMs int32 2+
"""
# The share coordinator's RPCs: KIP-1226 (Kafka 4.2) carries the delivered-and-completed count.
CHANGES["WriteShareGroupStateRequest"] = """
valid=0-1
after Topics.Partitions.StartOffset:
  DeliveryCompleteCount int32 1+ default=-1
"""
CHANGES["WriteShareGroupStateResponse"] = "valid=0-1"
CHANGES["ReadShareGroupStateSummaryRequest"] = "valid=0-1"
CHANGES["ReadShareGroupStateSummaryResponse"] = """
valid=0-1
after Results.Partitions.StateEpoch:
  LeaderEpoch int32 0+
after Results.Partitions.StartOffset:
  DeliveryCompleteCount int32 1+ default=-1
"""

# --- specs ../shared lacks ------------------------------------------------------------------
NEW: dict[str, str] = {}

NEW["DescribeShareGroupOffsetsRequest"] = """
request api=90 valid=0-1 flexible=0+
Groups []DescribeShareGroupOffsetsRequestGroup 0+
  GroupId string 0+
  Topics []DescribeShareGroupOffsetsRequestTopic 0+ nullable=0+
    TopicName string 0+
    Partitions []int32 0+
"""
NEW["DescribeShareGroupOffsetsResponse"] = """
response api=90 valid=0-1 flexible=0+
ThrottleTimeMs int32 0+
Groups []DescribeShareGroupOffsetsResponseGroup 0+
  GroupId string 0+
  Topics []DescribeShareGroupOffsetsResponseTopic 0+
    TopicName string 0+
    TopicId uuid 0+
    Partitions []DescribeShareGroupOffsetsResponsePartition 0+
      PartitionIndex int32 0+
      StartOffset int64 0+
      LeaderEpoch int32 0+
      Lag int64 1+ default=-1
      ErrorCode int16 0+
      ErrorMessage string 0+ nullable=0+ default=null
  ErrorCode int16 0+
  ErrorMessage string 0+ nullable=0+ default=null
"""
NEW["AlterShareGroupOffsetsRequest"] = """
request api=91 valid=0 flexible=0+
GroupId string 0+
Topics []AlterShareGroupOffsetsRequestTopic 0+
  TopicName string 0+
  Partitions []AlterShareGroupOffsetsRequestPartition 0+
    PartitionIndex int32 0+
    StartOffset int64 0+
"""
NEW["AlterShareGroupOffsetsResponse"] = """
response api=91 valid=0 flexible=0+
ThrottleTimeMs int32 0+
ErrorCode int16 0+
ErrorMessage string 0+ nullable=0+ default=null
Responses []AlterShareGroupOffsetsResponseTopic 0+
  TopicName string 0+
  TopicId uuid 0+
  Partitions []AlterShareGroupOffsetsResponsePartition 0+
    PartitionIndex int32 0+
    ErrorCode int16 0+
    ErrorMessage string 0+ nullable=0+ default=null
"""
NEW["DeleteShareGroupOffsetsRequest"] = """
request api=92 valid=0 flexible=0+
GroupId string 0+
Topics []DeleteShareGroupOffsetsRequestTopic 0+
  TopicName string 0+
"""
NEW["DeleteShareGroupOffsetsResponse"] = """
response api=92 valid=0 flexible=0+
ThrottleTimeMs int32 0+
ErrorCode int16 0+
ErrorMessage string 0+ nullable=0+ default=null
Responses []DeleteShareGroupOffsetsResponseTopic 0+
  TopicName string 0+
  TopicId uuid 0+
  ErrorCode int16 0+
  ErrorMessage string 0+ nullable=0+ default=null
"""

# The share coordinator's records in __share_group_state (key types 0 and 1).
_SHARE_STATE_KEY = """
GroupId string {v}
TopicId uuid {v}
Partition int32 {v}
"""
_STATE_BATCHES = """
StateBatches []StateBatch 0+
  FirstOffset int64 0+
  LastOffset int64 0+
  DeliveryState int8 0+
  DeliveryCount int16 0+
"""
NEW["ShareSnapshotKey"] = "data valid=0 flexible=none" + _SHARE_STATE_KEY.format(v=0)
NEW["ShareUpdateKey"] = "data valid=1 flexible=none" + _SHARE_STATE_KEY.format(v=1)
NEW["ShareSnapshotValue"] = """
data valid=0 flexible=0+
SnapshotEpoch int32 0+
StateEpoch int32 0+
LeaderEpoch int32 0+
StartOffset int64 0+
DeliveryCompleteCount int32 0+ default=-1 tagged=0+ tag=0
CreateTimestamp int64 0+
WriteTimestamp int64 0+
""" + _STATE_BATCHES
NEW["ShareUpdateValue"] = """
data valid=0 flexible=0+
SnapshotEpoch int32 0+
LeaderEpoch int32 0+
StartOffset int64 0+
DeliveryCompleteCount int32 0+ default=-1 tagged=0+ tag=0
""" + _STATE_BATCHES

# The group coordinator's share-group records in __consumer_offsets (key types 10 to 15).
_GROUP_KEY = "data valid={v} flexible=none\nGroupId string {v}\n"
_MEMBER_KEY = _GROUP_KEY + "MemberId string {v}\n"
_TOPIC_PARTITIONS = """
  TopicId uuid 0+
  Partitions []int32 0+
"""
NEW["ShareGroupMemberMetadataKey"] = _MEMBER_KEY.format(v=10)
NEW["ShareGroupMemberMetadataValue"] = """
data valid=0 flexible=0+
RackId string 0+ nullable=0+ default=null
ClientId string 0+
ClientHost string 0+
SubscribedTopicNames []string 0+
"""
NEW["ShareGroupMetadataKey"] = _GROUP_KEY.format(v=11)
NEW["ShareGroupMetadataValue"] = """
data valid=0 flexible=0+
Epoch int32 0+
MetadataHash int64 0+
"""
NEW["ShareGroupTargetAssignmentMetadataKey"] = _GROUP_KEY.format(v=12)
NEW["ShareGroupTargetAssignmentMetadataValue"] = """
data valid=0 flexible=0+
AssignmentEpoch int32 0+
"""
NEW["ShareGroupTargetAssignmentMemberKey"] = _MEMBER_KEY.format(v=13)
NEW["ShareGroupTargetAssignmentMemberValue"] = """
data valid=0 flexible=0+
TopicPartitions []TopicPartition 0+""" + _TOPIC_PARTITIONS
NEW["ShareGroupCurrentMemberAssignmentKey"] = _MEMBER_KEY.format(v=14)
NEW["ShareGroupCurrentMemberAssignmentValue"] = """
data valid=0 flexible=0+
MemberEpoch int32 0+
PreviousMemberEpoch int32 0+
State int8 0+
AssignedPartitions []TopicPartitions 0+""" + _TOPIC_PARTITIONS
NEW["ShareGroupStatePartitionMetadataKey"] = _GROUP_KEY.format(v=15)
NEW["ShareGroupStatePartitionMetadataValue"] = """
data valid=0 flexible=0+
InitializingTopics []TopicPartitionsInfo 0+
  TopicId uuid 0+
  TopicName string 0+
  Partitions []int32 0+
InitializedTopics []TopicPartitionsInfo 0+
DeletingTopics []TopicInfo 0+
  TopicId uuid 0+
  TopicName string 0+
"""

# The resolved regular expressions of a KIP-848 consumer group (key type 16 in __consumer_offsets,
# Kafka 4.0's ConsumerGroupRegularExpression, which ../shared's 4.0 records lack): the topics a
# SubscribedTopicRegex matched, the metadata image version it was matched against, and when.
NEW["ConsumerGroupRegularExpressionKey"] = """
data valid=16 flexible=none
GroupId string 16
RegularExpression string 16
"""
NEW["ConsumerGroupRegularExpressionValue"] = """
data valid=0 flexible=0+
Topics []string 0+
Version int64 0+
Timestamp int64 0+
"""

# (code, name, retriable) beyond Kafka 4.0's errors.tsv.
ERRORS = [
    (129, "REBOOTSTRAP_REQUIRED", False),
    (130, "STREAMS_INVALID_TOPOLOGY", False),
    (131, "STREAMS_INVALID_TOPOLOGY_EPOCH", False),
    (132, "STREAMS_TOPOLOGY_FENCED", False),
    (133, "SHARE_SESSION_LIMIT_REACHED", True),
]


# --- the notation's reader ------------------------------------------------------------------
def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _field_line(text: str) -> dict:
    """One field line as a dict in the shape ``protocol_model.build_spec`` reads."""
    name, type_, versions, *options = text.split()
    raw: dict = {"name": name, "type": type_, "versions": versions}
    keys = {"nullable": "nullableVersions", "default": "default", "tagged": "taggedVersions",
            "tag": "tag", "flexible": "flexibleVersions"}
    for option in options:
        key, _, value = option.partition("=")
        if key not in keys:
            raise ValueError(f"{SOURCE}: unknown option {option!r} in {text!r}")
        raw[keys[key]] = int(value) if key == "tag" else value
    return raw


def parse_fields(lines: list[str]) -> list[dict]:
    """Field lines (indentation nests a struct's fields under it) as a list of field dicts."""
    items = [(_indent(ln), ln.strip()) for ln in lines if ln.strip()]

    def siblings(i: int, depth: int) -> tuple[list[dict], int]:
        out = []
        while i < len(items) and items[i][0] == depth:
            f = _field_line(items[i][1])
            i += 1
            if i < len(items) and items[i][0] > depth:
                f["fields"], i = siblings(i, items[i][0])
            out.append(f)
        return out, i

    fields, end = siblings(0, items[0][0]) if items else ([], 0)
    if end != len(items):
        raise ValueError(f"{SOURCE}: misindented field line {items[end][1]!r}")
    return fields


def new_spec(name: str, text: str) -> dict:
    """A ``NEW`` entry as a spec dict."""
    lines = [ln for ln in text.strip("\n").splitlines() if ln.strip()]
    kind, *head = lines[0].split()
    opts = dict(h.split("=") for h in head)
    raw = {"name": name, "type": kind, "validVersions": opts["valid"],
           "flexibleVersions": opts["flexible"], "fields": parse_fields(lines[1:])}
    if "api" in opts:
        raw["apiKey"] = int(opts["api"])
    return raw


def _struct_fields(raw: dict, type_: str) -> list[dict]:
    """The fields of the struct a field of type ``type_`` holds (inline or common)."""
    name = type_.removeprefix("[]")
    for common in raw.get("commonStructs", []):
        if common["name"] == name:
            return common["fields"]
    raise KeyError(f"{SOURCE}: no struct {name} in {raw['name']}")


def _find(raw: dict, path: str) -> tuple[list[dict], int]:
    """The list holding the field at ``path`` (``A.B.C``) and the field's index in it."""
    fields = raw["fields"]
    parts = path.split(".")
    for i, part in enumerate(parts):
        index = next((k for k, f in enumerate(fields) if f["name"] == part), None)
        if index is None:
            raise KeyError(f"{SOURCE}: {raw['name']} has no field {'.'.join(parts[:i + 1])}")
        if i == len(parts) - 1:
            return fields, index
        f = fields[index]
        fields = f["fields"] if "fields" in f else _struct_fields(raw, f["type"])
    raise KeyError(path)


def amend(raw: dict, text: str) -> dict:
    """A ``CHANGES`` entry applied to a copy of one spec dict."""
    raw = copy.deepcopy(raw)
    lines = text.strip("\n").splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        i += 1
        if not line:
            continue
        if line.startswith("valid="):
            raw["validVersions"] = line.removeprefix("valid=")
        elif line.startswith("versions "):
            _, path, versions = line.split()
            fields, index = _find(raw, path)
            fields[index]["versions"] = versions
        elif line.startswith("after ") and line.endswith(":"):
            block = []
            while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > 0):
                block.append(lines[i])
                i += 1
            fields, index = _find(raw, line[len("after "):-1])
            fields[index + 1:index + 1] = parse_fields(block)
        else:
            raise ValueError(f"{SOURCE}: cannot read {line!r} (changes to {raw['name']})")
    return raw


def apply(raws: dict[Path, dict]) -> dict[Path, dict]:
    """The specs read from ``../shared`` with ``CHANGES`` applied and ``NEW`` added."""
    by_name = {raw["name"]: path for path, raw in raws.items()}
    missing = sorted(set(CHANGES) - set(by_name))
    clash = sorted(set(NEW) & set(by_name))
    if missing or clash:
        raise ValueError(f"{SOURCE}: changes to unknown specs {missing}, new specs already there {clash}")
    out = dict(raws)
    for name, text in CHANGES.items():
        out[by_name[name]] = amend(raws[by_name[name]], text)
    for name, text in NEW.items():
        out[Path(SOURCE) / name] = new_spec(name, text)
    return out


def source_of(spec_name: str, path: Path) -> str:
    """What a generated module names as its source."""
    if spec_name in NEW:
        return SOURCE
    shared = f"../shared/kafka-protocol/{path.parent.name}/{path.name}"
    return f"{shared} and {SOURCE}" if spec_name in CHANGES else shared


def errors(rows: list[tuple[int, str, bool]]) -> list[tuple[int, str, bool]]:
    """``errors.tsv``'s rows and ``ERRORS``, by code (a code both hold keeps ``errors.tsv``'s row)."""
    have = {code for code, _, _ in rows}
    return sorted(rows + [e for e in ERRORS if e[0] not in have])
