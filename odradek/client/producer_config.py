"""What the producer's Kafka-named settings mean: ``acks`` and ``compression_type`` values,
and when idempotence is on (Kafka 3+: by default whenever acks="all" allows it)."""

from __future__ import annotations

from odradek.client.sender import MAX_IN_FLIGHT_IDEMPOTENT
from odradek.records import compression as codecs

__all__ = ["ACKS", "COMPRESSION_TYPES", "idempotence"]

COMPRESSION_TYPES = {"none": codecs.NONE, "gzip": codecs.GZIP, "snappy": codecs.SNAPPY,
                     "lz4": codecs.LZ4, "zstd": codecs.ZSTD}
ACKS = {"all": -1, "-1": -1, -1: -1, "1": 1, 1: 1, "0": 0, 0: 0}


def idempotence(wanted: bool | None, acks: int, retries: int, max_in_flight: int) -> bool | None:
    """The idempotence setting: an explicit True must be possible; None (the default) stays
    None ("if the broker can") only where Kafka's default would turn it on."""
    possible = acks == -1 and retries > 0 and max_in_flight <= MAX_IN_FLIGHT_IDEMPOTENT
    if wanted and not possible:
        raise ValueError("enable_idempotence requires acks='all', retries > 0 and at most "
                         f"{MAX_IN_FLIGHT_IDEMPOTENT} requests in flight")
    if wanted is None and not possible:
        return False
    return wanted
