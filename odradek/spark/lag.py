"""How far a streaming query is behind the end of its topics: Spark's Kafka source's lag
metrics, computed from a progress report.

Spark's Kafka source puts ``minOffsetsBehindLatest``, ``maxOffsetsBehindLatest`` and
``avgOffsetsBehindLatest`` into each source's ``metrics`` in ``StreamingQueryProgress``
(``ReportsSourceMetrics``). The Python Data Source API (pyspark 4.3) has no such hook: the
JVM side of a Python stream source reports no metrics, so that map stays empty. What the
progress does carry is the source's ``endOffset`` (where the micro-batch ended) and its
``latestOffset`` (the end of each partition when it was planned, from
``StreamReader.reportLatestOffset``); ``offsets_behind_latest`` turns them into the same
three metrics, as strings, as Spark reports them:

    progress = query.lastProgress
    lag = offsets_behind_latest(progress["sources"][0])
    # {"minOffsetsBehindLatest": "0", "maxOffsetsBehindLatest": "120", "avgOffsetsBehindLatest": "40.0"}

The lag of a partition is its latest offset minus the offset the batch ended at (never
below 0); a partition the batch did not reach yet counts from offset 0.
"""

from __future__ import annotations

import json

from odradek.spark.offsets import from_offset_dict

__all__ = ["offsets_behind_latest"]


def _field(source, name: str):
    value = source[name] if isinstance(source, dict) else getattr(source, name, None)
    if isinstance(value, str):
        value = json.loads(value)
    return value


def offsets_behind_latest(source) -> dict[str, str] | None:
    """The lag metrics of one source's progress (a ``SourceProgress`` or its dict from the
    progress's JSON); None when the progress has no latest offsets (no batch planned)."""
    latest, end = _field(source, "latestOffset"), _field(source, "endOffset")
    if not latest:
        return None
    ends = from_offset_dict(end or {})
    behind = [max(o - ends.get(tp, 0), 0) for tp, o in from_offset_dict(latest).items()]
    if not behind:
        return None
    return {"minOffsetsBehindLatest": str(min(behind)), "maxOffsetsBehindLatest": str(max(behind)),
            "avgOffsetsBehindLatest": str(sum(behind) / len(behind))}
