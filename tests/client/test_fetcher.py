"""What the consumer makes of fetched batches, served by a scripted broker: control batches,
aborted transactions under read_committed, and corrupt batches."""

from __future__ import annotations

import asyncio

import pytest

from odradek.client import AsyncConsumer, KafkaError, TopicPartition
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.fetch_response import (
    AbortedTransaction,
    FetchableTopicResponse,
    FetchResponse,
    PartitionData,
)
from odradek.records.builder import BatchBuilder, BatchSpec
from odradek.records.control import ABORT, COMMIT, build_end_txn_marker_batch
from tests.client.fake_broker import TOPIC_IDS, FakeBroker, metadata_response
from tests.client.helpers import run


def batch(base: int, count: int, producer_id: int = -1, transactional: bool = False) -> bytes:
    builder = BatchBuilder(BatchSpec(base_offset=base, producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                                     base_sequence=0 if producer_id >= 0 else -1, transactional=transactional))
    for i in range(count):
        builder.append(1000 + base + i, None, b"v%d" % (base + i))
    return builder.build()


# offsets 0-1 txn of producer 7 (aborted at 4), 2-3 plain, 5-6 txn of producer 8 (committed at 7)
LOG = (batch(0, 2, 7, True) + batch(2, 2) + build_end_txn_marker_batch(ABORT, 0, producer_id=7, producer_epoch=0,
                                                                          timestamp=0, base_offset=4)
       + batch(5, 2, 8, True) + build_end_txn_marker_batch(COMMIT, 0, producer_id=8, producer_epoch=0,
                                                           timestamp=0, base_offset=7))
END = 8


async def serve_log(log: bytes, end: int):
    def handler(fake, header, body):
        if header.request_api_key == ApiKey.METADATA:
            return metadata_response([fake], {"t": [1]})
        offset = body.topics[0].partitions[0].fetch_offset
        data = log if offset < end else b""
        aborted = [AbortedTransaction(producer_id=7, first_offset=0)] if body.isolation_level else None
        response = FetchResponse(responses=[FetchableTopicResponse(topic="t", topic_id=TOPIC_IDS["t"], partitions=[
            PartitionData(partition_index=0, high_watermark=end, last_stable_offset=end, records=data,
                          aborted_transactions=aborted)])])
        if data:
            return response

        async def later():
            await asyncio.sleep(0.05)
            return response
        return later()

    return await FakeBroker(1, handler).start()


async def consume(bootstrap: str, isolation: str) -> list[int]:
    tp = TopicPartition("t", 0)
    async with AsyncConsumer(bootstrap, isolation_level=isolation) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        offsets = []
        while await consumer.position(tp) < END:
            offsets += [r.offset for r in (await consumer.poll(1000)).get(tp, [])]
        return offsets


def test_control_batches_are_skipped_and_read_committed_drops_aborted_transactions():
    async def main():
        fake = await serve_log(LOG, END)
        try:
            assert await consume(fake.bootstrap, "read_uncommitted") == [0, 1, 2, 3, 5, 6]
            assert await consume(fake.bootstrap, "read_committed") == [2, 3, 5, 6]
        finally:
            await fake.close()

    run(main())


def test_a_corrupt_batch_is_raised_by_poll_after_the_good_ones():
    corrupt = bytearray(batch(2, 2))
    corrupt[-1] ^= 0xFF  # breaks the CRC

    async def main():
        fake = await serve_log(batch(0, 2) + bytes(corrupt), 4)
        try:
            tp = TopicPartition("t", 0)
            async with AsyncConsumer(fake.bootstrap) as consumer:
                consumer.assign([tp])
                consumer.seek(tp, 0)
                assert [r.offset for r in (await consumer.poll(1000))[tp]] == [0, 1]
                with pytest.raises(KafkaError, match="corrupt"):
                    for _ in range(20):
                        await consumer.poll(100)
                assert await consumer.position(tp) == 2
        finally:
            await fake.close()

    run(main())


def test_an_answer_of_control_batches_only_moves_the_position_past_them():
    # offsets 0-1: aborted transaction of producer 7 and its marker at 2; 3: a commit marker of
    # producer 8 whose records came before: nothing to return, yet the position reaches 4.
    log = (batch(0, 2, 7, True) + build_end_txn_marker_batch(ABORT, 0, producer_id=7, producer_epoch=0,
                                                               timestamp=0, base_offset=2)
           + build_end_txn_marker_batch(COMMIT, 0, producer_id=8, producer_epoch=0, timestamp=0, base_offset=3))

    async def main():
        fake = await serve_log(log, 4)
        try:
            tp = TopicPartition("t", 0)
            async with AsyncConsumer(fake.bootstrap, isolation_level="read_committed") as consumer:
                consumer.assign([tp])
                consumer.seek(tp, 2)  # only the markers are left to fetch
                for _ in range(20):
                    assert await consumer.poll(100) == {}
                    if await consumer.position(tp) == 4:
                        break
                assert await consumer.position(tp) == 4
                consumer.seek(tp, 0)  # the aborted records are dropped, the markers skipped
                for _ in range(20):
                    assert await consumer.poll(100) == {}
                    if await consumer.position(tp) == 4:
                        break
                assert await consumer.position(tp) == 4
        finally:
            await fake.close()

    run(main())


def test_read_committed_from_inside_an_aborted_transaction_drops_its_rest():
    async def main():
        fake = await serve_log(LOG, END)
        try:
            tp = TopicPartition("t", 0)
            async with AsyncConsumer(fake.bootstrap, isolation_level="read_committed") as consumer:
                consumer.assign([tp])
                consumer.seek(tp, 1)  # the aborted transaction began at 0, before the position
                offsets = []
                while await consumer.position(tp) < END:
                    offsets += [r.offset for r in (await consumer.poll(1000)).get(tp, [])]
                assert offsets == [2, 3, 5, 6]
        finally:
            await fake.close()

    run(main())
