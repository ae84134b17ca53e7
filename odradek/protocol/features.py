"""odradek's own features, named in ApiVersions v3+ ``supported_features`` (KIP-584's list).

Kafka's clients ignore features they do not know, but the librdkafka in Debian's kcat (1.7)
cannot skip a non-empty tagged field in the ApiVersions response, so a broker lists these only
to a client whose ApiVersions request names odradek's own client software
(``CLIENT_SOFTWARE_NAME``).

``odradek.transaction.verification`` v1: the broker verifies the first batch of a transaction
in a partition with the transaction's coordinator (KIP-890 part 1) and, when the coordinator
is on the same broker, waits for an AddPartitionsToTxn read before the batch on the same
connection. A producer may then send that batch right behind its AddPartitionsToTxn instead
of waiting for the answer (``client/transaction_manager.py``).

``group.version`` (Kafka's feature, KIP-848): supported 0-1 and finalized at level 1, listed
under the same rule (so Kafka's own clients do not see it: they use ConsumerGroupHeartbeat
because the broker advertises the API, as librdkafka does). ``share.version`` (KIP-932) likewise:
supported 0-1, finalized at level 1.
"""

from __future__ import annotations

CLIENT_SOFTWARE_NAME = "odradek-python"
TRANSACTION_VERIFICATION = "odradek.transaction.verification"

# name -> (min version, max version)
BROKER_FEATURES: dict[str, tuple[int, int]] = {TRANSACTION_VERIFICATION: (1, 1), "group.version": (0, 1),
                                                "share.version": (0, 1)}

# Kafka's finalized features, as a Kafka 4 cluster reports them: ``group.version`` level 1
# is the KIP-848 consumer group protocol (ConsumerGroupHeartbeat, ConsumerGroupDescribe);
# ``share.version`` level 1 is KIP-932 share groups (ShareGroupHeartbeat, ShareFetch,
# ShareAcknowledge, ...), enabled as in Kafka 4.2.
GROUP_VERSION = "group.version"
SHARE_VERSION = "share.version"
FINALIZED_FEATURES: dict[str, int] = {GROUP_VERSION: 1, SHARE_VERSION: 1}
