"""The staged exactly-once sink's commit protocol (``exactlyOnce=staged``; the streaming
default is the transactional sink, ``txn_sink``), run by the driver once Spark has every
task's commit message for a batch.

Spark's own Kafka sink writes from the tasks straight to the target, so a retried task or a
replayed micro-batch writes its records again: at least once. Here tasks only *stage*
(``record_writer.staged``); the driver then, for batch ``b`` of query ``q``:

1. reads ``q``'s state from the sink log (``sink_log``). If ``committed >= b`` the batch was
   published before (Spark replays a batch whose commit it had not recorded when the driver
   died): nothing to do. If an older intent is unfinished, it is finished first.
2. otherwise, unless an intent for ``b`` is already recorded (a publish cut short), records
   one: the staged ranges of the attempts Spark committed, the target partition counts and
   the targets' end offsets. From here on the batch's content is fixed: a replay whose
   tasks staged again is published from the intent's ranges, not the new ones (a
   re-executed shuffle may order rows differently).
3. publishes: every record gets ``odradek.sink = q/b/index`` and a fixed partition; when
   resuming, the indices already present after the intent's start offsets are skipped
   (``publisher``), so each record lands exactly once whatever was cut short, in whatever
   order the idempotent producer's batches landed.
4. records ``committed = b`` (and no intent), then returns; Spark then records its own commit.

Failure at any point leaves either nothing published (before 2), or an intent that the next
attempt completes (2-3), or a committed batch that replays skip (4). A failed task attempt's
staged rows are never published: only the attempts in the commit messages are. Staged rows
stay in the staging topic until its retention removes them.

Limits: the driver holds one micro-batch's output in memory and sends it itself, which suits
aggregated results better than bulk copies; ``exactlyOnce=transactional`` writes from the
tasks in Kafka transactions instead, exactly once for read_committed readers, and
``exactlyOnce=false`` writes from the tasks at least once. Readers see a batch's records as they are published (there
are no transactions to hide a half-published batch), but never twice.
"""

from __future__ import annotations

from odradek.spark import failpoints
from odradek.spark.options import SinkOptions
from odradek.spark.publisher import plan_targets, publish, read_staged
from odradek.spark.record_writer import StagedWrite
from odradek.spark.sink_log import Intent, SinkLog, SinkState

__all__ = ["commit_batch"]


def commit_batch(options: SinkOptions, messages: list, batch_id: int) -> int:
    """Publish batch ``batch_id`` of the query that staged ``messages``; returns how many
    records were sent now (0 for a replay of a published batch)."""
    staged = sorted((m for m in messages if isinstance(m, StagedWrite)), key=lambda m: m.task)
    if not staged:
        return 0
    query_id = staged[0].query_id
    log = SinkLog(options.bootstrap, options.commit_topic)
    state = log.read(query_id)
    if state.committed >= batch_id:
        return 0
    if state.intent is not None and state.intent.batch < batch_id:
        _publish(options, log, query_id, state.intent, resuming=True)
        state = SinkState(state.intent.batch)
    if state.intent is not None and state.intent.batch > batch_id:
        raise RuntimeError(f"sink log of query {query_id} holds batch {state.intent.batch}, "
                           f"after batch {batch_id} that Spark is committing")
    if state.intent is not None:
        return _publish(options, log, query_id, state.intent, resuming=True)
    rows = read_staged(options.bootstrap, options.staging_topic, [m.as_row() for m in staged])
    intent = plan_targets(options.bootstrap, rows, batch_id, [m.as_row() for m in staged])
    log.write(query_id, SinkState(state.committed, intent))
    return _publish(options, log, query_id, intent, resuming=False, rows=rows)


def _publish(options: SinkOptions, log: SinkLog, query_id: str, intent: Intent, resuming: bool,
             rows=None) -> int:
    batch = intent.batch
    failpoints.hit(options.failpoint, "commit.after_intent", batch)
    if rows is None:
        rows = read_staged(options.bootstrap, options.staging_topic, intent.staged)
    sent = publish(options.bootstrap, query_id, intent, rows, resuming, options.producer,
                   halfway=(lambda: failpoints.hit(options.failpoint, "commit.mid_publish", batch))
                   if options.failpoint else None)
    failpoints.hit(options.failpoint, "commit.after_publish", batch)
    log.write(query_id, SinkState(batch, None))
    failpoints.hit(options.failpoint, "commit.after_commit", batch)
    return sent
