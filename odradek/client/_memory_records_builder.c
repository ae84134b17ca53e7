/*
 * MemoryRecordsBuilder: the records of a v2 batch being filled by the producer, appended in C.
 *
 * Java's producer builds each batch in a MemoryRecordsBuilder; this is odradek's, reduced to the
 * one step that runs once per record: ``append``. It appends the record to ``buf`` (a bytearray
 * holding the 61-byte batch header placeholder, then the records) in the v2 layout
 *
 *     length varint | attributes 0 | timestampDelta varlong | offsetDelta varint |
 *     keyLength varint, key | valueLength varint, value | headerCount varint 0
 *
 * (varints zigzag-encoded, a null key or value is length -1 and no bytes), counts it, keeps its
 * timestamp, and returns its future: ``future_type((result, index))``. Everything else of a batch
 * (records with headers, sealing, completion) is Python, in ``producer_batch.ProducerBatch``, a
 * subclass that reads and writes the same fields as attributes.
 *
 * ``MemoryRecordsBuilder(buf, timestamps, limit, result, future_type)`` starts with ``buf`` holding
 * just the header placeholder (at most ``limit`` bytes) and ``timestamps`` an empty list that it
 * fills (the batch's ``ProduceRequestResult`` reads record timestamps from the same list).
 *
 * Contract of ``append(timestamp, key, value, future_type=None)``:
 * - ``timestamp`` is milliseconds since the epoch, or None for now (CLOCK_REALTIME, as
 *   ``time.time_ns() // 1_000_000``); ``key`` and ``value`` are None or bytes-like objects.
 * - The first record (``count == 0``) always fits and sets ``base_ts``. A later record that
 *   would take ``len(buf)`` past ``limit`` is refused: the result is None and nothing changed.
 * - Bad arguments raise TypeError (not bytes-like) or OverflowError (timestamp outside int64)
 *   before anything changes.
 * - Invariants: ``count`` records follow the header in ``buf``; ``timestamps`` holds their
 *   timestamps in order (``timestamps[i] - base_ts`` is record i's delta).
 * - ``count`` stays within 0..2**31-1 (a v2 batch's record count and offset deltas are int32):
 *   an append to a batch whose ``count`` (writable, as ``ProducerBatch`` counts the records it
 *   appends in Python) is outside 0..2**31-2 raises OverflowError and changes nothing.
 * - A builder whose ``__init__`` did not run (``MemoryRecordsBuilder.__new__``, or a subclass
 *   that skipped it) refuses ``append`` with RuntimeError.
 *
 * References: ``append`` holds its own reference to every object it uses (buf, timestamps,
 * result, the future type) from the start, because getting a key's or value's buffer can run
 * Python code (a class's ``__buffer__``, from Python 3.12), and so can allocating (a garbage
 * collection runs finalizers and ``gc.callbacks``); such code may re-run ``__init__`` or set
 * ``buf`` and drop the builder's references. The record goes to the ``buf`` that ``append``
 * started with, and only if the builder still has that ``buf``, those ``timestamps`` and that
 * ``count`` once both buffers are held (else RuntimeError, nothing changed).
 *
 * The future is made without a Python call when ``future_type`` is a tuple subclass that keeps
 * tuple's __new__ and object's __init__ (RecordFuture, SyncRecordFuture): it is allocated as a
 * 2-tuple of that type, exactly what ``future_type((result, index))`` would give.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

typedef struct {
    PyObject_HEAD
    PyObject *buf;          /* bytearray: header placeholder + records; None once sealed */
    PyObject *timestamps;   /* list of int, one per record */
    PyObject *result;       /* the batch's ProduceRequestResult */
    PyObject *future_type;  /* what append returns by default */
    Py_ssize_t count;
    Py_ssize_t limit;
    long long base_ts;
} Builder;

/* Bytes of the unsigned varint of v. */
static inline Py_ssize_t uvarint_size(uint64_t v) {
    Py_ssize_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline uint64_t zigzag(int64_t v) {
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline char *put_uvarint(char *p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (char)((v & 0x7F) | 0x80);
        v >>= 7;
    }
    *p++ = (char)v;
    return p;
}

/* The length field and bytes of a key or value: -1 (zigzag 1) for null. */
static inline Py_ssize_t field_size(const Py_buffer *b) {
    return b->obj == NULL ? 1 : uvarint_size(zigzag(b->len)) + b->len;
}

static inline char *put_field(char *p, const Py_buffer *b) {
    if (b->obj == NULL) {
        *p++ = 0x01;
        return p;
    }
    p = put_uvarint(p, zigzag(b->len));
    memcpy(p, b->buf, (size_t)b->len);
    return p + b->len;
}

/* A bytes-like object's buffer, or an empty Py_buffer (obj NULL) for None. */
static int get_field(PyObject *o, Py_buffer *b, const char *what) {
    if (o == Py_None) {
        b->obj = NULL;
        return 0;
    }
    if (PyObject_GetBuffer(o, b, PyBUF_SIMPLE) < 0) {
        PyErr_Format(PyExc_TypeError, "record %s must be bytes-like or None, not %.100s",
                     what, Py_TYPE(o)->tp_name);
        return -1;
    }
    return 0;
}

static int is_plain_tuple_type(PyObject *t) {
    if (!PyType_Check(t)) {
        return 0;
    }
    PyTypeObject *type = (PyTypeObject *)t;
    return PyType_IsSubtype(type, &PyTuple_Type) && type->tp_new == PyTuple_Type.tp_new
           && type->tp_init == PyBaseObject_Type.tp_init;
}

/* future_type((result, index)), without a Python call for plain tuple subclasses. The caller
 * holds references to `result` and `future_type`. */
static PyObject *make_future(PyObject *result, PyObject *future_type, Py_ssize_t index) {
    PyObject *i = PyLong_FromSsize_t(index);
    if (i == NULL) {
        return NULL;
    }
    if (is_plain_tuple_type(future_type)) {
        PyTypeObject *type = (PyTypeObject *)future_type;
        PyObject *f = type->tp_alloc(type, 2);
        if (f == NULL) {
            Py_DECREF(i);
            return NULL;
        }
        Py_INCREF(result);
        PyTuple_SET_ITEM(f, 0, result);
        PyTuple_SET_ITEM(f, 1, i);
        return f;
    }
    PyObject *pair = PyTuple_Pack(2, result, i);
    Py_DECREF(i);
    if (pair == NULL) {
        return NULL;
    }
    PyObject *f = PyObject_CallOneArg(future_type, pair);
    Py_DECREF(pair);
    return f;
}

static PyObject *now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return PyLong_FromLongLong((long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

/* Write record number `count` into `buf`; 1 when appended, 0 when it does not fit, -1 on
 * error. The sizes cannot overflow: a key's or value's length is that of a buffer in memory,
 * and the record's end is checked against PY_SSIZE_T_MAX before the resize. */
static int write_record(PyObject *buf, Py_ssize_t count, Py_ssize_t limit, long long delta,
                        const Py_buffer *key, const Py_buffer *value) {
    Py_ssize_t at = PyByteArray_GET_SIZE(buf);
    if (field_size(key) > PY_SSIZE_T_MAX / 4 || field_size(value) > PY_SSIZE_T_MAX / 4) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t body = 1 + uvarint_size(zigzag(delta)) + uvarint_size(zigzag(count)) + field_size(key)
                      + field_size(value) + 1;
    Py_ssize_t framed = uvarint_size(zigzag(body)) + body;
    if (count > 0 && (at > limit || framed > limit - at)) {
        return 0;
    }
    if (framed > PY_SSIZE_T_MAX - at) {
        PyErr_NoMemory();
        return -1;
    }
    if (PyByteArray_Resize(buf, at + framed) < 0) {
        return -1;
    }
    char *p = PyByteArray_AS_STRING(buf) + at;
    p = put_uvarint(p, zigzag(body));
    *p++ = 0; /* attributes */
    p = put_uvarint(p, zigzag(delta));
    p = put_uvarint(p, zigzag(count));
    p = put_field(p, key);
    p = put_field(p, value);
    *p = 0; /* no headers */
    return 1;
}

/* Append one record. `future_type` is borrowed from the caller (an argument, or the builder's
 * own, which the caller holds a reference to). Every object of the builder used here is held
 * with a reference of this function's own: see "References" at the top. */
static PyObject *append_record(Builder *self, PyObject *timestamp, PyObject *key_obj,
                               PyObject *value_obj, PyObject *future_type) {
    if (self->timestamps == NULL || self->result == NULL || self->future_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "MemoryRecordsBuilder.__init__ was not called");
        return NULL;
    }
    if (self->buf == NULL || !PyByteArray_CheckExact(self->buf)) {
        PyErr_SetString(PyExc_RuntimeError, "the batch is sealed");
        return NULL;
    }
    long long ts = PyLong_AsLongLong(timestamp);
    if (ts == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t count = self->count;
    if (count < 0 || count >= INT32_MAX) {
        return PyErr_Format(PyExc_OverflowError, "a batch holds at most %d records (count is %zd)",
                            INT32_MAX, count);
    }
    long long base = count ? self->base_ts : ts;
    long long delta;
    if (__builtin_sub_overflow(ts, base, &delta)) {
        PyErr_SetString(PyExc_OverflowError, "timestamp too far from the batch's first");
        return NULL;
    }
    PyObject *buf = Py_NewRef(self->buf);
    PyObject *timestamps = Py_NewRef(self->timestamps);
    PyObject *result = Py_NewRef(self->result);
    PyObject *out = NULL;
    Py_buffer key = {.obj = NULL}, value = {.obj = NULL};
    if (get_field(key_obj, &key, "key") < 0 || get_field(value_obj, &value, "value") < 0) {
        goto done;
    }
    /* Getting the buffers may have run Python code that changed the builder. */
    if (self->buf != buf || self->timestamps != timestamps || self->count != count
        || (count && self->base_ts != base)) {
        PyErr_SetString(PyExc_RuntimeError, "the batch changed while a record was appended");
        goto done;
    }
    Py_ssize_t before = PyByteArray_GET_SIZE(buf);
    int written = write_record(buf, count, self->limit, delta, &key, &value);
    if (written <= 0) {
        out = written == 0 ? Py_NewRef(Py_None) : NULL;
        goto done;
    }
    if (PyList_Append(timestamps, timestamp) < 0) {
        /* Keep the invariant (one timestamp per record): take the record back. */
        PyObject *type, *val, *tb;
        PyErr_Fetch(&type, &val, &tb);
        (void)PyByteArray_Resize(buf, before); /* shrinking does not fail */
        PyErr_Restore(type, val, tb);
        goto done;
    }
    self->base_ts = base;
    self->count = count + 1;
    out = make_future(result, future_type, count);
done:
    if (key.obj != NULL) {
        PyBuffer_Release(&key);
    }
    if (value.obj != NULL) {
        PyBuffer_Release(&value);
    }
    Py_DECREF(buf);
    Py_DECREF(timestamps);
    Py_DECREF(result);
    return out;
}

static PyObject *Builder_append(Builder *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 3 || nargs > 4) {
        PyErr_Format(PyExc_TypeError, "append() takes 3 or 4 arguments (%zd given)", nargs);
        return NULL;
    }
    if (self->future_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "MemoryRecordsBuilder.__init__ was not called");
        return NULL;
    }
    /* Our own reference: the default future type is the builder's, which Python code run
     * during the append may replace (by calling __init__ again). */
    PyObject *future_type = Py_NewRef(nargs == 4 && args[3] != Py_None ? args[3] : self->future_type);
    PyObject *ts = NULL;
    if (args[0] == Py_None) {
        ts = now_ms();
    } else if (PyLong_Check(args[0])) {
        ts = Py_NewRef(args[0]);
    } else {
        PyErr_Format(PyExc_TypeError, "timestamp must be an int or None, not %.100s",
                     Py_TYPE(args[0])->tp_name);
    }
    PyObject *f = ts == NULL ? NULL : append_record(self, ts, args[1], args[2], future_type);
    Py_XDECREF(ts);
    Py_DECREF(future_type);
    return f;
}

static int Builder_init(Builder *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"buf", "timestamps", "limit", "result", "future_type", NULL};
    PyObject *buf, *timestamps, *result, *future_type;
    Py_ssize_t limit;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O!nOO", names, &PyByteArray_Type, &buf,
                                     &PyList_Type, &timestamps, &limit, &result, &future_type)) {
        return -1;
    }
    if (PyList_GET_SIZE(timestamps) != 0 || PyByteArray_GET_SIZE(buf) > limit) {
        PyErr_SetString(PyExc_ValueError, "a builder starts with no records and buf within limit");
        return -1;
    }
    Py_INCREF(buf);
    Py_INCREF(timestamps);
    Py_INCREF(result);
    Py_INCREF(future_type);
    Py_XSETREF(self->buf, buf);
    Py_XSETREF(self->timestamps, timestamps);
    Py_XSETREF(self->result, result);
    Py_XSETREF(self->future_type, future_type);
    self->limit = limit;
    self->count = 0;
    self->base_ts = 0;
    return 0;
}

static int Builder_traverse(Builder *self, visitproc visit, void *arg) {
    Py_VISIT(self->buf);
    Py_VISIT(self->timestamps);
    Py_VISIT(self->result);
    Py_VISIT(self->future_type);
    return 0;
}

static int Builder_clear(Builder *self) {
    Py_CLEAR(self->buf);
    Py_CLEAR(self->timestamps);
    Py_CLEAR(self->result);
    Py_CLEAR(self->future_type);
    return 0;
}

static void Builder_dealloc(Builder *self) {
    PyObject_GC_UnTrack(self);
    Builder_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef Builder_methods[] = {
    {"append", (PyCFunction)(void (*)(void))Builder_append, METH_FASTCALL,
     "append(timestamp, key, value, future_type=None) -> future, or None when full"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Builder_members[] = {
    {"buf", T_OBJECT, offsetof(Builder, buf), 0, "bytearray: header placeholder, then records"},
    {"timestamps", T_OBJECT, offsetof(Builder, timestamps), READONLY, "record timestamps"},
    {"result", T_OBJECT, offsetof(Builder, result), READONLY, "the ProduceRequestResult"},
    {"future_type", T_OBJECT, offsetof(Builder, future_type), READONLY, "append's default future"},
    {"count", T_PYSSIZET, offsetof(Builder, count), 0, "records appended"},
    {"limit", T_PYSSIZET, offsetof(Builder, limit), 0, "bytes buf may reach"},
    {"base_ts", T_LONGLONG, offsetof(Builder, base_ts), 0, "first record's timestamp"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject BuilderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "odradek.client._memory_records_builder.MemoryRecordsBuilder",
    .tp_basicsize = sizeof(Builder),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The records of a v2 batch being filled (see the module's source for the contract).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Builder_init,
    .tp_dealloc = (destructor)Builder_dealloc,
    .tp_traverse = (traverseproc)Builder_traverse,
    .tp_clear = (inquiry)Builder_clear,
    .tp_methods = Builder_methods,
    .tp_members = Builder_members,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "odradek.client._memory_records_builder",
    .m_doc = "The producer's per-record append, in C (MemoryRecordsBuilder).",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__memory_records_builder(void) {
    if (PyType_Ready(&BuilderType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) {
        return NULL;
    }
    Py_INCREF(&BuilderType);
    if (PyModule_AddObject(m, "MemoryRecordsBuilder", (PyObject *)&BuilderType) < 0) {
        Py_DECREF(&BuilderType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
