"""Failure injection for the sink's tests: named points that raise when the option asks.

The sink option ``failpoint`` holds ``<point>@<batch id>`` items separated by commas (for
example ``write.after_stage@0,commit.mid_publish@1``); when the sink reaches a named point
while handling that batch it raises ``InjectedFailure``. Task points (``write.*``) fire only in the first attempt of the
task of Spark partition 0, so Spark's retry of the task goes through. Without the option
(the only case outside tests) ``hit`` does nothing.

Points: ``write.after_stage`` (the task's rows staged and acknowledged), ``commit.after_intent`` (the
intent recorded, nothing published), ``commit.mid_publish`` (about half the records
published and acknowledged), ``commit.after_publish`` (all published, batch not yet marked
committed), ``commit.after_commit`` (marked committed, Spark not yet told).
"""

from __future__ import annotations

__all__ = ["InjectedFailure", "hit"]


class InjectedFailure(RuntimeError):
    """Raised at a failure point the ``failpoint`` option named."""


def hit(spec: str | None, point: str, batch_id: int) -> None:
    if not spec or not any(_matches(item, point, batch_id) for item in spec.split(",")):
        return
    if point.startswith("write."):
        from pyspark import TaskContext

        context = TaskContext.get()
        if context is None or context.partitionId() != 0 or context.attemptNumber() != 0:
            return
    raise InjectedFailure(f"injected failure at {point} of batch {batch_id}")


def _matches(item: str, point: str, batch_id: int) -> bool:
    name, _, batch = item.strip().partition("@")
    return name == point and (not batch or int(batch) == batch_id)
