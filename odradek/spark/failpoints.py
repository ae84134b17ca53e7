"""Failure injection for the sink's tests: named points that raise when the option asks.

The sink option ``failpoint`` holds ``<point>@<batch id>[:hang]`` items separated by commas
(for example ``write.after_stage@0,commit.mid_publish@1``); when the sink reaches a named point
while handling that batch it raises ``InjectedFailure``; with ``:hang`` it appends the point's
name to the file ``$ODRADEK_FAILPOINT_MARKER`` (when set) and sleeps for ever, for a test to
kill the job there (kill -9); with ``:exit`` the process ends at once (``os._exit``), as a
Python worker killed mid-task, without any cleanup. Task points (``write.*``) fire only in the first attempt of the
task of Spark partition 0, so Spark's retry of the task goes through. Without the option
(the only case outside tests) ``hit`` does nothing.

Points of the staged sink: ``write.after_stage`` (the task's rows staged and acknowledged),
``commit.after_intent`` (the intent recorded, nothing published), ``commit.mid_publish`` (about
half the records published and acknowledged), ``commit.after_publish`` (all published, batch
not yet marked committed), ``commit.after_commit`` (marked committed, Spark not yet told).

Points of the transactional sink: ``write.before_prepare`` (the task's rows acknowledged in its
open transaction), ``commit.before_decision`` (every task prepared, nothing decided),
``commit.after_decision`` (the decision recorded, nothing committed), ``commit.mid_commit``
(about half the batch's transactions committed), ``commit.after_commit`` (all committed, not
yet marked done), ``commit.after_done`` (marked done, Spark not yet told).
"""

from __future__ import annotations

import os
import time

__all__ = ["InjectedFailure", "hit"]


class InjectedFailure(RuntimeError):
    """Raised at a failure point the ``failpoint`` option named."""


def hit(spec: str | None, point: str, batch_id: int) -> None:
    if not spec:
        return
    items = [item for item in spec.split(",") if _matches(item, point, batch_id)]
    if not items:
        return
    if point.startswith("write."):
        from pyspark import TaskContext

        context = TaskContext.get()
        if context is None or context.partitionId() != 0 or context.attemptNumber() != 0:
            return
    actions = {item.strip().rpartition(":")[2] for item in items if ":" in item}
    if "hang" in actions:
        _hang(point, batch_id)
    if "exit" in actions:
        os._exit(17)
    raise InjectedFailure(f"injected failure at {point} of batch {batch_id}")


def _hang(point: str, batch_id: int) -> None:
    marker = os.environ.get("ODRADEK_FAILPOINT_MARKER")
    if marker:
        with open(marker, "a") as f:
            f.write(f"{point}@{batch_id}\n")
    while True:
        time.sleep(3600)


def _matches(item: str, point: str, batch_id: int) -> bool:
    name, _, batch = item.strip().removesuffix(":hang").removesuffix(":exit").partition("@")
    return name == point and (not batch or int(batch) == batch_id)
