"""The synchronous admin client (see ``sync`` for how the synchronous clients run): every
``AsyncAdminClient`` call, run on the client's own event loop thread.

It lives apart from the producer and the consumer (``sync``), so that a tool that only
administers (``odradek topics``, ``odradek configs``, ...) loads neither of them.
"""

from __future__ import annotations

from odradek.client.admin import AsyncAdminClient
from odradek.client.sync_client import _forward, _SyncClient

__all__ = ["AdminClient"]


class AdminClient(_SyncClient):
    """The synchronous admin client: every ``AsyncAdminClient`` call, run on the loop."""

    def __init__(self, bootstrap_servers, **config) -> None:
        super().__init__(AsyncAdminClient(bootstrap_servers, **config), "odradek-admin")


_ADMIN_CALLS = (
    "create_topics delete_topics list_topics describe_topics create_partitions describe_configs alter_configs "
    "incremental_alter_configs describe_cluster delete_records list_offsets list_groups describe_groups "
    "describe_consumer_groups list_share_groups describe_share_groups list_share_group_offsets "
    "alter_share_group_offsets delete_share_group_offsets delete_groups list_group_offsets alter_group_offsets reset_group_offsets delete_group_offsets "
    "list_transactions describe_transactions describe_producers abort_transaction abort_transaction_at "
    "find_hanging_transactions elect_leaders alter_partition_reassignments list_partition_reassignments "
    "describe_log_dirs alter_user_scram_credentials describe_user_scram_credentials "
    "create_acls describe_acls delete_acls describe_client_quotas alter_client_quotas"
).split()
for _name in _ADMIN_CALLS:
    setattr(AdminClient, _name, _forward(_name, AsyncAdminClient))
