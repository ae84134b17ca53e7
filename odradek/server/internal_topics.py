"""The broker's internal topics (Kafka's ``Topic.isInternal``): the group coordinator's
``__consumer_offsets``, the transaction coordinator's ``__transaction_state`` and the share
coordinator's ``__share_group_state``. Clients may not produce to them (INVALID_TOPIC_EXCEPTION,
unless the broker writes them itself); Metadata marks them ``is_internal``.

Used by the broker (server/broker.py) and by the produce fast path
(server/produce_fast_path.py), which must agree on the set.
"""

from __future__ import annotations

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
