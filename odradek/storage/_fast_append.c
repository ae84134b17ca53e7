/*
 * Log.append's common case in one C call, for the produce fast path
 * (server/produce_fast_path.py -> Partition.append_plain).
 *
 * Why: an append that neither rolls nor reserves runs ~65 lines of Python across Log.append,
 * LogSegment.should_roll/append, SegmentIndex.track, OffsetIndex.append and
 * TimeIndex.maybe_append. The broker runs it once per partition per produce request, a few
 * milliseconds apart, with the CPU's caches cold from the client and from the request's own
 * bytes, where each line of Python costs about a microsecond (issue 8's measurements). Here
 * it is one call. The Python code stays the definition and the fallback: this function does
 * exactly what it does for the appends it takes, and declines every other one.
 *
 * Contract:
 *   append_to_active_segment(log, data, info) -> bool
 *
 * ``log`` is a storage.log.Log, ``data`` a contiguous buffer of whole validated batches with
 * their offsets assigned, ``info`` the tuple (first_offset, last_offset, max_timestamp,
 * offset_of_max_timestamp) of LogAppendInfo. True: the bytes were written at the end of the
 * active segment and the log's and segment's state moved exactly as
 * ``log.append(data, LogAppendInfo(*info))`` moves them. False, with nothing changed: that
 * call might do more or other than that, so the caller makes it. It is False when:
 *   - the log is closed, info is not a valid offset range at or after the log end offset,
 *     data is empty or larger than segment.bytes, or its offsets span more than 2**31 - 1;
 *   - a roll is due (LogSegment.should_roll), or the roll clock would need the wall clock
 *     (the segment is not empty and its first batch timestamp is unknown or negative, or the
 *     incoming max timestamp is negative): the clock is the log's, injected, read in Python;
 *   - the segment is sealed, its index not loaded, its file not open or not the handle
 *     cache's latest holder (LogSegment.handle touches the LRU), or disk space is due to be
 *     reserved (LogSegment._reserve_ahead);
 *   - an index entry would be refused (the ValueErrors of OffsetIndex.append and
 *     TimeIndex.maybe_append).
 * OSError when the write fails (ENOSPC, EIO), with the segment's size and indexes, the log end
 * offset and the file's length unchanged (cut back), as in Python. Attribute
 * errors are programming errors and propagate.
 *
 * What this reads and writes of the Python objects (keep in step with them):
 *   Log:          _lock (RLock, held throughout), _closed, _leo, config, _view.segments[-1]
 *   LogConfig:    segment_bytes, max_segment_ms
 *   LogSegment:   sealed, size, base_offset, roll_jitter_ms, _first_batch_ts, _reserved_to,
 *                 _index, _file (.fd), _cache (.last)
 *   SegmentIndex: offsets, times, max_timestamp, bytes_since_entry, _interval
 *   OffsetIndex / TimeIndex (IndexEntries): _buf, base_offset, max_entries; entries are
 *                 big-endian (int32 relative offset, int32 position) and (int64 timestamp,
 *                 int32 relative offset).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

enum { OFFSET_ENTRY = 8, TIME_ENTRY = 12 };
#define I32_MAX 2147483647LL

static long long reserve_from; /* storage.segment.RESERVE_FROM */

static PyObject *s_lock, *s_closed, *s_leo, *s_config, *s_view, *s_segments, *s_segment_bytes,
    *s_max_segment_ms, *s_sealed, *s_size, *s_base_offset, *s_roll_jitter_ms, *s_first_batch_ts,
    *s_reserved_to, *s_index, *s_file, *s_fd, *s_cache, *s_last, *s_offsets, *s_times,
    *s_max_timestamp, *s_bytes_since_entry, *s_interval, *s_buf, *s_max_entries, *s_acquire,
    *s_release;

/* obj.name as a long long; -1 with an exception set on failure (check PyErr_Occurred). */
static long long get_ll(PyObject *obj, PyObject *name) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL)
        return -1;
    long long r = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return r;
}

static int set_ll(PyObject *obj, PyObject *name, long long value) {
    PyObject *v = PyLong_FromLongLong(value);
    if (v == NULL)
        return -1;
    int r = PyObject_SetAttr(obj, name, v);
    Py_DECREF(v);
    return r;
}

static uint32_t be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static void put32(unsigned char *p, uint32_t v) {
    p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v;
}

/* One index's buffer and its limits. */
typedef struct {
    PyObject *buf; /* the bytearray (a new reference) */
    long long base, max_entries;
} Entries;

static int load_entries(PyObject *entries, Entries *out) {
    out->buf = PyObject_GetAttr(entries, s_buf);
    if (out->buf == NULL)
        return -1;
    if (!PyByteArray_Check(out->buf)) {
        PyErr_SetString(PyExc_TypeError, "index buffer is not a bytearray");
        return -1;
    }
    out->base = get_ll(entries, s_base_offset);
    if (out->base == -1 && PyErr_Occurred())
        return -1;
    out->max_entries = get_ll(entries, s_max_entries);
    return out->max_entries == -1 && PyErr_Occurred() ? -1 : 0;
}

static int is_full(const Entries *e, Py_ssize_t entry_size) {
    return PyByteArray_GET_SIZE(e->buf) >= e->max_entries * entry_size;
}

static int append_bytes(PyObject *buf, const unsigned char *entry, Py_ssize_t n) {
    Py_ssize_t len = PyByteArray_GET_SIZE(buf);
    if (PyByteArray_Resize(buf, len + n) < 0)
        return -1;
    memcpy(PyByteArray_AS_STRING(buf) + len, entry, n);
    return 0;
}

/* What the append does to the segment's index (SegmentIndex.track), worked out before any
 * byte is written so that a refusal can still decline. */
typedef struct {
    PyObject *index; /* a new reference, like the entries' buffers */
    Entries offsets, times;
    long long bytes_since_entry, interval;
    long long max_ts, max_ts_offset; /* the index's largest timestamp after this append */
    int new_max, offset_entry, time_entry;
    unsigned char offset_bytes[OFFSET_ENTRY], time_bytes[TIME_ENTRY];
} IndexPlan;

/* 1: planned; 0: decline; -1: error. */
static int plan_index(IndexPlan *p, long long position, long long last_offset, long long max_ts,
                      long long ts_offset) {
    PyObject *mt = PyObject_GetAttr(p->index, s_max_timestamp);
    if (mt == NULL)
        return -1;
    if (!PyTuple_Check(mt) || PyTuple_GET_SIZE(mt) != 2) {
        Py_DECREF(mt);
        PyErr_SetString(PyExc_TypeError, "SegmentIndex.max_timestamp is not a pair");
        return -1;
    }
    p->max_ts = PyLong_AsLongLong(PyTuple_GET_ITEM(mt, 0));
    p->max_ts_offset = PyLong_AsLongLong(PyTuple_GET_ITEM(mt, 1));
    Py_DECREF(mt);
    if (PyErr_Occurred())
        return -1;
    p->new_max = max_ts > p->max_ts;
    if (p->new_max) {
        p->max_ts = max_ts;
        p->max_ts_offset = ts_offset;
    }
    p->offset_entry = p->time_entry = 0;
    if (p->bytes_since_entry <= p->interval) /* (neither index is full: the roll test) */
        return 1;
    /* OffsetIndex.append(last_offset, position) */
    long long rel = last_offset - p->offsets.base;
    if (rel < 0 || rel > I32_MAX || position < 0 || position > I32_MAX)
        return 0;
    Py_ssize_t len = PyByteArray_GET_SIZE(p->offsets.buf);
    if (len >= OFFSET_ENTRY) {
        const unsigned char *e = (unsigned char *)PyByteArray_AS_STRING(p->offsets.buf) + len - OFFSET_ENTRY;
        if (rel <= (int32_t)be32(e) || position <= (int32_t)be32(e + 4))
            return 0;
    }
    p->offset_entry = 1;
    put32(p->offset_bytes, (uint32_t)rel);
    put32(p->offset_bytes + 4, (uint32_t)position);
    /* TimeIndex.maybe_append(*max_timestamp) */
    rel = p->max_ts_offset - p->times.base;
    if (rel < 0 || rel > I32_MAX)
        return 0;
    len = PyByteArray_GET_SIZE(p->times.buf);
    if (len >= TIME_ENTRY) {
        const unsigned char *e = (unsigned char *)PyByteArray_AS_STRING(p->times.buf) + len - TIME_ENTRY;
        int64_t last_ts = (int64_t)(((uint64_t)be32(e) << 32) | be32(e + 4));
        if (p->max_ts <= last_ts)
            return 1;
        if (rel < (int32_t)be32(e + 8))
            return 0;
    } else if (p->max_ts < 0) {
        return 1;
    }
    p->time_entry = 1;
    put32(p->time_bytes, (uint32_t)((uint64_t)p->max_ts >> 32));
    put32(p->time_bytes + 4, (uint32_t)p->max_ts);
    put32(p->time_bytes + 8, (uint32_t)rel);
    return 1;
}

static int apply_index(IndexPlan *p, long long size) {
    if (p->new_max) {
        PyObject *mt = Py_BuildValue("(LL)", p->max_ts, p->max_ts_offset);
        if (mt == NULL)
            return -1;
        int r = PyObject_SetAttr(p->index, s_max_timestamp, mt);
        Py_DECREF(mt);
        if (r < 0)
            return -1;
    }
    long long since = p->bytes_since_entry;
    if (p->offset_entry) {
        if (append_bytes(p->offsets.buf, p->offset_bytes, OFFSET_ENTRY) < 0)
            return -1;
        if (p->time_entry && append_bytes(p->times.buf, p->time_bytes, TIME_ENTRY) < 0)
            return -1;
        since = 0;
    }
    return set_ll(p->index, s_bytes_since_entry, since + size);
}

/* The append as planned: where it goes and what it changes. */
typedef struct {
    long long first, last, max_ts, ts_offset; /* info */
    PyObject *segment, *file;                 /* new references */
    long long position;                       /* the segment's size before */
    int fd, first_ts_unknown;
    IndexPlan index;
} Append;

/* LogSegment.should_roll, with its clock branch declined; 1: no roll, 0: decline, -1: error. */
static int no_roll_due(PyObject *log, Append *a, long long size) {
    PyObject *config = PyObject_GetAttr(log, s_config);
    if (config == NULL)
        return -1;
    long long segment_bytes = get_ll(config, s_segment_bytes);
    long long max_segment_ms = PyErr_Occurred() ? -1 : get_ll(config, s_max_segment_ms);
    Py_DECREF(config);
    if (PyErr_Occurred())
        return -1;
    long long base = get_ll(a->segment, s_base_offset);
    if (PyErr_Occurred())
        return -1;
    if (size > segment_bytes || a->position > segment_bytes - size || a->last - base > I32_MAX)
        return 0;
    if (is_full(&a->index.offsets, OFFSET_ENTRY) || is_full(&a->index.times, TIME_ENTRY))
        return 0;
    PyObject *first_ts = PyObject_GetAttr(a->segment, s_first_batch_ts);
    if (first_ts == NULL)
        return -1;
    a->first_ts_unknown = first_ts == Py_None;
    long long first = a->first_ts_unknown ? -1 : PyLong_AsLongLong(first_ts);
    Py_DECREF(first_ts);
    if (PyErr_Occurred())
        return -1;
    if (a->position == 0)
        return 1; /* an empty segment never rolls by time */
    if (first < 0 || a->max_ts < 0)
        return 0; /* the roll clock would read the wall clock */
    long long jitter = get_ll(a->segment, s_roll_jitter_ms);
    if (PyErr_Occurred())
        return -1;
    return a->max_ts - first < max_segment_ms - jitter;
}

/* The active segment's file, if open and the handle cache's latest: 1, 0 (decline), -1. */
static int open_file(Append *a) {
    PyObject *file = PyObject_GetAttr(a->segment, s_file);
    if (file == NULL)
        return -1;
    int go = 0;
    if (file != Py_None) {
        PyObject *cache = PyObject_GetAttr(a->segment, s_cache);
        PyObject *last = cache == NULL ? NULL : PyObject_GetAttr(cache, s_last);
        Py_XDECREF(cache);
        if (last == NULL) {
            Py_DECREF(file);
            return -1;
        }
        go = last == a->segment;
        Py_DECREF(last);
        if (go) {
            long long fd = get_ll(file, s_fd);
            go = PyErr_Occurred() ? -1 : fd >= 0 && fd <= INT32_MAX;
            a->fd = (int)fd;
        }
    }
    if (go > 0)
        a->file = file; /* held until the write is done: the descriptor closes with it */
    else
        Py_DECREF(file);
    return go;
}

/* A truth-valued attribute; -1 on error. */
static int get_bool(PyObject *obj, PyObject *name) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL)
        return -1;
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

/* The active segment (new reference), its index loaded into ``a``; NULL with no error set
 * when the append must decline (sealed, or no index). */
static PyObject *active_segment(PyObject *log, Append *a) {
    PyObject *view = PyObject_GetAttr(log, s_view);
    PyObject *segments = view == NULL ? NULL : PyObject_GetAttr(view, s_segments);
    Py_XDECREF(view);
    if (segments == NULL)
        return NULL;
    Py_ssize_t n = PyTuple_Check(segments) ? PyTuple_GET_SIZE(segments) : 0;
    PyObject *segment = n ? PyTuple_GET_ITEM(segments, n - 1) : NULL;
    Py_XINCREF(segment);
    Py_DECREF(segments);
    if (segment == NULL) {
        PyErr_SetString(PyExc_TypeError, "the log's segments are not a non-empty tuple");
        return NULL;
    }
    int sealed = get_bool(segment, s_sealed);
    PyObject *index = sealed ? NULL : PyObject_GetAttr(segment, s_index);
    if (index == Py_None)
        Py_CLEAR(index);
    if (index == NULL) {
        Py_DECREF(segment);
        return NULL; /* sealed, no index, or an error */
    }
    a->index.index = index;
    return segment;
}

/* Everything but the write: 1 to append, 0 to decline, -1 on error. The log's lock is held. */
static int plan(PyObject *log, Append *a, long long size) {
    int closed = get_bool(log, s_closed);
    if (closed)
        return closed < 0 ? -1 : 0;
    long long leo = get_ll(log, s_leo);
    if (PyErr_Occurred())
        return -1;
    if (a->first < leo || a->last - a->first > I32_MAX)
        return 0;
    a->segment = active_segment(log, a);
    if (a->segment == NULL)
        return PyErr_Occurred() ? -1 : 0;
    IndexPlan *ip = &a->index;
    PyObject *offsets = PyObject_GetAttr(ip->index, s_offsets);
    int r = offsets == NULL ? -1 : load_entries(offsets, &ip->offsets);
    Py_XDECREF(offsets);
    PyObject *times = r < 0 ? NULL : PyObject_GetAttr(ip->index, s_times);
    r = times == NULL ? -1 : load_entries(times, &ip->times);
    Py_XDECREF(times);
    if (r < 0)
        return -1;
    a->position = get_ll(a->segment, s_size);
    if (PyErr_Occurred())
        return -1;
    if ((r = no_roll_due(log, a, size)) <= 0 || (r = open_file(a)) <= 0)
        return r;
    long long reserved_to = get_ll(a->segment, s_reserved_to);
    ip->bytes_since_entry = PyErr_Occurred() ? -1 : get_ll(ip->index, s_bytes_since_entry);
    ip->interval = PyErr_Occurred() ? -1 : get_ll(ip->index, s_interval);
    if (PyErr_Occurred())
        return -1;
    if (a->position + size > reserved_to && a->position + size >= reserve_from)
        return 0; /* LogSegment._reserve_ahead's turn */
    long long ts_offset = a->ts_offset < a->first ? a->first : a->ts_offset;
    return plan_index(ip, a->position, a->last, a->max_ts, ts_offset > a->last ? a->last : ts_offset);
}

/* pwrite all of ``buf`` at ``position`` (LogSegment.append: one call nearly always does). */
static int write_all(int fd, const char *buf, Py_ssize_t len, long long position) {
    Py_ssize_t done = 0;
    int err = 0;
    Py_BEGIN_ALLOW_THREADS
    while (done < len) {
        ssize_t n = pwrite(fd, buf + done, (size_t)(len - done), (off_t)(position + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            err = n < 0 ? errno : EIO;
            break;
        }
        done += n;
    }
    Py_END_ALLOW_THREADS
    if (err) {
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    return 0;
}

/* After the write, in LogSegment.append's and Log.append's order. */
static int apply(PyObject *log, Append *a, long long size) {
    if (set_ll(a->segment, s_size, a->position + size) < 0)
        return -1;
    if (a->first_ts_unknown && set_ll(a->segment, s_first_batch_ts, a->max_ts) < 0)
        return -1;
    if (apply_index(&a->index, size) < 0)
        return -1;
    return set_ll(log, s_leo, a->last + 1);
}

/* A failed write cuts the file back to the segment's size, as LogSegment.cut_back does (no
 * torn batch past the end; shrinking needs no free space), keeping the write's error. */
static int cut_back(Append *a) {
    PyObject *exc_type, *exc, *tb;
    PyErr_Fetch(&exc_type, &exc, &tb);
    int r;
    Py_BEGIN_ALLOW_THREADS
    r = ftruncate(a->fd, (off_t)a->position);
    Py_END_ALLOW_THREADS
    (void)r; /* if even that fails, recovery or the next append deals with the tail */
    r = set_ll(a->segment, s_reserved_to, 0); /* ftruncate freed any reserved blocks */
    if (r < 0) {
        Py_XDECREF(exc_type); Py_XDECREF(exc); Py_XDECREF(tb);
        return -1;
    }
    PyErr_Restore(exc_type, exc, tb);
    return -1;
}

static int locked_append(PyObject *log, Py_buffer *data, Append *a) {
    int r = plan(log, a, data->len);
    if (r <= 0)
        return r;
    if (write_all(a->fd, data->buf, data->len, a->position) < 0)
        return cut_back(a);
    return apply(log, a, data->len) < 0 ? -1 : 1;
}

static int parse_info(PyObject *info, Append *a) {
    if (!PyTuple_Check(info) || PyTuple_GET_SIZE(info) != 4) {
        PyErr_SetString(PyExc_TypeError, "info must be (first_offset, last_offset, max_timestamp, "
                                         "offset_of_max_timestamp)");
        return -1;
    }
    long long *fields[4] = {&a->first, &a->last, &a->max_ts, &a->ts_offset};
    for (int i = 0; i < 4; i++) {
        PyObject *v = PyTuple_GET_ITEM(info, i);
        if (!PyLong_Check(v)) {
            PyErr_SetString(PyExc_TypeError, "info fields must be int");
            return -1;
        }
        *fields[i] = PyLong_AsLongLong(v);
        if (*fields[i] == -1 && PyErr_Occurred())
            return -1;
    }
    return 0;
}

static PyObject *append_to_active_segment(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "append_to_active_segment(log, data, info)");
        return NULL;
    }
    Append a = {0};
    Py_buffer data;
    if (parse_info(args[2], &a) < 0 || PyObject_GetBuffer(args[1], &data, PyBUF_SIMPLE) < 0)
        return NULL;
    if (data.len == 0 || a.first < 0 || a.last < a.first) {
        PyBuffer_Release(&data);
        Py_RETURN_FALSE; /* Log.append / LogAppendInfo raise */
    }
    PyObject *lock = PyObject_GetAttr(args[0], s_lock);
    PyObject *held = lock == NULL ? NULL : PyObject_CallMethodNoArgs(lock, s_acquire);
    int r = -1;
    if (held != NULL) {
        Py_DECREF(held);
        r = locked_append(args[0], &data, &a);
        PyObject *exc_type, *exc, *tb;
        PyErr_Fetch(&exc_type, &exc, &tb);
        PyObject *released = PyObject_CallMethodNoArgs(lock, s_release);
        if (released == NULL) {
            r = -1;
            Py_XDECREF(exc_type); Py_XDECREF(exc); Py_XDECREF(tb);
        } else {
            Py_DECREF(released);
            PyErr_Restore(exc_type, exc, tb);
        }
    }
    Py_XDECREF(lock);
    Py_XDECREF(a.segment);
    Py_XDECREF(a.file);
    Py_XDECREF(a.index.index);
    Py_XDECREF(a.index.offsets.buf);
    Py_XDECREF(a.index.times.buf);
    PyBuffer_Release(&data);
    if (r < 0)
        return NULL;
    return PyBool_FromLong(r);
}

static PyMethodDef methods[] = {
    {"append_to_active_segment", (PyCFunction)(void (*)(void))append_to_active_segment,
     METH_FASTCALL,
     "append_to_active_segment(log, data, info) -> bool\n\n"
     "Append ``data`` to the log's active segment as Log.append(data, LogAppendInfo(*info))\n"
     "would when no roll or reservation is due; False, with nothing changed, when the caller\n"
     "must call Log.append itself."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "odradek.storage._fast_append",
    .m_doc = "Log.append's common case (no roll, no reservation) in one C call.",
    .m_size = -1,
    .m_methods = methods,
};

static int intern_names(void) {
    struct { PyObject **slot; const char *name; } names[] = {
        {&s_lock, "_lock"}, {&s_closed, "_closed"}, {&s_leo, "_leo"}, {&s_config, "config"},
        {&s_view, "_view"}, {&s_segments, "segments"}, {&s_segment_bytes, "segment_bytes"},
        {&s_max_segment_ms, "max_segment_ms"}, {&s_sealed, "sealed"}, {&s_size, "size"},
        {&s_base_offset, "base_offset"}, {&s_roll_jitter_ms, "roll_jitter_ms"},
        {&s_first_batch_ts, "_first_batch_ts"}, {&s_reserved_to, "_reserved_to"},
        {&s_index, "_index"}, {&s_file, "_file"}, {&s_fd, "fd"}, {&s_cache, "_cache"},
        {&s_last, "last"}, {&s_offsets, "offsets"}, {&s_times, "times"},
        {&s_max_timestamp, "max_timestamp"}, {&s_bytes_since_entry, "bytes_since_entry"},
        {&s_interval, "_interval"}, {&s_buf, "_buf"}, {&s_max_entries, "max_entries"},
        {&s_acquire, "acquire"}, {&s_release, "release"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if ((*names[i].slot = PyUnicode_InternFromString(names[i].name)) == NULL)
            return -1;
    return 0;
}

PyMODINIT_FUNC PyInit__fast_append(void) {
    if (intern_names() < 0)
        return NULL;
    PyObject *segment = PyImport_ImportModule("odradek.storage.segment");
    if (segment == NULL)
        return NULL;
    PyObject *value = PyObject_GetAttrString(segment, "RESERVE_FROM");
    Py_DECREF(segment);
    if (value == NULL)
        return NULL;
    reserve_from = PyLong_AsLongLong(value);
    Py_DECREF(value);
    if (reserve_from == -1 && PyErr_Occurred())
        return NULL;
    return PyModule_Create(&module);
}
