"""The APIs odradek's broker serves and the version range of each, in one place.

Ranges are what the ApiVersions response advertises: each API's full range in the message
specs. Fetch v0-v3 are answered in the legacy message formats (down-converted for the clients
that ask, ``records.down_conversion``; Kafka 4.0 dropped them, Kafka 3.x serves them) and
Produce v0-v2's legacy message sets are converted to v2 batches on the way in.
"""

from __future__ import annotations

from odradek.protocol.generated import APIS, ApiKey

__all__ = ["ApiKey", "SUPPORTED", "supported_range", "is_supported"]

# Each API's full spec range unless narrowed here.
_NARROWED: dict[ApiKey, tuple[int, int]] = {}
# EndTxn v5 is an epoch bump per transaction (KIP-890 part 2): not served, so clients use
# the v0-v4 semantics. (AddPartitionsToTxn is served whole: v4+ is brokers verifying
# transactions, and every client caps its own requests at v3: Java's and kafka-python's
# LAST_CLIENT_VERSION, librdkafka's and aiokafka's own ranges, odradek's CLIENT_VERSIONS.)
_NARROWED[ApiKey.END_TXN] = (0, 4)

_SERVED = [
    ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.METADATA, ApiKey.API_VERSIONS,
    ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.DELETE_RECORDS, ApiKey.INIT_PRODUCER_ID,
    ApiKey.DESCRIBE_CONFIGS, ApiKey.ALTER_CONFIGS, ApiKey.CREATE_PARTITIONS,
    ApiKey.INCREMENTAL_ALTER_CONFIGS, ApiKey.DESCRIBE_CLUSTER,
    ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP,
    ApiKey.SYNC_GROUP, ApiKey.DESCRIBE_GROUPS, ApiKey.LIST_GROUPS, ApiKey.OFFSET_COMMIT,
    ApiKey.OFFSET_FETCH, ApiKey.DELETE_GROUPS, ApiKey.OFFSET_DELETE, ApiKey.OFFSET_FOR_LEADER_EPOCH,
    # served at the controller: brokers' requests to it
    ApiKey.CONTROLLED_SHUTDOWN, ApiKey.ALTER_PARTITION,
    # From the controller (``server/handlers/leader_and_isr.py``, ``stop_replica.py``,
    # ``update_metadata.py``).
    ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA,
    ApiKey.WRITE_TXN_MARKERS, ApiKey.DESCRIBE_PRODUCERS,  # partition side of transactions
    ApiKey.TXN_OFFSET_COMMIT,  # group coordinator side of transactions
    # the transaction coordinator (``server/handlers/end_txn.py``, ...)
    ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.END_TXN,
    ApiKey.DESCRIBE_TRANSACTIONS, ApiKey.LIST_TRANSACTIONS,
    ApiKey.ELECT_LEADERS,  # at the controller; other brokers forward it there
    # at the controller (others answer NOT_CONTROLLER), ``server/handlers/partition_reassignments.py``
    ApiKey.ALTER_PARTITION_REASSIGNMENTS, ApiKey.LIST_PARTITION_REASSIGNMENTS,
    ApiKey.DESCRIBE_LOG_DIRS,  # ``server/handlers/describe_log_dirs.py``
    # SASL (``server/sasl_authenticator.py``) and SCRAM credentials (``server/handlers/user_scram_credentials.py``)
    ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
    ApiKey.DESCRIBE_ACLS, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS,  # ``server/handlers/acls.py``
    ApiKey.DESCRIBE_CLIENT_QUOTAS, ApiKey.ALTER_CLIENT_QUOTAS,  # ``server/handlers/client_quotas.py``
    # KIP-848 consumer groups (``server/handlers/consumer_group_heartbeat.py``, ``..._describe.py``)
    ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE,
    # KIP-932 share coordinator state RPCs, between brokers (``server/handlers/share_group_state.py``)
    ApiKey.INITIALIZE_SHARE_GROUP_STATE, ApiKey.READ_SHARE_GROUP_STATE, ApiKey.WRITE_SHARE_GROUP_STATE,
    ApiKey.DELETE_SHARE_GROUP_STATE, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
]

SUPPORTED: dict[ApiKey, tuple[int, int]] = {
    key: _NARROWED.get(key, (APIS[key][3], APIS[key][4])) for key in _SERVED
}


# KIP-932 share groups, served at v1 only, the version librdkafka's share consumer asks for:
# ShareGroupHeartbeat/ShareGroupDescribe (``server/handlers/share_group_heartbeat.py``,
# ``..._describe.py``) and ShareFetch/ShareAcknowledge (``server/handlers/share_fetch.py``,
# ``share_acknowledge.py``; v2's record_limit acquire mode and renew acknowledgements are not
# served), advertised together since a share consumer needs all of them.
SHARE_GROUPS_SERVED = True
if SHARE_GROUPS_SERVED:
    SUPPORTED[ApiKey.SHARE_GROUP_HEARTBEAT] = (1, 1)
    SUPPORTED[ApiKey.SHARE_GROUP_DESCRIBE] = (1, 1)
    SUPPORTED[ApiKey.SHARE_FETCH] = (1, 1)
    SUPPORTED[ApiKey.SHARE_ACKNOWLEDGE] = (1, 1)
    # a share group's start offsets (server/handlers/share_group_offsets.py), as Kafka 4.2
    SUPPORTED[ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS] = (0, 1)
    SUPPORTED[ApiKey.ALTER_SHARE_GROUP_OFFSETS] = (0, 0)
    SUPPORTED[ApiKey.DELETE_SHARE_GROUP_OFFSETS] = (0, 0)


def supported_range(api_key: int) -> tuple[int, int] | None:
    return SUPPORTED.get(api_key)


def is_supported(api_key: int, api_version: int) -> bool:
    r = SUPPORTED.get(api_key)
    return r is not None and r[0] <= api_version <= r[1]
