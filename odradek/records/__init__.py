"""Record batches (magic 2) and legacy message sets (magic 0/1): bytes in, values out.

- ``batch``: the 61-byte v2 header view, CRC-32C validation, in-place offset patching.
- ``record``: one record's encoding and the decoding loop.
- ``builder``: building batches; ``control``: transaction marker records and batches.
- ``reader``: iterating the batches and records of a fetch response's records.
- ``compression``: the codecs (gzip, snappy, lz4, zstd), bounded on decompression.
- ``legacy`` and ``conversion``: message sets v0/v1 and their conversion to and from v2.
- ``log_validator`` and ``_log_validator.c``: Kafka's LogValidator checks of produced batches
  (every record's framing, codecs, bounded decompression, keys on compacted topics, the max
  timestamp), one C record walk for both produce paths.
"""
