"""``MarkerWrite``: one partition's transaction marker to write, and its outcome.

The transaction coordinator makes them for the partitions its own broker leads
(``marker_channel.py``, through ``broker.write_txn_markers``), the WriteTxnMarkers handler for
the markers other coordinators send (``server/handlers/write_txn_markers.py``); both are
written by ``server/txn_marker_writer.write_markers``, which sets ``error`` (and ``offset``).
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.protocol.generated.error_codes import ErrorCode


@dataclass(slots=True)
class MarkerWrite:
    """One partition's COMMIT (``commit``) or ABORT marker for one producer; ``error`` is
    NONE until written, then the partition's answer."""

    topic: str
    index: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    error: ErrorCode = ErrorCode.NONE
    offset: int = -1  # the marker's offset once appended
