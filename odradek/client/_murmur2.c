/*
 * murmur2: Kafka's Utils.murmur2 (32-bit MurmurHash2, seed 0x9747b28c, little-endian 4-byte
 * blocks), the hash of the Java producer's default partitioner, in C because the producer runs
 * it once per keyed record.
 *
 * Contract: ``murmur2(data)`` takes any bytes-like object and returns the hash as Java's signed
 * 32-bit int (so ``murmur2(b"21") == -973932308``, one of Kafka's own test vectors); anything
 * else raises TypeError.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static int32_t kafka_murmur2(const unsigned char *data, Py_ssize_t length) {
    const uint32_t m = 0x5bd1e995;
    /* Java's int arithmetic wraps: uint32_t gives the same bits. */
    uint32_t h = 0x9747b28cu ^ (uint32_t)length;
    Py_ssize_t blocks = length / 4;
    for (Py_ssize_t i = 0; i < blocks; i++) {
        const unsigned char *b = data + 4 * i;
        uint32_t k = (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16)
                     | ((uint32_t)b[3] << 24);
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }
    const unsigned char *tail = data + 4 * blocks;
    switch (length & 3) {
    case 3:
        h ^= (uint32_t)tail[2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)tail[1] << 8;
        /* fall through */
    case 1:
        h ^= tail[0];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return (int32_t)h;
}

static PyObject *murmur2(PyObject *module, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        PyErr_Format(PyExc_TypeError, "murmur2 hashes bytes-like objects, not %.100s",
                     Py_TYPE(arg)->tp_name);
        return NULL;
    }
    int32_t h = kafka_murmur2((const unsigned char *)view.buf, view.len);
    PyBuffer_Release(&view);
    return PyLong_FromLong(h);
}

static PyMethodDef methods[] = {
    {"murmur2", murmur2, METH_O, "Kafka's murmur2 of a bytes-like object, as a signed 32-bit int."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "odradek.client._murmur2",
    .m_doc = "Kafka's murmur2 hash (the default partitioner's), in C.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__murmur2(void) {
    return PyModule_Create(&module);
}
