/*
 * The produce fast path's log validator: check a partition's produced v2 batches and assign
 * their offsets in one C call, where the Python path (replication/partition.py:
 * _split_batches, _validate_client_batch, _check_timestamps, Partition._assign_offsets) makes
 * a dozen calls per batch. That Python path stays the source of truth and the fallback: this
 * module accepts a subset of what it accepts, writes the same bytes, returns the same summary,
 * and returns None, touching nothing, wherever Python would refuse, convert or do more.
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
 * Contract:
 *   validate_and_assign(records, base_offset, leader_epoch, max_message_bytes,
 *                       min_timestamp, max_timestamp) -> (first_offset, last_offset,
 *                       max_timestamp, offset_of_max_timestamp) | None
 *
 * ``records`` is a writable contiguous buffer holding whole v2 batches back to back (else
 * TypeError); the integers must fit int64 (``leader_epoch`` int32), else OverflowError.
 * ``min_timestamp``/``max_timestamp`` bound the batches' base and max timestamps (-1, no
 * timestamp, is never checked); the caller clamps an unlimited bound to INT64_MIN/INT64_MAX,
 * which is exact, as no int64 timestamp lies beyond those.
 *
 * Pass 1 reads every header and CRC and writes nothing; the answer is None when a batch is
 * corrupt or invalid, too large, out of the timestamp bounds, a control batch, idempotent or
 * transactional (producer state lives in Python), when the first magic is not 2 (Python
 * converts legacy message sets), when ``base_offset`` is negative (LogAppendInfo refuses it)
 * or the last offset would not fit an int64. Pass 2 patches each batch's base_offset and
 * partition_leader_epoch, fields the CRC does not cover, so the batches stay valid.
 * Nothing here decodes a record: the cost is the CRC, one call per batch.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

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
};

#define TRANSACTIONAL_BIT 0x10
#define CONTROL_BIT 0x20
#define NO_TIMESTAMP (-1)
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
} Limits;

typedef struct {
    int64_t last_offset;
    int64_t max_timestamp;
    int64_t offset_of_max_timestamp;
} Summary;

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
    if (attributes & (CONTROL_BIT | TRANSACTIONAL_BIT))
        return 0;
    if (read_i64(b + PRODUCER_ID) != NO_PRODUCER_ID)
        return 0;
    int64_t first = read_i64(b + BASE_TIMESTAMP), top = read_i64(b + MAX_TIMESTAMP);
    if (first != NO_TIMESTAMP && first < lim->min_timestamp)
        return 0;
    if (top != NO_TIMESTAMP && top > lim->max_timestamp)
        return 0;
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

/* Fold the batch at ``b`` into the summary as Partition._assign_offsets does with
 * append_time -1; 0 when its last offset would not fit an int64. ``base`` is its offset. */
static int summarize(const unsigned char *b, int64_t base, Summary *s) {
    int32_t delta = read_i32(b + LAST_OFFSET_DELTA);
    if (base > INT64_MAX - delta)
        return 0;
    s->last_offset = base + delta;
    int64_t top = read_i64(b + MAX_TIMESTAMP);
    if (top > s->max_timestamp) { /* strictly greater: the first batch with it wins */
        s->max_timestamp = top;
        s->offset_of_max_timestamp = s->last_offset;
    }
    return 1;
}

/* Pass 1: 1 when every batch may take the fast path (summary filled), 0 when not, -1 on an
 * exception. Cheap header checks come before each CRC so a refused batch costs little. */
static int check_all(const unsigned char *buf, Py_ssize_t len, const Limits *lim, Summary *s) {
    if (len <= MAGIC || buf[MAGIC] != 2 || lim->base_offset < 0)
        return 0;
    s->max_timestamp = NO_TIMESTAMP;
    s->offset_of_max_timestamp = -1;
    int64_t base = lim->base_offset;
    for (Py_ssize_t pos = 0; pos < len;) {
        const unsigned char *b = buf + pos;
        Py_ssize_t size = batch_size(b, len - pos);
        if (size == 0 || !header_ok(b, size, lim) || !summarize(b, base, s))
            return 0;
        int crc = crc_ok(b, size);
        if (crc <= 0)
            return crc;
        pos += size;
        if (pos < len) {
            if (s->last_offset == INT64_MAX) /* the next batch's base would not fit */
                return 0;
            base = s->last_offset + 1;
        }
    }
    if (s->offset_of_max_timestamp < 0)
        s->offset_of_max_timestamp = s->last_offset;
    return 1;
}

/* Pass 2, after check_all passed: patch base offsets and leader epochs. */
static void assign_all(unsigned char *buf, Py_ssize_t len, const Limits *lim) {
    int64_t next = lim->base_offset;
    for (Py_ssize_t pos = 0; pos < len;) {
        unsigned char *b = buf + pos;
        write_i64(b + BASE_OFFSET, next);
        write_u32(b + LEADER_EPOCH, (uint32_t)lim->leader_epoch);
        /* Unsigned: past a last offset of INT64_MAX it wraps, but only after the last batch. */
        next = (int64_t)((uint64_t)next + (uint64_t)read_i32(b + LAST_OFFSET_DELTA) + 1);
        pos += LOG_OVERHEAD + read_i32(b + BATCH_LENGTH);
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
    if (nargs != 6) {
        PyErr_Format(PyExc_TypeError, "validate_and_assign takes 6 arguments (%zd given)", nargs);
        return NULL;
    }
    Limits lim;
    if (parse_limits(args, &lim) < 0)
        return NULL;
    Py_buffer view;
    if (get_records(args[0], &view) < 0)
        return NULL;
    Summary s;
    int ok = check_all((const unsigned char *)view.buf, view.len, &lim, &s);
    if (ok > 0)
        assign_all((unsigned char *)view.buf, view.len, &lim);
    PyBuffer_Release(&view);
    if (ok < 0)
        return NULL;
    if (ok == 0)
        Py_RETURN_NONE;
    return Py_BuildValue("(LLLL)", (long long)lim.base_offset, (long long)s.last_offset,
                         (long long)s.max_timestamp, (long long)s.offset_of_max_timestamp);
}

static PyMethodDef methods[] = {
    {"validate_and_assign", (PyCFunction)(void (*)(void))validate_and_assign, METH_FASTCALL,
     "validate_and_assign(records, base_offset, leader_epoch, max_message_bytes, min_timestamp,\n"
     "max_timestamp) -> (first_offset, last_offset, max_timestamp, offset_of_max_timestamp) | None\n\n"
     "Check the produced v2 batches in ``records`` and patch their base offsets and leader\n"
     "epochs in place; None, with nothing written, when the Python path must handle them."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "odradek.records._log_validator",
    .m_doc = "The produce fast path's batch validation and offset assignment, in C.",
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
    return PyModule_Create(&module);
}
