"""One handler module per API family; ``HANDLERS`` maps each served API key to its handler.

A handler is ``handle(ctx, request) -> response`` or an ``async`` function for requests that
may wait (long-poll fetch, acks=all produce); returning ``request.NO_RESPONSE`` sends nothing.
"""

from __future__ import annotations

from odradek.protocol.api_keys import ApiKey
from odradek.server.handlers import (
    alter_configs, api_versions, create_partitions, create_topics, delete_records, delete_topics,
    describe_cluster, describe_configs, fetch, init_producer_id, list_offsets, metadata, produce,
)
from odradek.server.handlers import find_coordinator, groups, offset_for_leader_epoch, offsets
from odradek.server.handlers import share_group_describe, share_group_heartbeat
from odradek.server.handlers import share_acknowledge, share_fetch
from odradek.server.handlers import share_group_offsets
from odradek.server.handlers import alter_partition, controlled_shutdown
from odradek.server.handlers import leader_and_isr, stop_replica, update_metadata
from odradek.server.handlers import describe_producers, write_txn_markers
from odradek.server.handlers import txn_offset_commit
from odradek.server.handlers import elect_leaders
from odradek.server.handlers import partition_reassignments
from odradek.server.handlers import describe_log_dirs
from odradek.server.handlers import sasl, user_scram_credentials
from odradek.server.handlers import acls
from odradek.server.handlers import client_quotas
from odradek.server.handlers import consumer_group_describe, consumer_group_heartbeat
from odradek.server.handlers import share_group_state
from odradek.server.handlers import (
    add_offsets_to_txn, add_partitions_to_txn, describe_transactions, end_txn, list_transactions,
)

HANDLERS = {
    ApiKey.API_VERSIONS: api_versions.handle,
    ApiKey.METADATA: metadata.handle,
    ApiKey.PRODUCE: produce.handle,
    ApiKey.FETCH: fetch.handle,
    ApiKey.LIST_OFFSETS: list_offsets.handle,
    ApiKey.CREATE_TOPICS: create_topics.handle,
    ApiKey.DELETE_TOPICS: delete_topics.handle,
    ApiKey.CREATE_PARTITIONS: create_partitions.handle,
    ApiKey.DELETE_RECORDS: delete_records.handle,
    ApiKey.DESCRIBE_CLUSTER: describe_cluster.handle,
    ApiKey.DESCRIBE_CONFIGS: describe_configs.handle,
    ApiKey.ALTER_CONFIGS: alter_configs.handle,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: alter_configs.handle_incremental,
    ApiKey.INIT_PRODUCER_ID: init_producer_id.handle,
    ApiKey.FIND_COORDINATOR: find_coordinator.handle,
    ApiKey.JOIN_GROUP: groups.handle_join_group,
    ApiKey.SYNC_GROUP: groups.handle_sync_group,
    ApiKey.HEARTBEAT: groups.handle_heartbeat,
    ApiKey.LEAVE_GROUP: groups.handle_leave_group,
    ApiKey.DESCRIBE_GROUPS: groups.handle_describe_groups,
    ApiKey.LIST_GROUPS: groups.handle_list_groups,
    ApiKey.DELETE_GROUPS: groups.handle_delete_groups,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: consumer_group_heartbeat.handle,
    ApiKey.CONSUMER_GROUP_DESCRIBE: consumer_group_describe.handle,
    # KIP-932 share groups (advertised only with SHARE_GROUPS_SERVED, protocol/api_keys.py)
    ApiKey.SHARE_GROUP_HEARTBEAT: share_group_heartbeat.handle,
    ApiKey.SHARE_GROUP_DESCRIBE: share_group_describe.handle,
    ApiKey.SHARE_FETCH: share_fetch.handle,  # server/share/: SharePartitionManager, share sessions
    ApiKey.SHARE_ACKNOWLEDGE: share_acknowledge.handle,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: share_group_offsets.handle_describe,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: share_group_offsets.handle_alter,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: share_group_offsets.handle_delete,
    ApiKey.OFFSET_COMMIT: offsets.handle_offset_commit,
    ApiKey.OFFSET_FETCH: offsets.handle_offset_fetch,
    ApiKey.OFFSET_DELETE: offsets.handle_offset_delete,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: offset_for_leader_epoch.handle,
    ApiKey.CONTROLLED_SHUTDOWN: controlled_shutdown.handle,
    ApiKey.ALTER_PARTITION: alter_partition.handle,
    ApiKey.LEADER_AND_ISR: leader_and_isr.handle,
    ApiKey.STOP_REPLICA: stop_replica.handle,
    ApiKey.UPDATE_METADATA: update_metadata.handle,
    ApiKey.WRITE_TXN_MARKERS: write_txn_markers.handle,
    ApiKey.DESCRIBE_PRODUCERS: describe_producers.handle,
    ApiKey.TXN_OFFSET_COMMIT: txn_offset_commit.handle,
    ApiKey.ADD_PARTITIONS_TO_TXN: add_partitions_to_txn.handle,
    ApiKey.ADD_OFFSETS_TO_TXN: add_offsets_to_txn.handle,
    ApiKey.END_TXN: end_txn.handle,
    ApiKey.DESCRIBE_TRANSACTIONS: describe_transactions.handle,
    ApiKey.LIST_TRANSACTIONS: list_transactions.handle,
    ApiKey.ELECT_LEADERS: elect_leaders.handle,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: partition_reassignments.handle_alter,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: partition_reassignments.handle_list,
    ApiKey.DESCRIBE_LOG_DIRS: describe_log_dirs.handle,
    ApiKey.SASL_HANDSHAKE: sasl.handle_handshake,
    ApiKey.SASL_AUTHENTICATE: sasl.handle_authenticate,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: user_scram_credentials.handle_describe,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: user_scram_credentials.handle_alter,
    ApiKey.DESCRIBE_ACLS: acls.handle_describe,
    ApiKey.CREATE_ACLS: acls.handle_create,
    ApiKey.DELETE_ACLS: acls.handle_delete,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: client_quotas.handle_describe,
    ApiKey.ALTER_CLIENT_QUOTAS: client_quotas.handle_alter,
    # KIP-932's share coordinator, from other brokers' Persisters (server/handlers/share_group_state.py)
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: share_group_state.handle_initialize,
    ApiKey.READ_SHARE_GROUP_STATE: share_group_state.handle_read,
    ApiKey.WRITE_SHARE_GROUP_STATE: share_group_state.handle_write,
    ApiKey.DELETE_SHARE_GROUP_STATE: share_group_state.handle_delete,
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: share_group_state.handle_read_summary,
}
