"""The synchronous share consumer (``ShareConsumer``): ``share_consumer.AsyncShareConsumer``
run on its own event loop thread (``sync_client``), with Kafka's ``KafkaShareConsumer`` calls.

    with ShareConsumer("127.0.0.1:9092", group_id="jobs") as consumer:
        consumer.subscribe(["jobs"])
        while True:
            for record in consumer.poll(1.0):   # implicit mode: accepted by the next poll
                handle(record)

The acknowledgement commit callback runs on the loop's thread while a call of this consumer
(``poll``, ``commit_sync``, ``commit_async``, ``close``) waits for it.
"""

from __future__ import annotations

from odradek.client.share_acknowledgements import AcknowledgeType
from odradek.client.share_consumer import AsyncShareConsumer
from odradek.client.sync_client import _SyncClient

__all__ = ["ShareConsumer"]


class ShareConsumer(_SyncClient):
    def __init__(self, bootstrap_servers, **config) -> None:
        super().__init__(AsyncShareConsumer(bootstrap_servers, **config), "odradek-share-consumer")

    @property
    def member_id(self) -> str:
        return self._client.member_id

    @property
    def acquisition_lock_timeout_ms(self) -> int | None:
        return self._client.acquisition_lock_timeout_ms

    def subscribe(self, topics) -> None:
        """Join the share group for ``topics`` (replaces the subscription)."""
        self._thread.call(self._client.subscribe, list(topics))

    def subscription(self) -> set[str]:
        return self._client.subscription()

    def unsubscribe(self) -> None:
        self._thread.run(self._client.unsubscribe())

    def poll(self, timeout: float = 0.0) -> list:
        """Records acquired for this member (``ShareConsumerRecord``), waiting up to
        ``timeout`` seconds for some."""
        return self._thread.run(self._client.poll(timeout))

    def acknowledge(self, record, ack_type: int = AcknowledgeType.ACCEPT) -> None:
        self._thread.call(self._client.acknowledge, record, ack_type)

    def acknowledge_offset(self, topic: str, partition: int, offset: int, ack_type: int = AcknowledgeType.ACCEPT) -> None:
        self._thread.call(self._client.acknowledge_offset, topic, partition, offset, ack_type)

    def commit_sync(self, timeout: float | None = None) -> dict:
        """Send the acknowledgements and wait: ``{TopicIdPartition: error or None}``."""
        return self._thread.run(self._client.commit_sync(timeout))

    def commit_async(self) -> None:
        self._thread.run(self._client.commit_async())

    def set_acknowledgement_commit_callback(self, callback) -> None:
        self._thread.call(self._client.set_acknowledgement_commit_callback, callback)
