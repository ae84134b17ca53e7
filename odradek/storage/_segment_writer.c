/*
 * The segment writer: one native thread that writes appends to segment files off the event
 * loop (storage/pending_appends.py, for the produce fast path).
 *
 * Why: on raw produce of 1 MiB batches the broker spends ~0.5 CPU-s per GB and `pwrite` (the
 * copy into the page cache) is 45-48% of it (bench/README.md, notes of 2026-12-06). On the
 * event-loop thread that write and the next request's receive and validation take turns;
 * here they overlap, on another core. The thread holds no GIL at any time: it never touches
 * a Python object, only the bytes and the descriptor a job was given, so the loop runs on
 * while it writes and nothing waits for a switch interval.
 *
 * Contract (module functions, one writer per process, started by the first submit):
 *   submit(file, data, position) -> WriteJob
 *       queue a pwrite of all of ``data`` (a contiguous buffer) at ``position`` of
 *       ``file.fd``. The job holds ``data``'s buffer and ``file`` until the write is done, so
 *       neither the memory nor the descriptor (a SegmentFile closes it when unreferenced) can
 *       go away under the thread. Jobs are written one at a time in submission order (so
 *       appends to one segment land in order).
 *   fileno() -> int
 *       an eventfd, readable once a job completed since the last collect(): the event loop
 *       watches it (server/produce_fast_path.py).
 *   collect() -> int
 *       consume that readiness and drop the writer's own references to completed jobs;
 *       returns how many. Call it before looking at jobs' ``done``, never after (a job
 *       completed in between would otherwise leave no readiness behind).
 *   hold() / release(): for tests, keep queued jobs unwritten (the thread not yet at them)
 *       until release(); a job being written when hold() is called still completes.
 *   WriteJob.done -> bool, WriteJob.error -> int (the errno of a failed write, 0 if written;
 *       EIO for a write of 0 bytes), WriteJob.wait() blocks, with the GIL released, until done.
 * A failed write stops at the error; what it wrote before is the caller's to cut back
 * (LogSegment.cut_back), and later jobs of the same file are written regardless: the caller
 * waits for them before cutting back (PendingAppends.settle).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

typedef struct WriteJob {
    PyObject_HEAD
    Py_buffer view;       /* released in dealloc (never before done: the queue holds a ref) */
    PyObject *file;       /* keeps the descriptor open */
    int fd;
    long long position;
    int done;             /* written with __atomic_store_n under mu; read without it */
    int error;
    struct WriteJob *next;
} WriteJob;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work = PTHREAD_COND_INITIALIZER;
static pthread_cond_t finished = PTHREAD_COND_INITIALIZER;
static WriteJob *queue_head, *queue_tail; /* waiting to be written */
static WriteJob *completed;               /* written, the queue's reference not yet dropped */
static int efd = -1;
static int started;
static int held; /* hold(): jobs stay queued, unwritten, until release() (tests) */

static int write_all(int fd, const char *buf, Py_ssize_t len, long long position) {
    Py_ssize_t done = 0;
    while (done < len) {
        ssize_t n = pwrite(fd, buf + done, (size_t)(len - done), (off_t)(position + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? errno : EIO;
        done += n;
    }
    return 0;
}

static void *run(void *arg) {
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&mu);
        while (queue_head == NULL || held)
            pthread_cond_wait(&work, &mu);
        WriteJob *job = queue_head;
        queue_head = job->next;
        if (queue_head == NULL)
            queue_tail = NULL;
        pthread_mutex_unlock(&mu);

        int error = write_all(job->fd, job->view.buf, job->view.len, job->position);

        pthread_mutex_lock(&mu);
        job->error = error;
        __atomic_store_n(&job->done, 1, __ATOMIC_RELEASE);
        int was_empty = completed == NULL;
        job->next = completed;
        completed = job;
        pthread_cond_broadcast(&finished);
        pthread_mutex_unlock(&mu);
        if (was_empty) {
            uint64_t one = 1;
            ssize_t r = write(efd, &one, sizeof one);
            (void)r; /* the counter cannot overflow at one increment per collect */
        }
    }
    return NULL;
}

/* A forked child has no writer thread: it starts its own on its first submit (the parent's
 * queued jobs are the parent's; their memory is the child's copy, never written or freed). */
static void forget_after_fork(void) {
    pthread_mutex_init(&mu, NULL);
    pthread_cond_init(&work, NULL);
    pthread_cond_init(&finished, NULL);
    queue_head = queue_tail = completed = NULL;
    if (efd >= 0)
        close(efd);
    efd = -1;
    started = held = 0;
}

/* The thread and its eventfd, once; -1 with an exception set on failure. */
static int start(void) {
    if (started)
        return 0;
    efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (efd < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    /* The thread takes no signal: they are the main thread's (asyncio's handlers). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t thread;
    int r = pthread_create(&thread, NULL, run, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (r != 0) {
        close(efd);
        efd = -1;
        errno = r;
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    pthread_detach(thread);
    started = 1;
    return 0;
}

static void job_dealloc(WriteJob *self) {
    if (self->view.obj != NULL)
        PyBuffer_Release(&self->view);
    Py_XDECREF(self->file);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *job_wait(WriteJob *self, PyObject *unused) {
    (void)unused;
    if (!__atomic_load_n(&self->done, __ATOMIC_ACQUIRE)) {
        Py_BEGIN_ALLOW_THREADS
        pthread_mutex_lock(&mu);
        while (!self->done)
            pthread_cond_wait(&finished, &mu);
        pthread_mutex_unlock(&mu);
        Py_END_ALLOW_THREADS
    }
    Py_RETURN_NONE;
}

static PyObject *job_get_done(WriteJob *self, void *closure) {
    (void)closure;
    return PyBool_FromLong(__atomic_load_n(&self->done, __ATOMIC_ACQUIRE));
}

static PyObject *job_get_error(WriteJob *self, void *closure) {
    (void)closure;
    if (!__atomic_load_n(&self->done, __ATOMIC_ACQUIRE))
        return PyLong_FromLong(0);
    return PyLong_FromLong(self->error);
}

static PyMethodDef job_methods[] = {
    {"wait", (PyCFunction)job_wait, METH_NOARGS, "Block (GIL released) until the write is done."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef job_getset[] = {
    {"done", (getter)job_get_done, NULL, "The write finished (written, or failed).", NULL},
    {"error", (getter)job_get_error, NULL, "errno of a failed write; 0 if written or not done.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject WriteJobType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "odradek.storage._segment_writer.WriteJob",
    .tp_basicsize = sizeof(WriteJob),
    .tp_dealloc = (destructor)job_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One queued pwrite (see the module docstring).",
    .tp_methods = job_methods,
    .tp_getset = job_getset,
};

static PyObject *submit(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "submit(file, data, position)");
        return NULL;
    }
    PyObject *fd_obj = PyObject_GetAttrString(args[0], "fd");
    if (fd_obj == NULL)
        return NULL;
    long fd = PyLong_AsLong(fd_obj);
    Py_DECREF(fd_obj);
    if (fd == -1 && PyErr_Occurred())
        return NULL;
    long long position = PyLong_AsLongLong(args[2]);
    if (position == -1 && PyErr_Occurred())
        return NULL;
    if (fd < 0 || fd > INT32_MAX || position < 0) {
        PyErr_SetString(PyExc_ValueError, "a closed file or a negative position");
        return NULL;
    }
    if (start() < 0)
        return NULL;
    WriteJob *job = PyObject_New(WriteJob, &WriteJobType);
    if (job == NULL)
        return NULL;
    job->view.obj = NULL;
    job->file = NULL;
    job->done = 0;
    job->error = 0;
    job->next = NULL;
    if (PyObject_GetBuffer(args[1], &job->view, PyBUF_SIMPLE) < 0) {
        job->view.obj = NULL;
        Py_DECREF(job);
        return NULL;
    }
    Py_INCREF(args[0]);
    job->file = args[0];
    job->fd = (int)fd;
    job->position = position;
    Py_INCREF(job); /* the queue's reference, dropped by collect() once done */
    pthread_mutex_lock(&mu);
    if (queue_tail != NULL)
        queue_tail->next = job;
    else
        queue_head = job;
    queue_tail = job;
    pthread_cond_signal(&work);
    pthread_mutex_unlock(&mu);
    return (PyObject *)job;
}

static PyObject *collect(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    if (!started)
        return PyLong_FromLong(0);
    uint64_t count;
    ssize_t r = read(efd, &count, sizeof count); /* first: see the module docstring */
    (void)r;                                     /* EAGAIN: nothing was signalled */
    pthread_mutex_lock(&mu);
    WriteJob *job = completed;
    completed = NULL;
    pthread_mutex_unlock(&mu);
    long n = 0;
    while (job != NULL) {
        WriteJob *next = job->next;
        job->next = NULL;
        Py_DECREF(job);
        job = next;
        n++;
    }
    return PyLong_FromLong(n);
}

static PyObject *set_held(int value) {
    pthread_mutex_lock(&mu);
    held = value;
    pthread_cond_signal(&work);
    pthread_mutex_unlock(&mu);
    Py_RETURN_NONE;
}

static PyObject *hold(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return set_held(1);
}

static PyObject *release(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return set_held(0);
}

static PyObject *fileno_(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    if (start() < 0)
        return NULL;
    return PyLong_FromLong(efd);
}

static PyMethodDef methods[] = {
    {"submit", (PyCFunction)(void (*)(void))submit, METH_FASTCALL,
     "submit(file, data, position) -> WriteJob: queue a pwrite of data at position of file.fd."},
    {"collect", (PyCFunction)collect, METH_NOARGS,
     "collect() -> int: consume the eventfd's readiness, release completed jobs."},
    {"fileno", (PyCFunction)fileno_, METH_NOARGS,
     "fileno() -> int: the eventfd that becomes readable when a job completes."},
    {"hold", (PyCFunction)hold, METH_NOARGS,
     "hold(): for tests, leave jobs queued and unwritten (a write not begun) until release()."},
    {"release", (PyCFunction)release, METH_NOARGS, "release(): write the held jobs."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "odradek.storage._segment_writer",
    .m_doc = "One native thread writing queued appends to segment files, in order.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__segment_writer(void) {
    if (PyType_Ready(&WriteJobType) < 0)
        return NULL;
    pthread_atfork(NULL, NULL, forget_after_fork);
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&WriteJobType);
    if (PyModule_AddObject(m, "WriteJob", (PyObject *)&WriteJobType) < 0) {
        Py_DECREF(&WriteJobType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
