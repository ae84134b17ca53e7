/*
 * Wire readers of the Produce codec (_produce_codec.c): a cursor over one request frame and
 * the reads of Kafka's protocol primitives from it (int16, int32, uvarint, lengths, counts,
 * tagged-field sections; Kafka's ``Readable``), in the non-flexible and flexible (KIP-482)
 * encodings. Each returns 1 on success and 0 when the bytes are not of the accepted shape,
 * and never reads past the cursor's end. Static functions, included by _produce_codec.c alone
 * (after Python.h), where parse_request and within_entry_budget both read with them.
 */
#ifndef ODRADEK_WIRE_READER_H
#define ODRADEK_WIRE_READER_H

#include <Python.h>
#include <stdint.h>

typedef struct {
    const unsigned char *pos;
    const unsigned char *end;
} cursor;

static inline Py_ssize_t remaining(const cursor *c) { return c->end - c->pos; }

static inline int read_i16(cursor *c, int16_t *out) {
    if (remaining(c) < 2)
        return 0;
    *out = (int16_t)(uint16_t)((c->pos[0] << 8) | c->pos[1]);
    c->pos += 2;
    return 1;
}

static inline int read_i32(cursor *c, int32_t *out) {
    if (remaining(c) < 4)
        return 0;
    const unsigned char *p = c->pos;
    *out = (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
    c->pos += 4;
    return 1;
}

/* An unsigned varint of at most 5 bytes (so at most 35 bits, as varint.read_uvarint takes
 * it: accepting no more than the generic reader keeps every tuple we return one it agrees
 * with). */
static inline int read_uvarint(cursor *c, uint64_t *out) {
    uint64_t value = 0;
    for (int shift = 0; shift < 35; shift += 7) {
        if (c->pos >= c->end)
            return 0;
        unsigned char b = *c->pos++;
        value |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) {
            *out = value;
            return 1;
        }
    }
    return 0;
}

/* A length or count as the wire holds it, unchecked: uvarint n + 1 when flexible (so 0
 * reads as -1, null), else int32 (`wide`) or int16. */
static int read_length(cursor *c, int flexible, int wide, int64_t *n) {
    if (flexible) {
        uint64_t u;
        if (!read_uvarint(c, &u))
            return 0;
        *n = (int64_t)u - 1;
    } else if (wide) {
        int32_t i;
        if (!read_i32(c, &i))
            return 0;
        *n = i;
    } else {
        int16_t h;
        if (!read_i16(c, &h))
            return 0;
        *n = h;
    }
    return 1;
}

/* A length-prefixed field's start and length; *len is -1 for null. Non-flexible: int16
 * (strings) or int32 (records) length, -1 null, other negatives refused. Flexible: uvarint
 * length + 1, 0 null. A length running past the frame is refused here, before anything is
 * made of it. */
static int read_span(cursor *c, int flexible, int wide, const unsigned char **start, Py_ssize_t *len) {
    int64_t n;
    if (!read_length(c, flexible, wide, &n))
        return 0;
    if (n < -1 || n > remaining(c))
        return 0;
    *start = c->pos;
    *len = (Py_ssize_t)n;
    if (n > 0)
        c->pos += n;
    return 1;
}

/* An array's element count: null (-1 / compact 0) and negative counts are refused, and so
 * is a count that `min_size`-byte elements could not fit in what remains of the frame (every
 * element is at least that long), which bounds the tuple allocated for them. */
static int read_count(cursor *c, int flexible, Py_ssize_t min_size, Py_ssize_t *out) {
    int64_t n;
    if (!read_length(c, flexible, 1, &n))
        return 0;
    if (n < 0 || n > remaining(c) / min_size)
        return 0;
    *out = (Py_ssize_t)n;
    return 1;
}

/* Skip a tagged-field section. Each field takes at least 2 bytes, so even a huge count
 * ends at the frame's end after at most len/2 rounds. */
static int skip_tagged_fields(cursor *c) {
    uint64_t count, tag, size;
    if (!read_uvarint(c, &count))
        return 0;
    for (uint64_t i = 0; i < count; i++) {
        if (!read_uvarint(c, &tag) || !read_uvarint(c, &size) || size > (uint64_t)remaining(c))
            return 0;
        c->pos += size;
    }
    return 1;
}

#endif /* ODRADEK_WIRE_READER_H */
