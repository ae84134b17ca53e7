"""The broker's periodic work, each an asyncio task that runs until cancelled.

- retention (``log.retention.check.interval.ms``): delete segments past ``retention.ms`` /
  ``retention.bytes``, erase retired files;
- flush (``log.flush.scheduler.interval.ms``): run the flushes the policy asks for, each fsync
  in a worker thread so the event loop (and every other partition) keeps appending;
- checkpoints (``log.flush.offset.checkpoint.interval.ms``): recovery points and log start
  offsets;
- deleted logs (every ``DELETED_DIRS_CHECK_MS``): erase deleted partitions' directories
  ``file.delete.delay.ms`` after their deletion;
- cleaner (``log.cleaner.backoff.ms``): compact ``cleanup.policy=compact`` logs in a worker
  thread;
- unhosted roles (every ``UNHOSTED_ROLES_RETRY_MS``): take the roles LeaderAndIsr gave
  whose log could not be created (a full disk), once it can be
  (``state_change.retry_unhosted_roles``);
- ISR expiration (every ``replica.lag.time.max.ms`` / 2): led partitions drop followers
  that lag (``ReplicaManager.maybe_shrink_isrs``), through the alter-partition manager;
- high watermark checkpoint (``replica.high.watermark.checkpoint.interval.ms``):
  ``replication-offset-checkpoint`` in each log directory, when a partition changed since;
- producer ids (``producer.id.expiration.check.interval.ms``): forget the idempotent
  producers silent for ``producer.id.expiration.ms``, so their state does not grow forever;
- idle connections (``connections.max.idle.ms``), and receive buffers of quiet ones.

``log.cleaner.backoff.ms`` and ``producer.id.expiration.ms`` are dynamic broker configs in
Kafka: they are read from ``Broker.effective_config()`` at every pass, so a change made with
AlterConfigs applies from the next pass on.
"""

from __future__ import annotations

import asyncio
import logging
import time

from odradek.replication.state_change import retry_unhosted_roles

log = logging.getLogger("odradek.background")

# A connection silent this long gives back a receive buffer grown for big requests; the idle
# sweep runs at least this often.
QUIET_S = 5.0


def background_tasks(broker):
    cfg = broker.config
    yield _every(cfg["log.retention.check.interval.ms"], lambda: _retention(broker), "retention")
    yield _every(cfg["log.flush.scheduler.interval.ms"], lambda: _flush(broker), "flush")
    # Deleted topics' directories go file.delete.delay.ms after their deletion (Kafka's
    # scheduler), not at the next retention pass, which may be minutes later.
    yield _every(DELETED_DIRS_CHECK_MS, lambda: _in_thread(broker.log_manager.remove_deleted_dirs,
                                                           broker.clock.milliseconds()), "deleted logs")
    yield _every(cfg["log.flush.offset.checkpoint.interval.ms"] or 60000,
                 lambda: _in_thread(broker.log_manager.checkpoint), "checkpoint")
    if cfg["log.cleaner.enable"]:
        yield _every(lambda: broker.effective_config()["log.cleaner.backoff.ms"], lambda: _clean(broker), "cleaner")
    yield _every(UNHOSTED_ROLES_RETRY_MS, lambda: _retry_unhosted_roles(broker), "unhosted roles retry")
    yield _every(max(cfg["replica.lag.time.max.ms"] // 2, 1), lambda: _shrink_isrs(broker), "ISR expiration")
    yield _every(cfg["replica.high.watermark.checkpoint.interval.ms"],
                 lambda: _checkpoint_high_watermarks(broker), "high watermark checkpoint")
    yield _every(cfg["producer.id.expiration.check.interval.ms"], lambda: _expire_producers(broker),
                 "producer id expiration")
    idle_ms = cfg["connections.max.idle.ms"]
    # Every half of the idle time (at most QUIET_S): a connection is shrunk (at a quarter of
    # it) before it can be closed.
    yield _every(min(idle_ms / 2, QUIET_S * 1000) if idle_ms > 0 else QUIET_S * 1000,
                 lambda: _sweep_idle(broker, idle_ms / 1000), "idle connections")


async def _every(interval_ms, step, name: str) -> None:
    """Run ``step`` every ``interval_ms`` (an int, or a function read before each wait)."""
    while True:
        await asyncio.sleep((interval_ms() if callable(interval_ms) else interval_ms) / 1000)
        try:
            result = step()
            if asyncio.iscoroutine(result):
                await result
        except asyncio.CancelledError:
            raise
        except OSError as e:  # a full or failing disk: one line, no traceback, every pass
            log.error("%s pass failed: %s", name, e)
        except Exception:
            log.exception("%s pass failed", name)


# How often the roles whose log could not be created (a full disk) are tried again. The
# controller does not act on a LeaderAndIsr's KAFKA_STORAGE_ERROR (Kafka's would count the
# replica offline until the broker restarts); this broker takes the role once it can.
UNHOSTED_ROLES_RETRY_MS = 5_000


async def _retry_unhosted_roles(broker) -> None:
    if broker.replica_manager.unhosted_roles:  # (cheap when none wait: no lock taken)
        await retry_unhosted_roles(broker)


def _shrink_isrs(broker) -> None:
    """Kafka's ``isr-expiration`` task: each ISR change goes to the controller."""
    for part in broker.replica_manager.maybe_shrink_isrs(broker.clock.milliseconds()):
        broker.alter_partitions.submit(part)


# How often directories of deleted partitions are checked for erasure.
DELETED_DIRS_CHECK_MS = 2_000


async def _in_thread(fn, *args):
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


async def _retention(broker) -> None:
    now = broker.clock.milliseconds()
    # Retention stops at each partition's high watermark (what the ISR does not hold yet stays).
    partitions = list(broker.replica_manager.partitions.items())
    high_watermarks = {key: part.high_watermark for key, part in partitions}
    starts = {key: part.log_start_offset for key, part in partitions}
    deleted = broker.log_manager.run_retention(now, high_watermarks)
    broker.log_manager.remove_deleted(now)
    if deleted:
        log.info("retention deleted %d segment(s)", deleted)
        for key, part in partitions:  # fetch sessions answer a moved log start (server/fetch_session_changes.py)
            if part.log_start_offset != starts[key]:
                broker.replica_manager.notify(key)


async def _checkpoint_high_watermarks(broker) -> None:
    """Nothing to read or write when no partition changed since the last pass
    (``ReplicaManager.high_watermarks_if_changed``): an idle broker's pass is O(1)."""
    entries = broker.replica_manager.high_watermarks_if_changed()
    if entries is not None:
        await _in_thread(broker.replica_manager.checkpoint_high_watermarks, entries)


async def _flush(broker) -> None:
    for task in broker.log_manager.flush_due(broker.clock.milliseconds()):
        await _in_thread(task.run)


def _expire_producers(broker) -> None:
    expired = broker.replica_manager.expire_producers(broker.clock.milliseconds(),
                                                      broker.effective_config()["producer.id.expiration.ms"])
    if expired:
        log.info("expired %d producer id(s) silent for producer.id.expiration.ms", expired)


async def _clean(broker) -> None:
    await _in_thread(broker.log_manager.run_cleaner, broker.clock.milliseconds())


def _sweep_idle(broker, idle_s: float) -> None:
    """Close the connections that neither sent nor received for ``idle_s`` (when positive):
    those with no request pending, and those whose peer stopped reading our responses
    (writing paused), so that it cannot hold its queue and a half-sent request's memory
    reservation for ever. Connections quiet for a quarter of that (at most QUIET_S) give
    back a receive buffer grown for big requests (``FrameParser.shrink``)."""
    now = time.monotonic()
    quiet_s = min(idle_s / 4, QUIET_S) if idle_s > 0 else QUIET_S
    for conn in list(broker.connections):
        silent = now - conn.last_active
        if silent > quiet_s:
            conn.parser.shrink()
        if idle_s <= 0:
            continue
        if (not conn.pending or conn.writing_paused) and silent > idle_s:
            stuck = conn.writing_paused
            conn.close(f"idle for more than {idle_s:.0f} s (connections.max.idle.ms)", logging.DEBUG)
            if stuck and conn.transport is not None:
                conn.transport.abort()  # (close would wait to flush what the peer never reads)
