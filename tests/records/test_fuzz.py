"""Mutation fuzzing of everything the reader decodes: v2 batches of every codec, control
batches, legacy message sets and wrappers. Most mutants are re-signed (CRC recomputed) so
that they get past the checksum into decompression and record decoding. Whatever the input,
the reader may only return records or raise CorruptRecordError, within bounded memory."""

import random
import struct
import tracemalloc
import zlib

from odradek.records import compression as codecs
from odradek.records.batch import BATCH_HEADER_SIZE, read_header, update_crc, write_header
from odradek.records.control import COMMIT, build_end_txn_marker_batch
from odradek.records.errors import CorruptRecordError
from odradek.records.legacy import build_message_set
from odradek.records.reader import iter_batches
from tests.records.strategies import CODECS, LEGACY_CODECS, sample_batch, sample_records

CASES = 3000
MAX_DECOMPRESSED = 1 << 20
INTERESTING_INT32 = [0, 1, -1, -2, 0x7F, 0x80, 0xFFFF, 2**31 - 1, -(2**31), 61, 49]


def seeds() -> list[bytes]:
    corpus = [sample_batch(codec, count) for codec in CODECS for count in (1, 7)]
    corpus.append(build_end_txn_marker_batch(COMMIT, 3, producer_id=1, producer_epoch=0,
                                             timestamp=5))
    legacy = sample_records(5, headers=False)
    corpus += [build_message_set(legacy, magic, codec)
               for magic in (0, 1) for codec in LEGACY_CODECS]
    corpus.append(corpus[0] + corpus[3])
    return corpus


def mutate(rng: random.Random, data: bytes, corpus: list[bytes]) -> bytearray:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(7)
        pos = rng.randrange(len(buf) + 1)
        if op == 0 and buf:
            buf[pos % len(buf)] ^= 1 << rng.randrange(8)
        elif op == 1 and buf:
            buf[pos % len(buf)] = rng.randrange(256)
        elif op == 2:
            buf[pos:pos] = rng.randbytes(rng.randint(1, 8))
        elif op == 3:
            del buf[pos : pos + rng.randint(1, 16)]
        elif op == 4 and len(buf) >= pos + 4:
            struct.pack_into(">i", buf, pos, rng.choice(INTERESTING_INT32))
        elif op == 5:
            other = rng.choice(corpus)
            cut = rng.randrange(len(other) + 1)
            buf[pos:] = other[cut:]
        else:
            del buf[pos:]
    return buf


def resign(rng: random.Random, buf: bytearray) -> None:
    """Recompute the first entry's checksum so the mutant is judged on its contents, and
    mostly make its length cover the whole buffer, lest a cut entry be skipped as partial."""
    if len(buf) < 17:
        return
    if rng.random() < 0.9:
        struct.pack_into(">i", buf, 8, len(buf) - 12)
    if buf[16] == 2 and len(buf) >= BATCH_HEADER_SIZE:
        end = min(len(buf), 12 + max(struct.unpack_from(">i", buf, 8)[0], 0))
        if end > 21:
            update_crc(buf, 0, end)
    elif buf[16] in (0, 1):
        end = min(len(buf), 12 + max(struct.unpack_from(">i", buf, 8)[0], 0))
        if end > 16:
            struct.pack_into(">I", buf, 12, zlib.crc32(buf[16:end]))


def mutated_inner_batch(rng: random.Random, corpus: list[bytes]) -> bytearray:
    """A valid header around mutated record bytes, compressed with a random codec."""
    plain = sample_batch(codecs.NONE, rng.randint(1, 7))
    header = read_header(plain)
    codec = rng.choice(CODECS)
    body = codecs.compress(codec, mutate(rng, plain[BATCH_HEADER_SIZE:], corpus))
    buf = bytearray(BATCH_HEADER_SIZE) + body
    write_header(buf, 0, header._replace(batch_length=len(buf) - 12, attributes=codec))
    update_crc(buf, 0, len(buf))
    return buf


def decode_all(buf: bytes) -> int:
    count = 0
    for batch in iter_batches(buf):
        count += len(batch.records(MAX_DECOMPRESSED))
    return count


def test_mutated_inputs_only_decode_or_raise_corrupt_record_error():
    rng = random.Random(20240611)
    corpus = seeds()
    outcomes = {"decoded": 0, "corrupt": 0}
    tracemalloc.start()
    try:
        for case in range(CASES):
            if case % 4 == 0:
                buf = mutated_inner_batch(rng, corpus)
            else:
                buf = mutate(rng, rng.choice(corpus), corpus)
                if rng.random() < 0.9:
                    resign(rng, buf)
            try:
                decode_all(bytes(buf))
                outcomes["decoded"] += 1
            except CorruptRecordError:
                outcomes["corrupt"] += 1
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * MAX_DECOMPRESSED
    # The mutants must exercise both outcomes, or the fuzzer tests nothing.
    assert outcomes["decoded"] > CASES // 10 and outcomes["corrupt"] > CASES // 3
