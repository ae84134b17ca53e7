"""The transactional sink: each micro-batch written in Kafka transactions that Spark's commit
protocol commits, so read_committed readers see every batch once and nothing of a batch that
was not decided.

Two-phase commit, the tasks preparing and the driver deciding:

1. **Tasks** (executors, ``write_task``): task ``p`` of batch ``b`` of query ``q`` first reads
   the query's last decision in the sink log (``sink_log.read_decision_pooled``: the last few
   hundred records of one partition). If batch ``b`` was decided already (Spark replays a
   batch whose commit it had not recorded when the driver died), it writes nothing: its
   rows are in the decided transactions. Otherwise it writes its rows with a transactional
   producer whose id is ``<transactional.id.prefix><q>/<p>``: InitProducerId (which fences
   and aborts whatever an earlier attempt of the task left open), begin, send, then
   ``prepare_transaction()``: everything acknowledged, the transaction still open. The
   commit message (``TxnWrite``) carries its handle ``(transactional id, producer id,
   epoch)`` and the batch id. A task with no rows opens no transaction (it only fences an
   earlier attempt's open one, found with DescribeTransactions).
2. **Driver** (``commit_batch``): reads the query's last decision. For a new batch it records
   ``Decision(b, handles, done=False)`` (from here the batch *will* be committed), commits
   every handle (EndTxn, in parallel), then records ``done=True``. For a batch already
   decided it commits the recorded handles again (EndTxn of a committed transaction answers
   NONE) and nothing new: handles the replay's tasks prepared anyway are aborted.
3. **Abort** (``abort_batch``): the handles of an undecided batch are aborted; those of a
   decided one are left for the replay to commit (Spark calls ``abort`` when ``commit``
   raised, possibly after the decision was recorded).

Why one transactional id per query and task partition, the same for every batch: a retried
task must reuse its predecessor's id to fence it (Kafka's zombie fencing), and ids are kept
by the transaction coordinator until ``transactional.id.expiration.ms`` (7 days) after their
last use, so an id per batch would pile up partitions x batches of them (at a micro-batch a
second and 200 partitions, 17 million a day): a stable id keeps the coordinator's state at
one entry per task partition, as KIP-447 advises. The batch id travels in the commit
message and the decision instead. What the id alone cannot tell a task, whether its batch
was decided before (a replay), the sink log tells: it must be asked before InitProducerId,
which would abort a decided transaction not committed yet.

Limits, stated plainly:
- One transaction per task, not one per batch: the driver commits a batch's transactions one
  after another (in parallel, milliseconds apart), so a reader may see some tasks' output of
  a batch a moment before the rest; a driver killed between two EndTxns leaves the batch
  partly visible until the restarted query commits the rest. No reader ever sees a batch that
  was not decided, nor anything twice.
- Speculative execution must stay off (Spark's default): a speculative copy of a task that
  starts after the driver's decision would fence a decided transaction.
- A batch decided but not committed within ``kafka.transaction.timeout.ms`` (the query down
  that long) is aborted by the coordinator; the replay then fails naming the lost handles.
- Until a batch is decided its open transactions hold back the last stable offset of the
  partitions they wrote: read_committed readers wait for the batch (at most the transaction
  timeout when the query dies and is not restarted).
- The broker must serve DescribeTransactions (Kafka 3.0+) for tasks with no rows.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Iterable

from pyspark.sql.datasource import WriterCommitMessage

from odradek.client.coordinator import TRANSACTION_KEY, GroupCoordinatorClient
from odradek.client.errors import BrokerError, KafkaError
from odradek.client.producer import AsyncProducer
from odradek.client.transactions import TransactionHandle, send_end_txn
from odradek.protocol.generated import ApiKey
from odradek.protocol.generated.describe_transactions_request import DescribeTransactionsRequest
from odradek.protocol.generated.error_codes import ErrorCode
from odradek.spark import client_pool, failpoints
from odradek.spark.options import SinkOptions
from odradek.spark.record_writer import Row, Tally, send_some
from odradek.spark.sink_log import Decision, SinkLog, read_decision_pooled

__all__ = ["TxnWrite", "transactional_id", "write_task", "commit_batch", "abort_batch"]

_log = logging.getLogger("odradek.spark")
_TIMEOUT_S = 120


@dataclass(frozen=True)
class TxnWrite(WriterCommitMessage):
    """What task ``partition`` of batch ``batch_id`` did: ``handle`` is its prepared
    transaction (None: it opened none); ``replayed`` when it found the batch decided and
    wrote nothing."""

    query_id: str
    batch_id: int
    partition: int
    handle: tuple | None
    count: int
    replayed: bool = False


def transactional_id(prefix: str, query_id: str, partition: int) -> str:
    return f"{prefix}{query_id}/{partition}"


# --- executors --------------------------------------------------------------------------
def write_task(options: SinkOptions, batches: Iterable[Iterable[Row]], query_id: str, batch_id: int,
               partition: int) -> TxnWrite:
    """Write one task's rows (``batches``: rows, one iterable per Arrow batch) in a
    transaction and prepare it; see the module docstring for the replay rules."""
    tid = transactional_id(options.txn_id_prefix, query_id, partition)
    thread = client_pool.loop_thread()
    # the process's first client of the cluster waits for it as a producer would (reachability)
    client_pool.cluster(options.bootstrap, reach=(options.max_block_ms, "kafka.max.block.ms"))
    decided = read_decision_pooled(options.bootstrap, options.commit_topic, query_id)
    if decided is not None and decided.batch >= batch_id:
        for rows in batches:  # let upstream operators finish (state stores commit at the end)
            for _ in rows:
                pass
        _log.info("batch %d of query %s was decided before: task %d writes nothing", batch_id, query_id, partition)
        return TxnWrite(query_id, batch_id, partition, None, 0, replayed=True)
    if decided is not None and not decided.done:  # never after Spark's commit of it returned; but if so,
        _end(options, [h for h in decided.handles if h[0] == tid], commit=True, batch=decided.batch)  # ours first
    batches = iter(batches)
    first = next((rows for rows in map(list, batches) if rows), None)
    if first is None and thread.run(_describe(client_pool.cluster(options.bootstrap), tid)) != "Ongoing":
        return TxnWrite(query_id, batch_id, partition, None, 0)
    producer = AsyncProducer(options.bootstrap, **_producer_config(options, tid))
    thread.run(producer.start())
    try:
        handle, count = _transact(options, producer, thread, first, batches, batch_id)
    finally:
        thread.run(producer.close(), _TIMEOUT_S)
    return TxnWrite(query_id, batch_id, partition, handle, count)


def _producer_config(options: SinkOptions, tid: str) -> dict:
    config = {"acks": "all", "linger_ms": 5, "batch_size": 262_144, "client_id": "odradek-spark-txn"}
    config.update(dict(options.producer))
    config.update(transactional_id=tid, transaction_timeout_ms=options.transaction_timeout_ms,
                  enable_idempotence=True, acks="all")
    return config


def _transact(options: SinkOptions, producer, thread, first, batches, batch_id: int) -> tuple[tuple | None, int]:
    """init (fencing earlier attempts), begin, send, prepare; on failure abort and raise."""
    thread.run(_call(producer.init_transactions), _TIMEOUT_S)
    if first is None:  # nothing to write: the init fenced (aborted) what an earlier attempt left
        return None, 0
    try:
        thread.run(_call(producer.begin_transaction))
        tally = Tally()
        thread.run(send_some(producer, first, tally))
        for rows in batches:
            thread.run(send_some(producer, rows, tally))
        thread.run(producer.flush())
        failpoints.hit(options.failpoint, "write.before_prepare", batch_id)
        handle = thread.run(_call(producer.prepare_transaction), _TIMEOUT_S)
        if tally.error is not None:
            raise tally.error if isinstance(tally.error, KafkaError) else KafkaError(str(tally.error))
        if tally.acked != tally.sent:
            raise KafkaError(f"{tally.sent - tally.acked} of {tally.sent} records were not acknowledged")
    except BaseException:
        try:  # release the partitions' last stable offset now rather than at the timeout
            thread.run(_call(producer.abort_transaction), 30)
        except Exception:  # noqa: BLE001 - best effort: the next attempt fences it anyway
            pass
        raise
    return tuple(TransactionHandle(*handle)), tally.acked


async def _call(method):
    """``method()`` on the loop, awaited when it is a coroutine (the producer's transaction
    calls that only change its state are plain methods)."""
    result = method()
    return await result if asyncio.isfuture(result) or asyncio.iscoroutine(result) else result


async def _describe(cluster, tid: str) -> str | None:
    """The coordinator's state of ``tid`` (``Ongoing``, ``CompleteCommit``, ...), None when
    it does not know the id."""
    coordinator = GroupCoordinatorClient(cluster, tid, dedicated_connection=False, key_type=TRANSACTION_KEY)

    def error_of(response) -> int:
        return response.transaction_states[0].error_code if response.transaction_states else 0

    response = await coordinator.send(ApiKey.DESCRIBE_TRANSACTIONS, DescribeTransactionsRequest([tid]), error_of,
                                      deadline=cluster.loop.time() + _TIMEOUT_S)
    state = response.transaction_states[0]
    if state.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
        return None
    if state.error_code:
        raise BrokerError(state.error_code, subject=f"transactional id {tid}")
    return state.transaction_state


# --- driver -----------------------------------------------------------------------------
def commit_batch(options: SinkOptions, messages: list, batch_id: int) -> int:
    """Decide and commit batch ``batch_id``; returns how many transactions were committed
    now (a replay of a finished batch: 0)."""
    writes = [m for m in messages if isinstance(m, TxnWrite)]
    if not writes:
        return 0
    query_id = writes[0].query_id
    log = SinkLog(options.bootstrap, options.commit_topic)
    decided = log.read_decision(query_id)
    fresh = tuple(m.handle for m in sorted(writes, key=lambda m: m.partition) if m.handle is not None)
    if decided is not None and decided.batch >= batch_id:
        _end(options, fresh, commit=False)  # a replay's tasks wrote anyway: their output is not the batch's
        if decided.batch > batch_id or decided.done:
            return 0
        return _commit(options, log, query_id, decided, resumed=True)
    if decided is not None and not decided.done:  # an older decision not marked done: finish it first
        _commit(options, log, query_id, decided, resumed=True)
    if any(m.replayed for m in writes):
        raise RuntimeError(f"tasks of batch {batch_id} of query {query_id} found it decided, but the sink log "
                           f"({options.commit_topic}) holds no decision for it")
    failpoints.hit(options.failpoint, "commit.before_decision", batch_id)
    decision = Decision(batch_id, fresh, done=False)
    log.write_decision(query_id, decision)
    return _commit(options, log, query_id, decision, resumed=False)


def _commit(options: SinkOptions, log: SinkLog, query_id: str, decision: Decision, resumed: bool) -> int:
    batch = decision.batch
    failpoints.hit(options.failpoint, "commit.after_decision", batch)
    handles = decision.handles
    half = len(handles) // 2
    if options.failpoint and half:
        _end(options, handles[:half], commit=True, batch=batch)
        failpoints.hit(options.failpoint, "commit.mid_commit", batch)
        _end(options, handles[half:], commit=True, batch=batch)
    else:
        _end(options, handles, commit=True, batch=batch)
    failpoints.hit(options.failpoint, "commit.after_commit", batch)
    log.write_decision(query_id, Decision(batch, handles, done=True))
    failpoints.hit(options.failpoint, "commit.after_done", batch)
    if resumed:
        _log.info("batch %d of query %s: committed the %d transactions decided before", batch, query_id,
                  len(handles))
    return len(handles)


def abort_batch(options: SinkOptions, messages: list, batch_id: int) -> None:
    """Abort the transactions of an undecided batch (Spark's ``abort``)."""
    writes = [m for m in messages if isinstance(m, TxnWrite)]
    handles = tuple(m.handle for m in writes if m.handle is not None)
    if not handles:
        return
    decided = SinkLog(options.bootstrap, options.commit_topic).read_decision(writes[0].query_id)
    if decided is not None and decided.batch >= batch_id:
        _log.warning("batch %d was decided before Spark aborted it: its transactions stay for the replay to "
                     "commit", batch_id)
        return
    try:
        _end(options, handles, commit=False)
    except Exception as e:  # noqa: BLE001 - the transactions time out or are fenced anyway
        _log.warning("aborting batch %d's transactions failed (%s); the next attempt fences them", batch_id, e)


def _end(options: SinkOptions, handles, commit: bool, batch: int | None = None) -> None:
    """EndTxn for every handle, in parallel. Committing, a failure is raised naming the
    transactions whose output is lost; aborting, failures are logged."""
    if not handles:
        return
    cluster = client_pool.cluster(options.bootstrap)
    results = client_pool.loop_thread().run(_end_all(cluster, handles, commit), _TIMEOUT_S + 30)
    failed = [(h, e) for h, e in zip(handles, results) if e is not None]
    if not failed:
        return
    if commit:
        raise RuntimeError(f"batch {batch}: committing {len(failed)} of {len(handles)} transactions failed, "
                           "their output is lost if they were aborted (transaction timeout passed?): "
                           + "; ".join(f"{h[0]} (producer {h[1]} epoch {h[2]}): {e}" for h, e in failed))
    for h, e in failed:
        _log.warning("aborting transaction %s failed: %s", h[0], e)


async def _end_all(cluster, handles, commit: bool) -> list:
    deadline = cluster.loop.time() + _TIMEOUT_S

    async def one(handle) -> BaseException | None:
        coordinator = GroupCoordinatorClient(cluster, handle[0], dedicated_connection=False,
                                             key_type=TRANSACTION_KEY)
        try:
            await send_end_txn(coordinator, TransactionHandle(*handle), commit, deadline)
        except Exception as e:  # noqa: BLE001 - reported by the caller
            return e
        return None

    return list(await asyncio.gather(*(one(h) for h in handles)))
