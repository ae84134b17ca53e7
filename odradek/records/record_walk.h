/*
 * The record walker of the log validator (_log_validator.c): the per-record framing check of a
 * v2 batch's records section, shared by the produce fast path (validate_and_assign) and the
 * generic path's check_records, so that both accept exactly the same records. Static
 * functions, included by _log_validator.c alone (after Python.h).
 *
 * Byte layout of one record (records/record.py; varints zigzag):
 *
 *     length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
 *     keyLength varint | key | valueLength varint | value | headerCount varint |
 *     [headerKeyLength varint | headerKey | headerValueLength varint | headerValue]*
 *
 * The walk (``walk_records``) accepts a records section when it holds exactly records_count
 * records, each filling its length exactly, with offsetDelta equal to its index (the records
 * stay verbatim, so their offsets must be the ones the batch's base offset gives them), key,
 * value and header lengths of -1 (null) or more that end within the record (header keys 0 or
 * more), and varints as Kafka's ByteUtils reads them: at most 5 bytes for an int32 field and
 * 10 for the timestamp delta, here also with no bit beyond 32 (64) bits, so no value wraps
 * (the Python decoder, records/record.py, reads any such record the same). It also yields
 * the largest record timestamp (base_timestamp + delta; records at -1 or below count as none,
 * as in Kafka's LogValidator) and which record first has it, and finds records without a key
 * for compacted topics. Each record takes at least 7 bytes, so the walk is bounded by the
 * section's size whatever records_count claims.
 */
#ifndef ODRADEK_RECORD_WALK_H
#define ODRADEK_RECORD_WALK_H

#include <Python.h>
#include <stdint.h>

#define NO_TIMESTAMP (-1)

enum {
    MIN_RECORD_BODY = 6, /* attributes, two deltas, two -1 lengths, no headers: a byte each */
};

/* Verdicts of walk_records. */
enum {
    WALK_OK = 0,
    WALK_MALFORMED = 1,    /* record ``index`` is not well formed */
    WALK_OFFSET_DELTA = 2, /* record ``index`` has an offsetDelta other than ``index`` */
    WALK_TOO_FEW = 3,      /* the section ends after ``index`` records, fewer than declared */
    WALK_TOO_MANY = 4,     /* bytes are left after the declared records */
    WALK_NULL_KEY = 5,     /* record ``index`` has no key (compacted topics only) */
};

typedef struct {
    int64_t max_timestamp;  /* NO_TIMESTAMP when no record has one above it */
    int32_t index_of_max;   /* the first record with it; -1 when none */
    int32_t index;          /* the record a verdict other than WALK_OK is about */
} Walk;

/* The varint at p[*pos] ending by ``end``, still zigzag-encoded, of at most
 * ``last_shift / 7 + 1`` bytes, the last of them no greater than ``last_max`` (so that no bit
 * lies beyond the field's width): 1 with *raw set and *pos moved past it, else 0.
 * One byte is read without the loop (its variable shifts), and with ``two`` (a constant once
 * inlined: the walks with a fused CRC) two bytes as well: the lengths and deltas of records of
 * 64 B to 8 KiB and of batches of up to 8,192 records. Measured on a batch of 8,850 records of
 * 100 B in L2 (2026-11-25): the fused walk 8.3 -> 7.3 ns a record with the two-byte path, the
 * walk alone 0.5 ns slower with it, and 0.4 faster with the one-byte path alone, which it keeps. */
static inline int read_raw_varint(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t end, int last_shift,
                                  uint64_t last_max, uint64_t *raw, int two) {
    Py_ssize_t i = *pos;
    if (i >= end)
        return 0;
    uint64_t b = p[i++], value = b & 0x7f;
    if (b < 0x80) {
        *raw = b;
        *pos = i;
        return 1;
    }
    if (two && __builtin_expect(i < end, 1)) {
        uint64_t b1 = p[i];
        if (__builtin_expect(b1 < 0x80, 1)) {
            *raw = value | b1 << 7;
            *pos = i + 1;
            return 1;
        }
    }
    for (int shift = 7; b & 0x80; shift += 7) {
        if (i >= end)
            return 0;
        b = p[i++];
        if (shift == last_shift) {
            if (b > last_max)
                return 0;
            value |= b << shift;
            break;
        }
        value |= (b & 0x7f) << shift;
    }
    *raw = value;
    *pos = i;
    return 1;
}

/* The zigzag varint of an int32 field (at most 5 bytes, the fifth holding only the top 4
 * bits): read_raw_varint's contract, *out the field. */
static inline int read_varint(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t end, int32_t *out, int two) {
    uint64_t raw;
    if (!read_raw_varint(p, pos, end, 28, 0x0f, &raw, two))
        return 0;
    uint32_t bits = (uint32_t)raw;
    *out = (int32_t)((bits >> 1) ^ (0u - (bits & 1)));
    return 1;
}

/* The zigzag varlong (at most 10 bytes, the tenth holding only the top bit). */
static inline int read_varlong(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t end, int64_t *out, int two) {
    uint64_t raw;
    if (!read_raw_varint(p, pos, end, 63, 1, &raw, two))
        return 0;
    *out = (int64_t)((raw >> 1) ^ (0u - (raw & 1)));
    return 1;
}

/* A length-prefixed field (length ``min_length`` or more, -1 meaning null when allowed)
 * ending by ``end``: 1 with *pos past it and *null set, else 0. */
static inline int skip_bytes(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t end, int32_t min_length,
                             int *null, int two) {
    int32_t length;
    if (!read_varint(p, pos, end, &length, two) || length < min_length || length > end - *pos)
        return 0;
    *null = length < 0;
    if (length > 0)
        *pos += length;
    return 1;
}

/* The headers of a record from its header count at p[*pos] to ``end``. */
static int skip_headers(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t end) {
    int32_t count;
    int null;
    /* Each header takes at least two bytes (two lengths), which bounds the loop. */
    if (!read_varint(p, pos, end, &count, 0) || count < 0 || count > (end - *pos) / 2)
        return 0;
    for (int32_t h = 0; h < count; h++) {
        if (!skip_bytes(p, pos, end, 0, &null, 0) || !skip_bytes(p, pos, end, -1, &null, 0))
            return 0;
    }
    return 1;
}

/* Walk the ``count`` records of a section (see the top of this file): a WALK_ verdict, with
 * ``w`` filled. With ``null_keys`` (a list) every record without a key is appended to it by
 * index and the walk goes on (-1 with an exception if appending fails); else, when
 * ``compacted``, the first such record ends the walk with WALK_NULL_KEY. */
static inline void walk_no_step(void *state) { (void)state; }

/* walk_records with ``step(state)`` called at the start of each record (the fused CRC-32C of
 * crc32c_fused.h): inlined into each caller with its step, which is inlined in turn; ``two``:
 * read_raw_varint's two-byte path. */
static inline __attribute__((always_inline)) int walk_core(const unsigned char *p, Py_ssize_t len, int32_t count,
                                                           int64_t base_timestamp, int compacted,
                                                           PyObject *null_keys, Walk *w, void (*step)(void *),
                                                           void *state, int two) {
    /* Locals, not w's fields, in the loop: stores through ``w`` could alias ``p``. */
    Py_ssize_t pos = 0;
    int64_t max_timestamp = NO_TIMESTAMP;
    int32_t index_of_max = -1, i = 0;
    int verdict = WALK_OK;
    for (; i < count; i++) {
        step(state);
        int32_t length, offset_delta;
        int64_t timestamp_delta;
        int null_key, null_value;
        if (pos >= len) {
            verdict = WALK_TOO_FEW;
            break;
        }
        if (!read_varint(p, &pos, len, &length, two) || length < MIN_RECORD_BODY || length > len - pos) {
            verdict = WALK_MALFORMED;
            break;
        }
        Py_ssize_t end = pos + length;
        pos++; /* attributes: unused */
        if (!read_varlong(p, &pos, end, &timestamp_delta, two) || !read_varint(p, &pos, end, &offset_delta, two)
            || !skip_bytes(p, &pos, end, -1, &null_key, two) || !skip_bytes(p, &pos, end, -1, &null_value, two)) {
            verdict = WALK_MALFORMED;
            break;
        }
        if (pos + 1 == end && p[pos] == 0) /* no headers: nearly every record (pos < end first) */
            pos = end;
        else if (!skip_headers(p, &pos, end) || pos != end) {
            verdict = WALK_MALFORMED;
            break;
        }
        if (offset_delta != i) {
            verdict = WALK_OFFSET_DELTA;
            break;
        }
        if (null_key && compacted) {
            if (null_keys == NULL) {
                verdict = WALK_NULL_KEY;
                break;
            }
            PyObject *index = PyLong_FromLong(i);
            if (index == NULL || PyList_Append(null_keys, index) < 0) {
                Py_XDECREF(index);
                return -1;
            }
            Py_DECREF(index);
        }
        /* Java's long addition: wraps (only for timestamps no clock gives). */
        int64_t timestamp = (int64_t)((uint64_t)base_timestamp + (uint64_t)timestamp_delta);
        if (timestamp > max_timestamp) {
            max_timestamp = timestamp;
            index_of_max = i;
        }
    }
    if (verdict == WALK_OK && pos != len)
        verdict = WALK_TOO_MANY;
    w->max_timestamp = max_timestamp;
    w->index_of_max = index_of_max;
    w->index = i;
    return verdict;
}

static int walk_records(const unsigned char *p, Py_ssize_t len, int32_t count, int64_t base_timestamp,
                        int compacted, PyObject *null_keys, Walk *w) {
    return walk_core(p, len, count, base_timestamp, compacted, null_keys, w, walk_no_step, NULL, 0);
}

#endif /* ODRADEK_RECORD_WALK_H */
