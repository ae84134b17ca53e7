"""Driver side of the exactly-once sink: read what tasks staged, and publish it to the
target topics so that a publish cut short can be resumed without duplicates.

Every published record carries the header ``odradek.sink`` = ``query/batch/index``, where
``index`` numbers the batch's records in their fixed publish order (tasks by Spark
partition id, each in staging order). The target partition of each record is fixed before
anything is sent: the row's own partition, else the Java producer's ``murmur2(key) %
partitions`` with the partition count recorded in the intent, else (no key) ``index %
partitions``. So the same intent always means the same records in the same partitions, and
resuming it only needs the indices already present after the intent's start offsets.
"""

from __future__ import annotations

from odradek.client import AdminClient, Consumer, NewTopic, TopicPartition
from odradek.client.partitioner import murmur2
from odradek.spark.record_writer import STAGE_HEADER, TARGET_HEADER, Row, send_rows
from odradek.spark.sink_log import Intent, ensure_topic

__all__ = ["SINK_HEADER", "read_staged", "plan_targets", "publish"]

SINK_HEADER = "odradek.sink"


def read_staged(bootstrap: str, staging_topic: str, staged: list) -> list[Row]:
    """The rows of every ``StagedWrite.as_row()`` in ``staged``, in order, with the internal
    headers stripped. Raises RuntimeError when a task's staged rows are not all there."""
    rows: list[Row] = []
    with Consumer(bootstrap, client_id="odradek-spark-sink", max_poll_records=50_000,
                  max_partition_fetch_bytes=8 << 20) as consumer:
        for task, partition, first, last, count, tag in staged:
            if count == 0:
                continue
            found = _staged_rows(consumer, TopicPartition(staging_topic, partition), first, last, tag.encode())
            if len(found) != count:
                raise RuntimeError(f"task {task} staged {count} records in {staging_topic}-{partition} "
                                   f"at {first}..{last}, but {len(found)} are there")
            rows.extend(found)
    return rows


def _staged_rows(consumer: Consumer, tp: TopicPartition, first: int, last: int, tag: bytes) -> list[Row]:
    consumer.assign([tp])
    consumer.seek(tp, first)
    out = []
    while consumer.position(tp) <= last:
        for record in consumer.poll(1000).get(tp, []):
            if record.offset > last:
                break
            headers = record.headers
            if len(headers) < 2 or headers[-2] != (STAGE_HEADER, tag) or headers[-1][0] != TARGET_HEADER:
                continue
            partition, _, topic = headers[-1][1].decode().partition("/")
            out.append((topic, None if partition == "-1" else int(partition), record.key, record.value,
                        tuple(headers[:-2])))
    return out


def plan_targets(bootstrap: str, rows: list[Row], batch_id: int, staged: list) -> Intent:
    """A new intent for ``rows``: the target topics' partition counts (creating missing
    topics with the broker's defaults) and their current end offsets."""
    topics = sorted({row[0] for row in rows})
    with AdminClient(bootstrap, client_id="odradek-spark-sink") as admin:
        known = set(admin.list_topics())
        for topic in topics:
            if topic not in known:
                ensure_topic(admin, NewTopic(topic))
        described = admin.describe_topics(topics) if topics else {}
        counts = {t: len(d.partitions) for t, d in described.items()}
        specs = {TopicPartition(t, p): -1 for t in topics for p in range(counts[t])}
        ends = admin.list_offsets(specs) if specs else {}
    start: dict = {}
    for tp, answer in ends.items():
        start.setdefault(tp.topic, {})[str(tp.partition)] = answer.offset
    return Intent(batch_id, staged, counts, start)


def _addressed(rows: list[Row], counts: dict, tag: str) -> list[Row]:
    """Each row with its fixed target partition and its ``odradek.sink`` header."""
    out = []
    for index, (topic, partition, key, value, headers) in enumerate(rows):
        n = counts[topic]
        if partition is None:
            partition = (murmur2(key) & 0x7FFFFFFF) % n if key is not None else index % n
        out.append((topic, partition, key, value, headers + ((SINK_HEADER, f"{tag}{index}".encode()),)))
    return out


def published_indices(bootstrap: str, intent: Intent, tag: str, partitions: set) -> set[int]:
    """Indices of this batch's records already in ``partitions`` after the intent's start."""
    prefix = tag.encode()
    found: set[int] = set()
    with Consumer(bootstrap, client_id="odradek-spark-sink", max_poll_records=50_000) as consumer:
        tps = sorted(partitions)
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)
        for tp in tps:
            consumer.seek(tp, intent.start[tp.topic][str(tp.partition)])
        pending = {tp for tp in tps if consumer.position(tp) < ends[tp]}
        while pending:
            for tp, records in consumer.poll(1000).items():
                for record in records:
                    for name, value in record.headers:
                        if name == SINK_HEADER and value and value.startswith(prefix):
                            found.add(int(value[len(prefix):]))
                if consumer.position(tp) >= ends[tp]:
                    pending.discard(tp)
    return found


def publish(bootstrap: str, query_id: str, intent: Intent, rows: list[Row], resuming: bool,
            producer_config: tuple = (), halfway=None) -> int:
    """Send the intent's records that are not yet in their targets; returns how many were
    sent. ``halfway()`` is called once about half of them are acknowledged (failure tests)."""
    tag = f"{query_id}/{intent.batch}/"
    addressed = _addressed(rows, intent.partitions, tag)
    if resuming:
        touched = {TopicPartition(r[0], r[1]) for r in addressed}
        done = published_indices(bootstrap, intent, tag, touched)
        addressed = [r for i, r in enumerate(addressed) if i not in done]
    half = len(addressed) // 2
    if halfway is not None and half:
        send_rows(bootstrap, [addressed[:half]], producer_config)
        halfway()
        send_rows(bootstrap, [addressed[half:]], producer_config)
    elif addressed:
        send_rows(bootstrap, [addressed], producer_config)
    return len(addressed)
