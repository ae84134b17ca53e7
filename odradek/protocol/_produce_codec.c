/*
 * The Produce fast path's two protocol ends, in C: parse the common Produce request and encode
 * its response with one call each. The generated codec (codec.py, generated/produce_*.py) stays
 * the source of truth; this module must agree with it byte for byte, and answers None to every
 * request it is not sure of so that the caller can fall back to it.
 *
 * parse_request(frame) -> (api_version, correlation_id, client_id, acks, timeout_ms, topics)
 *                         or None
 *   frame: a writable, contiguous byte buffer holding one request without its size prefix
 *   (a bytearray, or a memoryview of one); any other argument raises TypeError.
 *   Accepted layout (big-endian; v = api_version, 3 <= v <= 11, flexible when v >= 9):
 *     header   api_key int16 (= 0), api_version int16, correlation_id int32,
 *              client_id nullable string (int16 length, -1 = null; never compact),
 *              [v9+: tagged fields]
 *     body     transactional_id: must be null (int16 -1, or compact 0),
 *              acks int16, timeout_ms int32, topic_data array of
 *                name string, partition_data array of
 *                  index int32, records (int32 length or compact length+1; null refused),
 *                  [v9+: tagged fields]
 *                [v9+: tagged fields]
 *              [v9+: tagged fields]
 *   and nothing after. Arrays are int32 counts, or on v9+ uvarint count+1 (0 = null,
 *   refused); strings int16 lengths, or on v9+ uvarint length+1. A tagged-field section is a
 *   uvarint count, then per field a uvarint tag, a uvarint size and that many bytes (all
 *   skipped: the Produce request defines none). Uvarints are at most 5 bytes, read like
 *   varint.read_uvarint. Strings must be valid UTF-8.
 *   topics = ((name, ((index, records), ...)), ...): records are memoryview slices of one
 *   memoryview of the frame, so they share its managed buffer: writes go through to the frame,
 *   and the frame's object stays referenced exactly while a view is alive (the frame parser
 *   judges by that reference count when it may reuse its receive buffer).
 *
 *   The decoded objects are bounded by the frame: a request of `size` bytes may hold at most
 *   ENTRY_BUDGET(size) = 64 + size / 32 topic and partition entries in all, else the answer
 *   is None (counted as each array's count is read, before its tuple is allocated, so a
 *   refused request costs no more than what was decoded before it). Why 32: a partition
 *   entry decodes to ~280 bytes of objects (a pair, its index, a memoryview), so the
 *   objects stay under ~9x the frame, where a frame of minimal topics (3 bytes each) or
 *   partitions (6 bytes) decoded to 20-45x; and no valid request comes near it, since a
 *   valid partition carries a record batch (61 bytes of header at least) and a valid topic
 *   at least one partition: ~35 bytes per entry or more in every version.
 *
 * within_entry_budget(frame) -> bool
 *   For the generic decoder (codec.decode_request_body), which builds objects of the same
 *   amplification: False when `frame` (a bytes-like object) is a Produce request of any
 *   version 0-11 whose topic and partition entries, counted without building anything,
 *   exceed ENTRY_BUDGET(len(frame)); True otherwise (also when it does not parse as one:
 *   the decoder then reports what is wrong).
 *
 * encode_response(api_version, correlation_id, responses, throttle_time_ms=0) -> bytes
 *   The whole frame, size prefix included, as codec.encode_response_frame writes a
 *   ProduceResponse whose partitions carry no record errors, error message or current leader:
 *     int32 size, int32 correlation_id, [v9+: 0 (empty header tags)],
 *     responses array of: name string, partition_responses array of:
 *       index int32, error_code int16, base_offset int64, log_append_time_ms int64,
 *       [v5+: log_start_offset int64], [v8+: record_errors empty array, error_message null],
 *       [v9+: 0 (no tags)]
 *     [v9+: 0 (no tags)], throttle_time_ms int32, [v9+: 0 (no tags)]
 *   responses: a sequence of (name, partitions); partitions: a sequence of
 *   (index, error_code, base_offset, log_append_time_ms, log_start_offset).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "wire_reader.h"

#define FIRST_VERSION 3
#define LAST_VERSION 11
#define FIRST_FLEXIBLE 9
#define ENTRY_BUDGET(size) (64 + (size) / 32)

/* ---------------------------------------------------------------------------------------
 * Reading, on the cursor and primitives of wire_reader.h. Every reader returns 1 on success
 * and 0 when the bytes are not of the accepted shape; an object-returning one returns NULL,
 * with an exception set only for a real failure (out of memory). So "NULL and no exception"
 * means "answer None".
 */

/* Text as Python decodes it (strict UTF-8); invalid UTF-8 answers None, not an error. */
static PyObject *decode_text(const unsigned char *start, Py_ssize_t len) {
    PyObject *text = PyUnicode_DecodeUTF8((const char *)start, len, NULL);
    if (text == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
        PyErr_Clear();
    return text;
}

/* A tuple of `n` items, taking their references; NULL (freeing the others) if one is
 * missing. */
static PyObject *tuple_of(int n, PyObject **items) {
    PyObject *out = PyTuple_New(n);
    for (int i = 0; i < n; i++) {
        if (items[i] == NULL)
            Py_CLEAR(out);
    }
    for (int i = 0; i < n; i++) {
        if (out != NULL)
            PyTuple_SET_ITEM(out, i, items[i]);
        else
            Py_XDECREF(items[i]);
    }
    return out;
}

static PyObject *pair(PyObject *first, PyObject *second) {
    return tuple_of(2, (PyObject *[]){first, second});
}

/* Parsing state shared by every level: where the frame starts (to turn positions into slice
 * indices) and the memoryview every records slice is cut from. */
typedef struct {
    cursor c;
    int flexible;
    const unsigned char *base;
    PyObject *view;
    Py_ssize_t entries; /* topic and partition entries counted so far */
    Py_ssize_t budget;  /* ENTRY_BUDGET of the frame */
} parser;

/* view[start:start + len], made the way memoryview's own slicing makes it (a new view
 * registered with the same managed buffer, then narrowed) without the slice object and index
 * conversions that cost more than the view itself. Only for the 1-D, byte-sized, contiguous
 * views parse_request accepts: a step-1 slice of one has the same strides and flags. */
static PyObject *slice_view(PyObject *view, Py_ssize_t start, Py_ssize_t len) {
    PyObject *out = PyMemoryView_FromObject(view);
    if (out != NULL) {
        Py_buffer *b = PyMemoryView_GET_BUFFER(out);
        b->buf = (char *)b->buf + start;
        b->len = len;
        b->shape[0] = len;
    }
    return out;
}

/* (index, records): records a slice of the frame's view; null records refused. */
static PyObject *read_partition(parser *p) {
    int32_t index;
    const unsigned char *start;
    Py_ssize_t len;
    if (!read_i32(&p->c, &index) || !read_span(&p->c, p->flexible, 1, &start, &len) || len < 0)
        return NULL;
    if (p->flexible && !skip_tagged_fields(&p->c))
        return NULL;
    return pair(PyLong_FromLong(index), slice_view(p->view, start - p->base, len));
}

/* An array as a tuple of what `read_item` reads for each element; NULL when the count or
 * any element is not of the accepted shape. `min_size`: the fewest bytes an element takes
 * (read_count bounds the count, and so the tuple, by it). */
static PyObject *read_array(parser *p, Py_ssize_t min_size, PyObject *(*read_item)(parser *)) {
    Py_ssize_t count;
    if (!read_count(&p->c, p->flexible, min_size, &count) || count > p->budget - p->entries)
        return NULL;
    p->entries += count;
    PyObject *items = PyTuple_New(count);
    for (Py_ssize_t i = 0; items != NULL && i < count; i++) {
        PyObject *item = read_item(p);
        if (item == NULL)
            Py_CLEAR(items);
        else
            PyTuple_SET_ITEM(items, i, item);
    }
    return items;
}

/* (name, partitions). Smallest partition: index, a one-byte length, [one-byte tags]. */
static PyObject *read_topic(parser *p) {
    const unsigned char *start;
    Py_ssize_t len;
    if (!read_span(&p->c, p->flexible, 0, &start, &len) || len < 0)
        return NULL;
    PyObject *name = decode_text(start, len);
    if (name == NULL)
        return NULL;
    PyObject *partitions = read_array(p, p->flexible ? 6 : 8, read_partition);
    if (partitions != NULL && p->flexible && !skip_tagged_fields(&p->c))
        Py_CLEAR(partitions);
    return pair(name, partitions);
}

/* The topic_data array. Smallest topic: an empty name and an empty array (2 + 4 bytes, or
 * three one-byte fields when flexible). */
static PyObject *read_topics(parser *p) {
    return read_array(p, p->flexible ? 3 : 6, read_topic);
}

/* The whole request: header, then body, then exactly the end of the frame. */
static PyObject *read_request(parser *p) {
    int16_t api_key, version, txn_len, acks;
    int32_t correlation_id, timeout_ms;
    const unsigned char *start;
    Py_ssize_t len;
    if (!read_i16(&p->c, &api_key) || !read_i16(&p->c, &version) || !read_i32(&p->c, &correlation_id))
        return NULL;
    if (api_key != 0 || version < FIRST_VERSION || version > LAST_VERSION)
        return NULL;
    p->flexible = version >= FIRST_FLEXIBLE;
    /* The header's client_id keeps its int16 length even in header v2. */
    if (!read_span(&p->c, 0, 0, &start, &len))
        return NULL;
    if (p->flexible && !skip_tagged_fields(&p->c))
        return NULL;
    /* A transactional produce goes the generic way: only a null transactional_id passes. */
    if (p->flexible) {
        uint64_t u;
        if (!read_uvarint(&p->c, &u) || u != 0)
            return NULL;
    } else if (!read_i16(&p->c, &txn_len) || txn_len != -1) {
        return NULL;
    }
    if (!read_i16(&p->c, &acks) || !read_i32(&p->c, &timeout_ms))
        return NULL;
    PyObject *topics = read_topics(p);
    if (topics != NULL && ((p->flexible && !skip_tagged_fields(&p->c)) || remaining(&p->c) != 0))
        Py_CLEAR(topics);
    if (topics == NULL)
        return NULL;
    PyObject *client_id = len < 0 ? Py_NewRef(Py_None) : decode_text(start, len);
    return tuple_of(6, (PyObject *[]){PyLong_FromLong(version), PyLong_FromLong(correlation_id),
                                      client_id, PyLong_FromLong(acks), PyLong_FromLong(timeout_ms),
                                      topics});
}

static PyObject *parse_request(PyObject *module, PyObject *frame) {
    PyObject *view = PyMemoryView_FromObject(frame);
    if (view == NULL)
        return NULL;
    Py_buffer *b = PyMemoryView_GET_BUFFER(view);
    if (b->readonly || b->ndim != 1 || b->itemsize != 1 || !PyBuffer_IsContiguous(b, 'C')) {
        Py_DECREF(view);
        PyErr_SetString(PyExc_TypeError, "parse_request needs a writable, contiguous byte buffer");
        return NULL;
    }
    parser p = {{b->buf, (const unsigned char *)b->buf + b->len}, 0, b->buf, view, 0,
                ENTRY_BUDGET(b->len)};
    PyObject *result = read_request(&p);
    Py_DECREF(view); /* the slices keep the managed buffer (and so the frame) alive */
    if (result == NULL && !PyErr_Occurred())
        Py_RETURN_NONE;
    return result;
}

/* Count the topic and partition entries of a Produce request of any version, building
 * nothing; 1 when they are within `budget` or the bytes do not parse as a request (counting
 * stops there), 0 when over it. */
static int entries_within(cursor *c, Py_ssize_t budget) {
    int16_t api_key, version, i16;
    int32_t i32;
    const unsigned char *start;
    Py_ssize_t len, topics, partitions, entries = 0;
    if (!read_i16(c, &api_key) || !read_i16(c, &version) || !read_i32(c, &i32) || api_key != 0
        || version < 0 || version > LAST_VERSION)
        return 1;
    int flexible = version >= FIRST_FLEXIBLE;
    if (!read_span(c, 0, 0, &start, &len) || (flexible && !skip_tagged_fields(c)))
        return 1;
    if (version >= 3 && !read_span(c, flexible, 0, &start, &len)) /* transactional_id */
        return 1;
    if (!read_i16(c, &i16) || !read_i32(c, &i32) || !read_count(c, flexible, flexible ? 3 : 6, &topics))
        return 1;
    if ((entries += topics) > budget)
        return 0;
    for (Py_ssize_t t = 0; t < topics; t++) {
        if (!read_span(c, flexible, 0, &start, &len) || !read_count(c, flexible, flexible ? 6 : 8, &partitions))
            return 1;
        if ((entries += partitions) > budget)
            return 0;
        for (Py_ssize_t i = 0; i < partitions; i++) {
            if (!read_i32(c, &i32) || !read_span(c, flexible, 1, &start, &len)
                || (flexible && !skip_tagged_fields(c)))
                return 1;
        }
        if (flexible && !skip_tagged_fields(c))
            return 1;
    }
    return 1;
}

static PyObject *within_entry_budget(PyObject *module, PyObject *frame) {
    Py_buffer b;
    if (PyObject_GetBuffer(frame, &b, PyBUF_SIMPLE) < 0)
        return NULL;
    cursor c = {b.buf, (const unsigned char *)b.buf + b.len};
    int within = entries_within(&c, ENTRY_BUDGET(b.len));
    PyBuffer_Release(&b);
    return PyBool_FromLong(within);
}

/* ---------------------------------------------------------------------------------------
 * Writing: into a buffer on the stack (a response for a few partitions fits), moved to the
 * heap only when it grows past that. `reserve` before each unchecked group of puts.
 */

typedef struct {
    unsigned char *buf;
    Py_ssize_t len, cap;
    unsigned char stack[1024];
} writer;

static int reserve(writer *w, Py_ssize_t n) {
    if (w->cap - w->len >= n)
        return 1;
    if (n > PY_SSIZE_T_MAX / 4 - w->len) {
        PyErr_NoMemory();
        return 0;
    }
    Py_ssize_t cap = 2 * (w->len + n);
    unsigned char *grown = w->buf == w->stack ? PyMem_Malloc(cap) : PyMem_Realloc(w->buf, cap);
    if (grown == NULL) {
        PyErr_NoMemory();
        return 0;
    }
    if (w->buf == w->stack)
        memcpy(grown, w->stack, w->len);
    w->buf = grown;
    w->cap = cap;
    return 1;
}

static inline void put_u8(writer *w, unsigned v) { w->buf[w->len++] = (unsigned char)v; }

static inline void put_be(writer *w, uint64_t v, int width) {
    for (int i = width - 1; i >= 0; i--)
        w->buf[w->len++] = (unsigned char)(v >> (8 * i));
}

/* An array count or string length: int32 / int16, or uvarint n + 1 when flexible (at most
 * 10 bytes, reserved by the caller). */
static int put_length(writer *w, Py_ssize_t n, int flexible, int width) {
    if (!flexible && n > (width == 2 ? INT16_MAX : INT32_MAX)) {
        PyErr_Format(PyExc_ValueError, "length %zd does not fit in int%d", n, 8 * width);
        return 0;
    }
    if (!flexible) {
        put_be(w, (uint64_t)n, width);
        return 1;
    }
    uint64_t v = (uint64_t)n + 1;
    for (; v >= 0x80; v >>= 7)
        put_u8(w, (v & 0x7F) | 0x80);
    put_u8(w, (unsigned)v);
    return 1;
}

/* An int in [-max - 1, max], as struct.pack takes it (TypeError / OverflowError otherwise). */
static int as_int(PyObject *o, long long max, const char *what, long long *out) {
    long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred())
        return 0;
    if (v < -max - 1 || v > max) {
        PyErr_Format(PyExc_OverflowError, "%s %lld out of range", what, v);
        return 0;
    }
    *out = v;
    return 1;
}

/* A (name, partitions) or partition tuple of `size` items, or NULL with ValueError/TypeError.
 * A tuple of its own: items stay referenced even if converting one runs Python code. */
static PyObject *fields_of(PyObject *item, Py_ssize_t size, const char *what) {
    PyObject *fields = PySequence_Tuple(item);
    if (fields != NULL && PyTuple_GET_SIZE(fields) != size) {
        PyErr_Format(PyExc_ValueError, "a %s has %zd fields", what, size);
        Py_CLEAR(fields);
    }
    return fields;
}

/* (index, error_code, base_offset, log_append_time_ms, log_start_offset) of one partition. */
static int write_partition(writer *w, PyObject *item, int version) {
    static const char *names[5] = {"index", "error_code", "base_offset", "log_append_time_ms",
                                   "log_start_offset"};
    static const int widths[5] = {4, 2, 8, 8, 8};
    static const long long maxima[5] = {INT32_MAX, INT16_MAX, INT64_MAX, INT64_MAX, INT64_MAX};
    PyObject *fields = fields_of(item, 5, "partition response");
    /* 4 + 2 + 3 * 8 fixed bytes, and at most 6 for v8's empty record errors and null message. */
    int ok = fields != NULL && reserve(w, 36);
    for (int i = 0; ok && i < (version >= 5 ? 5 : 4); i++) { /* log_start_offset from v5 */
        long long v;
        if ((ok = as_int(PyTuple_GET_ITEM(fields, i), maxima[i], names[i], &v)))
            put_be(w, (uint64_t)v, widths[i]);
    }
    Py_XDECREF(fields);
    if (ok && version >= FIRST_FLEXIBLE) {
        put_u8(w, 1); /* record_errors: empty compact array */
        put_u8(w, 0); /* error_message: null */
        put_u8(w, 0); /* no tagged fields (current_leader unset) */
    } else if (ok && version >= 8) {
        put_be(w, 0, 4);      /* record_errors: empty array */
        put_be(w, 0xFFFF, 2); /* error_message: null */
    }
    return ok;
}

/* (name, partitions) of one topic. */
static int write_topic(writer *w, PyObject *item, int version) {
    int flexible = version >= FIRST_FLEXIBLE;
    PyObject *fields = fields_of(item, 2, "topic response"), *partitions = NULL;
    if (fields != NULL && !PyUnicode_Check(PyTuple_GET_ITEM(fields, 0)))
        PyErr_SetString(PyExc_TypeError, "a topic name must be a str");
    else if (fields != NULL)
        partitions = PySequence_Fast(PyTuple_GET_ITEM(fields, 1), "partitions must be a sequence");
    Py_ssize_t len;
    const char *utf8 = partitions ? PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(fields, 0), &len) : NULL;
    int ok = utf8 != NULL && reserve(w, len + 20) && put_length(w, len, flexible, 2);
    if (ok) {
        memcpy(w->buf + w->len, utf8, len);
        w->len += len;
        ok = put_length(w, PySequence_Fast_GET_SIZE(partitions), flexible, 4);
    }
    /* The size is read again each round: converting an item may run Python code. */
    for (Py_ssize_t i = 0; ok && i < PySequence_Fast_GET_SIZE(partitions); i++)
        ok = write_partition(w, PySequence_Fast_GET_ITEM(partitions, i), version);
    if (ok && flexible && (ok = reserve(w, 1)))
        put_u8(w, 0); /* no tagged fields */
    Py_XDECREF(partitions);
    Py_XDECREF(fields);
    return ok;
}

static int write_response(writer *w, int version, PyObject *responses, int32_t throttle_time_ms) {
    int flexible = version >= FIRST_FLEXIBLE;
    PyObject *topics = PySequence_Fast(responses, "responses must be a sequence");
    int ok = topics != NULL && reserve(w, 10)
             && put_length(w, PySequence_Fast_GET_SIZE(topics), flexible, 4);
    for (Py_ssize_t i = 0; ok && i < PySequence_Fast_GET_SIZE(topics); i++)
        ok = write_topic(w, PySequence_Fast_GET_ITEM(topics, i), version);
    Py_XDECREF(topics);
    if (ok && (ok = reserve(w, 5))) {
        put_be(w, (uint32_t)throttle_time_ms, 4);
        if (flexible)
            put_u8(w, 0); /* no tagged fields (node_endpoints unset) */
    }
    return ok;
}

/* The four arguments, positional or by keyword; the last one optional. */
static int parse_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject *out[4]) {
    static const char *names[4] = {"api_version", "correlation_id", "responses", "throttle_time_ms"};
    int ok = nargs <= 4;
    for (int i = 0; i < 4; i++)
        out[i] = i < nargs ? args[i] : NULL;
    for (Py_ssize_t k = 0; ok && kwnames != NULL && k < PyTuple_GET_SIZE(kwnames); k++) {
        int i = 0;
        while (i < 4 && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, k), names[i]) != 0)
            i++;
        if ((ok = i < 4 && out[i] == NULL))
            out[i] = args[nargs + k];
    }
    if (!(ok && out[0] && out[1] && out[2]))
        PyErr_SetString(PyExc_TypeError, "encode_response(api_version, correlation_id, responses, "
                                         "throttle_time_ms=0): bad arguments");
    return ok && out[0] && out[1] && out[2];
}

static PyObject *encode_response(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames) {
    PyObject *arg[4];
    long long version, correlation_id, throttle = 0;
    if (!parse_args(args, nargs, kwnames, arg) || !as_int(arg[0], INT16_MAX, "api_version", &version)
        || !as_int(arg[1], INT32_MAX, "correlation_id", &correlation_id)
        || (arg[3] != NULL && !as_int(arg[3], INT32_MAX, "throttle_time_ms", &throttle)))
        return NULL;
    if (version < FIRST_VERSION || version > LAST_VERSION)
        return PyErr_Format(PyExc_ValueError, "Produce response version %lld not in 3..11", version);
    writer w = {.buf = w.stack, .len = 0, .cap = sizeof w.stack};
    put_be(&w, 0, 4); /* the size, patched below */
    put_be(&w, (uint32_t)correlation_id, 4);
    if (version >= FIRST_FLEXIBLE)
        put_u8(&w, 0); /* response header v1: no tagged fields */
    PyObject *out = NULL;
    if (write_response(&w, (int)version, arg[2], (int32_t)throttle)) {
        Py_ssize_t size = w.len;
        w.len = 0;
        put_be(&w, (uint64_t)(size - 4), 4);
        out = size - 4 <= INT32_MAX ? PyBytes_FromStringAndSize((const char *)w.buf, size)
                                    : PyErr_Format(PyExc_ValueError, "response too large");
    }
    if (w.buf != w.stack)
        PyMem_Free(w.buf);
    return out;
}

static PyMethodDef methods[] = {
    {"parse_request", parse_request, METH_O,
     "parse_request(frame) -> (api_version, correlation_id, client_id, acks, timeout_ms, topics)"
     " for a common Produce request v3-11, else None; records are slices of the frame."},
    {"within_entry_budget", within_entry_budget, METH_O,
     "within_entry_budget(frame) -> False when a Produce request holds more topic and partition"
     " entries than its size allows (64 + size / 32), else True."},
    {"encode_response", (PyCFunction)(void (*)(void))encode_response, METH_FASTCALL | METH_KEYWORDS,
     "encode_response(api_version, correlation_id, responses, throttle_time_ms=0) -> bytes:"
     " the Produce response frame, size prefix included."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "odradek.protocol._produce_codec",
    .m_doc = "The Produce request parser and response encoder of the produce fast path, in C.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__produce_codec(void) {
    return PyModule_Create(&module);
}
