"""KIP-932 share groups in the group coordinator: membership and assignment (Kafka's
``modern.share.ShareGroup``, ``ShareGroupMember``, ``assignor.SimpleAssignor`` and
``GroupMetadataManager.shareGroupHeartbeat``). The records are in ``__consumer_offsets``
beside the classic and consumer groups' (``share_group_records``); the share partitions'
delivery state lives elsewhere (``coordinator/share/``, ``server/share/``)."""
