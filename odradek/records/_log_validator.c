/*
 * The log validator in C: Kafka's LogValidator checks on produced v2 batches, for both produce
 * paths. ``validate_and_assign`` is the produce fast path's one call per partition: check the
 * batches (header, CRC-32C, every record's framing) and assign their offsets. ``check_records``
 * is the record walk alone, which the generic Python path (replication/partition.py,
 * records/log_validator.py) runs on each batch's records section, decompressed where needed.
 * Both use one walker (record_walk.h, where the record layout and the walk are described), so
 * both paths accept exactly the same records.
 *
 * Byte layout of one v2 batch (records/batch.py; integers big-endian):
 *
 *     offset size field                   offset size field
 *          0    8 base_offset                 27    8 base_timestamp
 *          8    4 batch_length                35    8 max_timestamp
 *         12    4 partition_leader_epoch      43    8 producer_id
 *         16    1 magic (2)                   51    2 producer_epoch
 *         17    4 crc (CRC-32C of 21..end)    53    4 base_sequence
 *         21    2 attributes                  57    4 records_count
 *         23    4 last_offset_delta           61    … records
 *
 * Contract of validate_and_assign(records, base_offset, leader_epoch, max_message_bytes,
 *     min_timestamp, max_timestamp, decompress, compacted)
 *     -> (first_offset, last_offset, max_timestamp, offset_of_max_timestamp) | None:
 *
 * ``records`` is a writable contiguous buffer holding whole v2 batches back to back (else
 * TypeError); the integers must fit int64 (``leader_epoch`` int32), else OverflowError.
 * ``min_timestamp``/``max_timestamp`` bound the batches' base timestamps and their largest
 * record timestamps (-1, no timestamp, is never checked); the caller clamps an unlimited bound
 * to INT64_MIN/INT64_MAX, which is exact. ``decompress(codec, memoryview)`` returns a
 * compressed batch's records section as a bytes-like object, or None to leave the batch to
 * the generic path (corrupt, or too large to decompress here). ``compacted``: a record
 * without a key is refused.
 *
 * Pass 1 reads every header, CRC and record and writes nothing; the answer is None when a
 * batch is corrupt or invalid, too large, out of the timestamp bounds, a control batch,
 * idempotent or transactional (producer state lives in Python), of an unknown codec, when the
 * first magic is not 2 (Python converts legacy message sets), when ``base_offset`` is negative
 * or the last offset would not fit an int64. Pass 2 writes what pass 1 planned, from the sizes
 * and values pass 1 checked (never re-read from the buffer, whose bytes another thread could
 * change while crc32c or ``decompress`` released the GIL: the buffer's length cannot change
 * while exported, so those sizes stay within it): each batch's base_offset and
 * partition_leader_epoch (outside the CRC), and, where the header's max_timestamp differs from
 * its records' (sarama writes -1), the max_timestamp and the CRC computed for it in pass 1.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "crc32c_fused.h"
#include "record_walk.h"

enum {
    BASE_OFFSET = 0,
    BATCH_LENGTH = 8,
    LEADER_EPOCH = 12,
    MAGIC = 16,
    CRC = 17,
    ATTRIBUTES = 21,
    LAST_OFFSET_DELTA = 23,
    BASE_TIMESTAMP = 27,
    MAX_TIMESTAMP = 35,
    PRODUCER_ID = 43,
    RECORDS_COUNT = 57,
    HEADER_SIZE = 61,
    LOG_OVERHEAD = 12, /* base_offset + batch_length: what batch_length does not count */
    MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD, /* a header without records */
    PLANS_ON_STACK = 16,
};

#define COMPRESSION_MASK 0x07
#define MAX_CODEC 4 /* zstd */
#define TRANSACTIONAL_BIT 0x10
#define CONTROL_BIT 0x20
#define NO_PRODUCER_ID (-1)

/* crc32c.crc32c, looked up once at import: the package's slice-by-8/SSE4.2 code runs at
 * ~24 GB/s, several times a plain C loop. */
static PyObject *crc32c_func;

typedef struct {
    int64_t base_offset;
    int32_t leader_epoch;
    int64_t max_message_bytes;
    int64_t min_timestamp;
    int64_t max_timestamp;
    PyObject *decompress;
    int compacted;
} Limits;

typedef struct {
    int64_t last_offset;
    int64_t max_timestamp;
    int64_t offset_of_max_timestamp;
} Summary;

/* What pass 2 writes to one batch, all checked in pass 1. */
typedef struct {
    Py_ssize_t size;
    int64_t next_base;     /* the base offset of the batch after this one */
    int64_t max_timestamp; /* of its records */
    uint32_t crc;          /* with that max_timestamp */
    int patch_max;         /* the header's max_timestamp differs */
} Plan;

typedef struct {
    Plan *items;
    Py_ssize_t count, capacity;
    Plan stack[PLANS_ON_STACK];
} Plans;

static inline uint32_t read_u32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline int32_t read_i32(const unsigned char *p) { return (int32_t)read_u32(p); }

static inline int64_t read_i64(const unsigned char *p) {
    return (int64_t)((uint64_t)read_u32(p) << 32 | read_u32(p + 4));
}

static inline void write_u32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static inline void write_i64(unsigned char *p, int64_t v) {
    write_u32(p, (uint32_t)((uint64_t)v >> 32));
    write_u32(p + 4, (uint32_t)v);
}

/* Size of the batch at ``b`` (``remaining`` bytes from it to the end of the buffer), or 0
 * when its length prefix is cut, below a bare header, or runs past the end: the checks of
 * batch.batch_size_at and batch.validate. */
static Py_ssize_t batch_size(const unsigned char *b, Py_ssize_t remaining) {
    if (remaining < LOG_OVERHEAD)
        return 0;
    int32_t length = read_i32(b + BATCH_LENGTH);
    if (length < MIN_BATCH_LENGTH || length > remaining - LOG_OVERHEAD)
        return 0;
    return LOG_OVERHEAD + (Py_ssize_t)length;
}

/* The header checks of one batch of ``size`` bytes (at least HEADER_SIZE): 1 when it may
 * take the fast path, 0 when not. */
static int header_ok(const unsigned char *b, Py_ssize_t size, const Limits *lim) {
    if (b[MAGIC] != 2 || size > lim->max_message_bytes)
        return 0;
    int32_t delta = read_i32(b + LAST_OFFSET_DELTA);
    int32_t count = read_i32(b + RECORDS_COUNT);
    if (delta < 0 || count < 0 || delta != count - 1) /* count - 1 cannot overflow */
        return 0;
    int attributes = b[ATTRIBUTES + 1]; /* the low byte holds every bit checked here */
    if (attributes & (CONTROL_BIT | TRANSACTIONAL_BIT) || (attributes & COMPRESSION_MASK) > MAX_CODEC)
        return 0;
    if (read_i64(b + PRODUCER_ID) != NO_PRODUCER_ID)
        return 0;
    int64_t first = read_i64(b + BASE_TIMESTAMP);
    return first == NO_TIMESTAMP || first >= lim->min_timestamp;
}

/* crc32c.crc32c(b[from:to], value): 1 with *out set, -1 with an exception set. */
static int crc_of(const unsigned char *b, Py_ssize_t from, Py_ssize_t to, uint32_t value, uint32_t *out) {
    PyObject *span = PyMemoryView_FromMemory((char *)b + from, to - from, PyBUF_READ);
    if (span == NULL)
        return -1;
    PyObject *crc = PyObject_CallFunction(crc32c_func, "Ok", span, (unsigned long)value);
    Py_DECREF(span);
    if (crc == NULL)
        return -1;
    unsigned long result = PyLong_AsUnsignedLong(crc);
    Py_DECREF(crc);
    if (result == (unsigned long)-1 && PyErr_Occurred())
        return -1;
    *out = (uint32_t)result;
    return 1;
}

/* 1 when the stored CRC-32C matches attributes..end, 0 when not, -1 with an exception set
 * (only if the crc32c call itself fails, e.g. out of memory). */
static int crc_ok(const unsigned char *b, Py_ssize_t size) {
    PyObject *span = PyMemoryView_FromMemory((char *)b + ATTRIBUTES, size - ATTRIBUTES, PyBUF_READ);
    if (span == NULL)
        return -1;
    PyObject *crc = PyObject_CallOneArg(crc32c_func, span);
    Py_DECREF(span);
    if (crc == NULL)
        return -1;
    unsigned long value = PyLong_AsUnsignedLong(crc);
    Py_DECREF(crc);
    if (value == (unsigned long)-1 && PyErr_Occurred())
        return -1;
    return value == read_u32(b + CRC);
}

/* The CRC the batch gets with ``max_timestamp`` in its header: the fields before it from a
 * copy, the rest from the buffer. */
static int crc_with_max_timestamp(const unsigned char *b, Py_ssize_t size, int64_t max_timestamp, uint32_t *out) {
    unsigned char head[PRODUCER_ID - ATTRIBUTES];
    memcpy(head, b + ATTRIBUTES, MAX_TIMESTAMP - ATTRIBUTES);
    write_i64(head + (MAX_TIMESTAMP - ATTRIBUTES), max_timestamp);
    uint32_t crc;
    if (crc_of(head, 0, sizeof head, 0, &crc) < 0)
        return -1;
    return crc_of(b, PRODUCER_ID, size, crc, out);
}

#if CRC32C_FUSED
/* The walk of an uncompressed batch's records with the CRC-32C of attributes..end in the same
 * pass (crc32c_fused.h; only when crc32c_hw): the walk's verdict, and *crc when WALK_OK. */
__attribute__((target("sse4.2,pclmul"))) static int walk_with_crc(const unsigned char *b, Py_ssize_t size,
                                                           const Limits *lim, Walk *w, uint32_t *crc) {
    int32_t count = read_i32(b + RECORDS_COUNT);
    Crc3 c;
    crc3_start(&c, b + ATTRIBUTES, (size_t)(size - ATTRIBUTES), count);
    int verdict = walk_core(b + HEADER_SIZE, size - HEADER_SIZE, count, read_i64(b + BASE_TIMESTAMP),
                            lim->compacted, NULL, w, crc3_step, &c, 1);
    if (verdict == WALK_OK)
        *crc = crc3_finish(&c);
    return verdict;
}

/* walk_with_crc folding 64 bytes at a time (crcz_ of crc32c_fused.h; only when crc32c_zmm and
 * the span has a block). */
__attribute__((target("avx512f,vpclmulqdq,sse4.2"))) static int walk_with_crcz(const unsigned char *b,
                                                                               Py_ssize_t size, const Limits *lim,
                                                                               Walk *w, uint32_t *crc) {
    int32_t count = read_i32(b + RECORDS_COUNT);
    CrcZ c;
    crcz_start(&c, b + ATTRIBUTES, (size_t)(size - ATTRIBUTES), count);
    int verdict = walk_core(b + HEADER_SIZE, size - HEADER_SIZE, count, read_i64(b + BASE_TIMESTAMP),
                            lim->compacted, NULL, w, crcz_step, &c, 1);
    if (verdict == WALK_OK)
        *crc = crcz_finish(&c);
    return verdict;
}
#endif

/* Walk the records of the batch at ``b``, decompressing them first through lim->decompress:
 * 1 when they pass, 0 when not (or when decompress declines), -1 on an exception. */
static int records_ok(const unsigned char *b, Py_ssize_t size, const Limits *lim, Walk *w) {
    int codec = b[ATTRIBUTES + 1] & COMPRESSION_MASK;
    int32_t count = read_i32(b + RECORDS_COUNT);
    int64_t base_timestamp = read_i64(b + BASE_TIMESTAMP);
    if (codec == 0)
        return walk_records(b + HEADER_SIZE, size - HEADER_SIZE, count, base_timestamp, lim->compacted, NULL, w)
               == WALK_OK;
    if (lim->decompress == Py_None)
        return 0;
    PyObject *section = PyMemoryView_FromMemory((char *)b + HEADER_SIZE, size - HEADER_SIZE, PyBUF_READ);
    if (section == NULL)
        return -1;
    PyObject *data = PyObject_CallFunction(lim->decompress, "iO", codec, section);
    /* Released, so that a reference the callable kept cannot reach the buffer later (it is
     * over raw memory, which no export pins once ``records`` is released). */
    PyObject *released = PyObject_CallMethod(section, "release", NULL);
    Py_DECREF(section);
    if (released == NULL) {
        Py_XDECREF(data);
        return -1;
    }
    Py_DECREF(released);
    if (data == NULL)
        return -1;
    if (data == Py_None) {
        Py_DECREF(data);
        return 0;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) {
        Py_DECREF(data);
        return -1;
    }
    int verdict = walk_records(view.buf, view.len, count, base_timestamp, lim->compacted, NULL, w);
    PyBuffer_Release(&view);
    Py_DECREF(data);
    return verdict == WALK_OK;
}

static int add_plan(Plans *plans, const Plan *plan) {
    if (plans->count == plans->capacity) {
        Py_ssize_t capacity = 2 * plans->capacity;
        Plan *items = plans->items == plans->stack ? PyMem_Malloc(capacity * sizeof(Plan))
                                                   : PyMem_Realloc(plans->items, capacity * sizeof(Plan));
        if (items == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        if (plans->items == plans->stack)
            memcpy(items, plans->stack, sizeof plans->stack);
        plans->items = items;
        plans->capacity = capacity;
    }
    plans->items[plans->count++] = *plan;
    return 0;
}

/* Check one batch of ``size`` bytes at ``b`` with offsets from ``base`` and plan its writes:
 * 1 when it may take the fast path (summary folded), 0 when not, -1 on an exception. Cheap
 * header checks come before the CRC, and the CRC before the records. */
static int check_batch(const unsigned char *b, Py_ssize_t size, int64_t base, const Limits *lim, Summary *s,
                       Plan *plan) {
    int32_t delta = read_i32(b + LAST_OFFSET_DELTA);
    if (!header_ok(b, size, lim) || base > INT64_MAX - delta)
        return 0;
    Walk w;
#if CRC32C_FUSED
    if (crc32c_hw && (b[ATTRIBUTES + 1] & COMPRESSION_MASK) == 0) {
        /* The same verdict as below: a batch fails when either check does. */
        uint32_t crc;
        int verdict = crc32c_zmm && size - ATTRIBUTES >= CRCZ_BLOCK ? walk_with_crcz(b, size, lim, &w, &crc)
                                                                     : walk_with_crc(b, size, lim, &w, &crc);
        if (verdict != WALK_OK || crc != read_u32(b + CRC))
            return 0;
    } else
#endif
    {
        int ok = crc_ok(b, size);
        if (ok <= 0)
            return ok;
        ok = records_ok(b, size, lim, &w);
        if (ok <= 0)
            return ok;
    }
    if (w.max_timestamp != NO_TIMESTAMP && w.max_timestamp > lim->max_timestamp)
        return 0;
    plan->size = size;
    plan->max_timestamp = w.max_timestamp;
    plan->patch_max = w.max_timestamp != read_i64(b + MAX_TIMESTAMP);
    if (plan->patch_max && crc_with_max_timestamp(b, size, w.max_timestamp, &plan->crc) < 0)
        return -1;
    s->last_offset = base + delta;
    /* Unsigned: past a last offset of INT64_MAX it wraps, and check_all refuses a next batch. */
    plan->next_base = (int64_t)((uint64_t)s->last_offset + 1);
    if (w.max_timestamp > s->max_timestamp) { /* strictly greater: the first record with it wins */
        s->max_timestamp = w.max_timestamp;
        s->offset_of_max_timestamp = base + w.index_of_max;
    }
    return 1;
}

/* Pass 1: 1 when every batch may take the fast path (summary and plans filled), 0 when not,
 * -1 on an exception. */
static int check_all(const unsigned char *buf, Py_ssize_t len, const Limits *lim, Summary *s, Plans *plans) {
    if (len <= MAGIC || buf[MAGIC] != 2 || lim->base_offset < 0)
        return 0;
    s->max_timestamp = NO_TIMESTAMP;
    s->offset_of_max_timestamp = -1;
    int64_t base = lim->base_offset;
    for (Py_ssize_t pos = 0; pos < len;) {
        const unsigned char *b = buf + pos;
        Plan plan;
        Py_ssize_t size = batch_size(b, len - pos);
        if (size == 0)
            return 0;
        int ok = check_batch(b, size, base, lim, s, &plan);
        if (ok <= 0)
            return ok;
        if (add_plan(plans, &plan) < 0)
            return -1;
        pos += size;
        if (pos < len && s->last_offset == INT64_MAX) /* the next batch's base would not fit */
            return 0;
        base = plan.next_base;
    }
    if (s->offset_of_max_timestamp < 0)
        s->offset_of_max_timestamp = s->last_offset;
    return 1;
}

/* Pass 2, after check_all passed: write what it planned, nothing read from the buffer. */
static void assign_all(unsigned char *buf, const Plans *plans, const Limits *lim) {
    int64_t next = lim->base_offset;
    Py_ssize_t pos = 0;
    for (Py_ssize_t i = 0; i < plans->count; i++) {
        const Plan *plan = &plans->items[i];
        unsigned char *b = buf + pos;
        write_i64(b + BASE_OFFSET, next);
        write_u32(b + LEADER_EPOCH, (uint32_t)lim->leader_epoch);
        if (plan->patch_max) {
            write_i64(b + MAX_TIMESTAMP, plan->max_timestamp);
            write_u32(b + CRC, plan->crc);
        }
        next = plan->next_base;
        pos += plan->size;
    }
}

/* One int64 argument; -1 with OverflowError/TypeError set when it is not one. */
static int int64_arg(PyObject *arg, int64_t *out) {
    long long v = PyLong_AsLongLong(arg);
    if (v == -1 && PyErr_Occurred())
        return -1;
    *out = v;
    return 0;
}

static int parse_limits(PyObject *const *args, Limits *lim) {
    int64_t epoch;
    if (int64_arg(args[1], &lim->base_offset) < 0 || int64_arg(args[2], &epoch) < 0
        || int64_arg(args[3], &lim->max_message_bytes) < 0
        || int64_arg(args[4], &lim->min_timestamp) < 0 || int64_arg(args[5], &lim->max_timestamp) < 0)
        return -1;
    if (epoch < INT32_MIN || epoch > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "leader_epoch does not fit an int32");
        return -1;
    }
    lim->leader_epoch = (int32_t)epoch;
    return 0;
}

static int get_records(PyObject *arg, Py_buffer *view) {
    if (PyObject_GetBuffer(arg, view, PyBUF_SIMPLE | PyBUF_WRITABLE) == 0)
        return 0;
    /* A read-only or non-contiguous buffer is the caller's mistake: say TypeError. */
    if (PyErr_ExceptionMatches(PyExc_BufferError) || PyErr_ExceptionMatches(PyExc_TypeError)) {
        PyErr_Format(PyExc_TypeError, "records must be a writable contiguous buffer, not %.100s",
                     Py_TYPE(arg)->tp_name);
    }
    return -1;
}

static PyObject *validate_and_assign(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8) {
        PyErr_Format(PyExc_TypeError, "validate_and_assign takes 8 arguments (%zd given)", nargs);
        return NULL;
    }
    Limits lim;
    if (parse_limits(args, &lim) < 0)
        return NULL;
    lim.decompress = args[6];
    if (lim.decompress != Py_None && !PyCallable_Check(lim.decompress)) {
        PyErr_SetString(PyExc_TypeError, "decompress must be callable or None");
        return NULL;
    }
    lim.compacted = PyObject_IsTrue(args[7]);
    if (lim.compacted < 0)
        return NULL;
    Py_buffer view;
    if (get_records(args[0], &view) < 0)
        return NULL;
    Summary s;
    Plans plans = {.items = plans.stack, .count = 0, .capacity = PLANS_ON_STACK};
    int ok = check_all((const unsigned char *)view.buf, view.len, &lim, &s, &plans);
    if (ok > 0)
        assign_all((unsigned char *)view.buf, &plans, &lim);
    if (plans.items != plans.stack)
        PyMem_Free(plans.items);
    PyBuffer_Release(&view);
    if (ok < 0)
        return NULL;
    if (ok == 0)
        Py_RETURN_NONE;
    return Py_BuildValue("(LLLL)", (long long)lim.base_offset, (long long)s.last_offset,
                         (long long)s.max_timestamp, (long long)s.offset_of_max_timestamp);
}

/* check_records(data, records_count, base_timestamp, compacted)
 *     -> (verdict, index, max_timestamp, index_of_max, null_keys) */
static PyObject *check_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "check_records takes 4 arguments (%zd given)", nargs);
        return NULL;
    }
    int64_t count, base_timestamp;
    if (int64_arg(args[1], &count) < 0 || int64_arg(args[2], &base_timestamp) < 0)
        return NULL;
    if (count < 0 || count > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "records_count must be an int32 of 0 or more");
        return NULL;
    }
    int compacted = PyObject_IsTrue(args[3]);
    if (compacted < 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *null_keys = PyList_New(0);
    if (null_keys == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    /* Without the GIL (a section may hold 256 MiB of records, walked on a worker thread):
     * only the walk that lists records without a key, when there are any, holds it. */
    Walk w;
    int verdict;
    Py_BEGIN_ALLOW_THREADS
    verdict = walk_records(view.buf, view.len, (int32_t)count, base_timestamp, compacted, NULL, &w);
    Py_END_ALLOW_THREADS
    if (verdict == WALK_NULL_KEY)
        verdict = walk_records(view.buf, view.len, (int32_t)count, base_timestamp, compacted, null_keys, &w);
    PyBuffer_Release(&view);
    if (verdict < 0) {
        Py_DECREF(null_keys);
        return NULL;
    }
    return Py_BuildValue("(iiLiN)", verdict, (int)w.index, (long long)w.max_timestamp, (int)w.index_of_max,
                         null_keys);
}

/* _crc32c(data, records_count) -> int | None: the fused CRC-32C of ``data`` as a walk of
 * ``records_count`` records computes it (split, one step per record, finish), for tests;
 * None without SSE4.2. */
static PyObject *crc32c_test(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    int64_t count;
    if (nargs != 2 || int64_arg(args[1], &count) < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "_crc32c takes 2 arguments");
        return NULL;
    }
#if CRC32C_FUSED
    if (crc32c_hw) {
        Py_buffer view;
        if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
            return NULL;
        uint32_t crc = crc3_of(view.buf, (size_t)view.len, count);
        PyBuffer_Release(&view);
        return PyLong_FromUnsignedLong(crc);
    }
#endif
    Py_RETURN_NONE;
}

/* _crc32c_fold(enabled) -> bool: use the 64-byte folding (crcz_) where the CPU has it, or the
 * three crc32 streams everywhere (tests of both paths); whether folding is now used. */
static PyObject *crc32c_fold_test(PyObject *module, PyObject *arg) {
    int enabled = PyObject_IsTrue(arg);
    if (enabled < 0)
        return NULL;
#if CRC32C_FUSED
    crc32c_zmm = enabled && crc32c_hw && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq");
    return PyBool_FromLong(crc32c_zmm);
#else
    Py_RETURN_FALSE;
#endif
}

static PyMethodDef methods[] = {
    {"_crc32c", (PyCFunction)(void (*)(void))crc32c_test, METH_FASTCALL,
     "_crc32c(data, records_count) -> int | None\n\nThe fused CRC-32C of data (tests only)."},
    {"_crc32c_fold", (PyCFunction)crc32c_fold_test, METH_O,
     "_crc32c_fold(enabled) -> bool\n\nFold 64 bytes at a time where the CPU can, or not (tests only)."},
    {"validate_and_assign", (PyCFunction)(void (*)(void))validate_and_assign, METH_FASTCALL,
     "validate_and_assign(records, base_offset, leader_epoch, max_message_bytes, min_timestamp,\n"
     "max_timestamp, decompress, compacted)\n"
     "-> (first_offset, last_offset, max_timestamp, offset_of_max_timestamp) | None\n\n"
     "Check the produced v2 batches in ``records`` and their records, and patch their base\n"
     "offsets and leader epochs (and max timestamps that differ from their records') in place;\n"
     "None, with nothing written, when the Python path must handle them."},
    {"check_records", (PyCFunction)(void (*)(void))check_records, METH_FASTCALL,
     "check_records(data, records_count, base_timestamp, compacted)\n"
     "-> (verdict, index, max_timestamp, index_of_max, null_keys)\n\n"
     "Walk the records section ``data`` of a batch (decompressed): verdict 0 when well formed,\n"
     "1 record ``index`` malformed, 2 its offset delta is not its index, 3 fewer records than\n"
     "declared, 4 bytes left after them; the largest record timestamp and the first record\n"
     "with it (-1, -1 when none); when ``compacted``, the indexes of records without a key."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "odradek.records._log_validator",
    .m_doc = "Kafka's LogValidator checks of produced batches and the fast path's offset assignment, in C.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__log_validator(void) {
    PyObject *crc32c = PyImport_ImportModule("crc32c");
    if (crc32c == NULL)
        return NULL;
    crc32c_func = PyObject_GetAttrString(crc32c, "crc32c");
    Py_DECREF(crc32c);
    if (crc32c_func == NULL)
        return NULL;
    crc32c_init();
    return PyModule_Create(&module);
}
