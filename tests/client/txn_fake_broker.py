"""A scripted transaction coordinator and partition leader in one fake broker, for the
transactional producer's unit tests.

``TxnFake`` answers FindCoordinator (itself, for groups and transactional ids alike),
InitProducerId (producer id 7, the epoch counting up from 0), AddPartitionsToTxn,
AddOffsetsToTxn, TxnOffsetCommit, EndTxn and Produce, with NONE unless a test queued error
codes for that API in ``errors[api_key]`` (consumed one per request). ``hold[api_key]``, an
asyncio.Event, delays the answers of that API until it is set. Everything received is in
``fake.requests`` (see ``FakeBroker``); ``produced`` holds the decoded batch headers.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict, deque

from odradek.protocol.api_keys import SUPPORTED
from odradek.protocol.generated import APIS, ApiKey
from odradek.protocol.generated.add_offsets_to_txn_response import AddOffsetsToTxnResponse
from odradek.protocol.generated.add_partitions_to_txn_response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopicResult,
)
from odradek.protocol.generated.end_txn_response import EndTxnResponse
from odradek.protocol.generated.find_coordinator_response import (
    Coordinator,
    FindCoordinatorResponse,
)
from odradek.protocol.generated.init_producer_id_response import InitProducerIdResponse
from odradek.protocol.generated.produce_response import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from odradek.protocol.generated.txn_offset_commit_response import (
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from odradek.records.batch import read_header
from tests.client.fake_broker import FakeBroker, metadata_response

TXN_APIS = (ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.END_TXN, ApiKey.TXN_OFFSET_COMMIT)
VERSIONS = {**SUPPORTED, **{k: (APIS[k][3], APIS[k][4]) for k in TXN_APIS}}
PRODUCER_ID = 7


class TxnFake:
    def __init__(self, topics: dict[str, int]) -> None:
        self.topics = topics  # name -> partition count, all led by this broker
        self.errors: dict[int, deque] = defaultdict(deque)
        self.hold: dict[int, asyncio.Event] = {}
        self.epoch = -1
        self.offsets: dict[tuple[str, int], int] = defaultdict(int)
        self.produced: list = []  # (ProduceRequest transactional_id, topic, partition, BatchHeader)
        self.broker: FakeBroker | None = None

    async def start(self) -> TxnFake:
        self.broker = await FakeBroker(1, self._handle, versions=VERSIONS).start()
        return self

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    def of(self, api_key: int) -> list:
        return self.broker.of(api_key)

    def api_order(self) -> list[str]:
        """The names of the APIs received, ApiVersions and Metadata left out."""
        skip = (ApiKey.API_VERSIONS, ApiKey.METADATA)
        return [ApiKey(h.request_api_key).name for h, _ in self.broker.requests if h.request_api_key not in skip]

    async def close(self) -> None:
        await self.broker.close()

    def _error(self, api_key: int) -> int:
        queued = self.errors[api_key]
        return queued.popleft() if queued else 0

    def _handle(self, fake, header, body):
        api_key = header.request_api_key
        if api_key == ApiKey.METADATA:
            return metadata_response([fake], {t: [1] * n for t, n in self.topics.items()})
        response = getattr(self, "_" + ApiKey(api_key).name.lower())(body)
        event = self.hold.get(api_key)
        if event is None or event.is_set():
            return response

        async def later():
            await event.wait()
            return response
        return later()

    def _find_coordinator(self, body):
        code = self._error(ApiKey.FIND_COORDINATOR)
        keys = body.coordinator_keys or [body.key]
        return FindCoordinatorResponse(error_code=code, node_id=1, host="127.0.0.1", port=self.broker.port,
                                       coordinators=[Coordinator(k, 1, "127.0.0.1", self.broker.port, code)
                                                     for k in keys])

    def _init_producer_id(self, body):
        code = self._error(ApiKey.INIT_PRODUCER_ID)
        if code:
            return InitProducerIdResponse(error_code=code)
        self.epoch += 1
        return InitProducerIdResponse(error_code=0, producer_id=PRODUCER_ID, producer_epoch=self.epoch)

    def _add_partitions_to_txn(self, body):
        code = self._error(ApiKey.ADD_PARTITIONS_TO_TXN)
        return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=[
            AddPartitionsToTxnTopicResult(t.name, [AddPartitionsToTxnPartitionResult(p, code) for p in t.partitions])
            for t in body.v3_and_below_topics])

    def _add_offsets_to_txn(self, body):
        return AddOffsetsToTxnResponse(error_code=self._error(ApiKey.ADD_OFFSETS_TO_TXN))

    def _txn_offset_commit(self, body):
        code = self._error(ApiKey.TXN_OFFSET_COMMIT)
        return TxnOffsetCommitResponse(topics=[
            TxnOffsetCommitResponseTopic(t.name, [TxnOffsetCommitResponsePartition(p.partition_index, code)
                                                  for p in t.partitions]) for t in body.topics])

    def _end_txn(self, body):
        return EndTxnResponse(error_code=self._error(ApiKey.END_TXN))

    def _produce(self, body):
        code = self._error(ApiKey.PRODUCE)
        topics = []
        for t in body.topic_data:
            parts = []
            for p in t.partition_data:
                header = read_header(bytes(p.records), 0)
                self.produced.append((body.transactional_id, t.name, p.index, header))
                base = self.offsets[(t.name, p.index)]
                if not code:
                    self.offsets[(t.name, p.index)] += header.records_count
                parts.append(PartitionProduceResponse(index=p.index, error_code=code, base_offset=base))
            topics.append(TopicProduceResponse(name=t.name, partition_responses=parts))
        return ProduceResponse(responses=topics)
