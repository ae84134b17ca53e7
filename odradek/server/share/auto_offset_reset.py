"""share.auto.offset.reset: where a share-partition never initialized starts (KIP-932).

The persister answers start offset -1 for a share-partition whose state was never written;
the share partition then starts at (Kafka's ShareGroupAutoOffsetResetStrategy):

    "latest"                  the high watermark (the next offset produced is the first
                              delivered); the default
    "earliest"                the log start offset
    "by_duration:<duration>"  the first offset whose timestamp is at or after now minus the
                              duration, the high watermark when there is none; the duration is
                              ISO-8601 as Java's Duration.parse reads it: ``PnDTnHnMn.nS``,
                              e.g. "by_duration:PT1H30M", "by_duration:P1D"

``offset_for_timestamp(ts_ms)`` is ListOffsets' lookup (None: no such offset).
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["parse_duration_ms", "reset_start_offset"]

_DURATION = re.compile(
    r"P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d{1,9})?)S)?)?",
    re.IGNORECASE)


def parse_duration_ms(text: str) -> int:
    """Milliseconds of an ISO-8601 ``PnDTnHnMn.nS`` duration (no sign: a reset looks back)."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or text.strip().upper() in ("P", "PT") or text.strip().upper().endswith("T"):
        raise ValueError(f"invalid duration {text!r}")
    days, hours, minutes = (int(match[g] or 0) for g in ("d", "h", "m"))
    seconds = float(match["s"] or 0)
    return ((days * 24 + hours) * 60 + minutes) * 60_000 + round(seconds * 1000)


def reset_start_offset(strategy: str, *, log_start_offset: int, high_watermark: int, now_ms: int,
                       offset_for_timestamp: Callable[[int], int | None] | None = None) -> int:
    """The start offset share.auto.offset.reset ``strategy`` picks."""
    name = strategy.strip().lower()
    if name == "latest":
        return high_watermark
    if name == "earliest":
        return log_start_offset
    if name.startswith("by_duration:"):
        if offset_for_timestamp is None:
            raise ValueError("by_duration needs an offset_for_timestamp lookup")
        found = offset_for_timestamp(now_ms - parse_duration_ms(strategy.split(":", 1)[1]))
        return high_watermark if found is None else max(found, log_start_offset)
    raise ValueError(f"invalid share.auto.offset.reset {strategy!r}")
