/*
 * slatelib._sstwrite: the per-block and finishing work of an SST writer in native code.
 *
 * SstBlocks collects the finished data blocks of one SST (what BlockWriter.take_blocks
 * returns: (raw, index key, puts, deletes, merges) per block): it compresses each one (with
 * the Python codec function it is given, or not at all), appends it and its CRC-32
 * (big-endian, format §7.1) to one bytes object grown in place (take() hands it out with the
 * SST's tail appended, so the finished SST is never joined from chunks), and keeps each
 * block's offset, index key and counts. At the end it encodes the index (format §7.8) and the stats (format §7.10) byte
 * for byte as slatelib.format.sst_index.encode_sst_index and
 * slatelib.format.sst_stats.encode_sst_stats do (the references; both mirror the
 * flatbuffers Builder for 0.17.0's creation order), with csrc/fbbuild.h's builder (the one
 * the manifest encoder uses) driven as encode_sst_index_with_builder and
 * encode_sst_stats_with_builder drive the Python Builder.
 * tests/unit/format/test_sst_native.py diffs whole SSTs, native against pure Python.
 * Design: docs/rfcs/0001-flatbuffers.md (FlatBuffers written as 0.17.0 writes them) and
 * docs/rfcs/0020-house-second-step.md (the shared builder, CRC and growth buffer).
 *
 * The CRC is zlib.crc32's function (csrc/common.h's sl_crc32: folded with PCLMULQDQ where the
 * CPU has it), computed once per block. A large buffer (reserve() sizes it from the SST's
 * expected size) asks Linux for transparent huge pages, so writing it faults once per 2 MiB
 * instead of once per 4 KiB page (docs/rfcs/0030-core-throughput.md). Bad input (a count that does not fit its field) raises
 * ValueError. C99, no third-party libraries.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include "csrc/common.h"
#include "csrc/fbbuild.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

/* ------------------------------------------------------------------ SstBlocks */

typedef struct {
    PyObject_HEAD
    uint64_t *offsets;
    PyObject *keys;  /* list of index keys */
    uint16_t *counts; /* puts, deletes, merges per block */
    Py_ssize_t n;
    size_t ocap, ccap; /* capacities of offsets and counts, in elements */
    uint64_t offset; /* bytes framed so far */
    PyObject *data;  /* framed bytes not taken yet: a bytes object grown in place */
    Py_ssize_t dlen;
    Py_ssize_t dcap;
    SlSink sink; /* the buffer's free part, where a block writer places framed blocks */
} SstBlocksObject;

/* The sink follows the buffer (it moves when it grows, and take() hands it out); bytes a
 * block writer placed past dlen are kept by a growth (realloc copies them). */
static void sb_sync_sink(SstBlocksObject *s)
{
    if (s->data == NULL) {
        s->sink.base = NULL;
        s->sink.len = s->sink.cap = 0;
        return;
    }
    s->sink.base = (unsigned char *)PyBytes_AS_STRING(s->data);
    s->sink.cap = (size_t)s->dcap;
    if (s->sink.len < (size_t)s->dlen) {
        s->sink.len = (size_t)s->dlen;
    }
}

/* Room for `need` more bytes in s->data (realloc: large buffers grow without a copy),
 * grown by csrc/common.h's policy. */
/* Transparent huge pages for the 2 MiB-aligned part of a large buffer (a hint: where the
 * kernel has them in "madvise" mode; errors are ignored, the buffer works either way). */
static void sb_advise_huge(SstBlocksObject *s)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t huge = (uintptr_t)2 << 20;
    if (s->data == NULL || s->dcap < (Py_ssize_t)(4 * huge)) {
        return;
    }
    uintptr_t lo = (uintptr_t)PyBytes_AS_STRING(s->data);
    uintptr_t hi = lo + (uintptr_t)s->dcap;
    lo = (lo + huge - 1) & ~(huge - 1);
    hi &= ~(huge - 1);
    if (hi > lo) {
        (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
    }
#else
    (void)s;
#endif
}

static int sb_reserve(SstBlocksObject *s, Py_ssize_t need)
{
    if (s->data == NULL) {
        Py_ssize_t cap = need > (1 << 16) ? need : (1 << 16);
        s->data = PyBytes_FromStringAndSize(NULL, cap);
        if (s->data == NULL) {
            return -1;
        }
        s->dcap = cap;
        s->dlen = 0;
        s->sink.len = 0;
        sb_advise_huge(s);
        sb_sync_sink(s);
        return 0;
    }
    if (s->dlen + need <= s->dcap) {
        return 0;
    }
    size_t cap = sl_grown_cap((size_t)s->dcap, (size_t)(s->dlen + need), 1);
    if (cap == 0) {
        PyErr_NoMemory();
        return -1;
    }
    if (_PyBytes_Resize(&s->data, (Py_ssize_t)cap) < 0) {
        s->data = NULL;
        s->dlen = s->dcap = 0;
        sb_sync_sink(s);
        return -1;
    }
    s->dcap = (Py_ssize_t)cap;
    sb_advise_huge(s);
    sb_sync_sink(s);
    return 0;
}

/* Room for one more block in s->offsets and s->counts (three per block). */
static int sb_grow(SstBlocksObject *s)
{
    size_t ocap = s->ocap, ccap = s->ccap;
    if (sl_grow((void **)&s->offsets, &ocap, (size_t)s->n + 1, sizeof(uint64_t), SL_MEM) < 0) {
        return -1;
    }
    s->ocap = ocap;
    if (sl_grow((void **)&s->counts, &ccap, 3 * ((size_t)s->n + 1), sizeof(uint16_t), SL_MEM) < 0) {
        return -1;
    }
    s->ccap = ccap;
    return 0;
}

static int u16_count(PyObject *obj, uint16_t *out)
{
    long v = PyLong_Check(obj) ? PyLong_AsLong(obj) : -1;
    if (v < 0 || v > 0xFFFF) {
        PyErr_Clear();
        PyErr_SetString(PyExc_ValueError, "block stats must be three u16 counts");
        return -1;
    }
    *out = (uint16_t)v;
    return 0;
}

static PyObject *sb_add(SstBlocksObject *s, PyObject *args)
{
    PyObject *blocks, *compress = Py_None;
    if (!PyArg_ParseTuple(args, "O!|O", &PyList_Type, &blocks, &compress)) {
        return NULL;
    }
    Py_ssize_t nb = PyList_GET_SIZE(blocks);
    if (nb == 0) {
        return PyBytes_FromStringAndSize(NULL, 0);
    }
    PyObject *stored = PyList_New(nb);
    if (stored == NULL) {
        return NULL;
    }
    size_t total = 0;
    for (Py_ssize_t i = 0; i < nb; i++) {
        PyObject *b = PyList_GET_ITEM(blocks, i);
        if (!PyTuple_Check(b) || PyTuple_GET_SIZE(b) != 5
            || !(PyBytes_Check(PyTuple_GET_ITEM(b, 0)) || PyLong_CheckExact(PyTuple_GET_ITEM(b, 0)))
            || !PyBytes_Check(PyTuple_GET_ITEM(b, 1))) {
            Py_DECREF(stored);
            PyErr_SetString(PyExc_TypeError,
                            "blocks must be (raw bytes or placed length, index key bytes, puts, "
                            "deletes, merges)");
            return NULL;
        }
        PyObject *raw = PyTuple_GET_ITEM(b, 0);
        PyObject *st;
        if (PyLong_CheckExact(raw)) {
            /* framed in place by the block writer (set_sink): its length without the CRC */
            Py_ssize_t placed = PyLong_AsSsize_t(raw);
            if (compress != Py_None || placed < 0) {
                Py_DECREF(stored);
                if (!PyErr_Occurred()) {
                    PyErr_SetString(PyExc_ValueError,
                                    "a block placed in the sink cannot be compressed");
                }
                return NULL;
            }
            PyList_SET_ITEM(stored, i, Py_NewRef(raw));
            total += (size_t)placed + 4;
            continue;
        }
        if (compress == Py_None) {
            st = Py_NewRef(raw);
        }
        else {
            st = PyObject_CallOneArg(compress, raw);
            if (st != NULL && !PyBytes_Check(st) && !PyObject_CheckBuffer(st)) {
                Py_DECREF(st);
                st = NULL;
                PyErr_SetString(PyExc_TypeError, "compress must return a bytes-like object");
            }
            if (st == NULL) {
                Py_DECREF(stored);
                return NULL;
            }
        }
        PyList_SET_ITEM(stored, i, st);
        ByteSpan sp;
        if (span_get(st, &sp, "compressed block") < 0) {
            Py_DECREF(stored);
            return NULL;
        }
        total += (size_t)sp.len + 4;
        span_release(&sp);
    }
    if (sb_reserve(s, (Py_ssize_t)total) < 0) {
        Py_DECREF(stored);
        return NULL;
    }
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(s->data) + s->dlen;
    Py_ssize_t n0 = s->n;
    uint64_t off0 = s->offset;
    Py_ssize_t d0 = s->dlen;
    for (Py_ssize_t i = 0; i < nb; i++) {
        PyObject *b = PyList_GET_ITEM(blocks, i);
        PyObject *st = PyList_GET_ITEM(stored, i);
        Py_ssize_t len;
        if (PyLong_CheckExact(st)) {
            /* already there, CRC and all: the blocks placed so far end at sink.len */
            len = PyLong_AsSsize_t(st);
            if ((size_t)(s->dlen + len + 4) > s->sink.len) {
                PyErr_SetString(PyExc_ValueError, "a placed block is not in the sink");
                goto fail;
            }
        }
        else {
            ByteSpan sp;
            if ((size_t)s->dlen != s->sink.len) {
                PyErr_SetString(PyExc_ValueError, "a block follows blocks placed in the sink");
                goto fail;
            }
            if (span_get(st, &sp, "compressed block") < 0) {
                goto fail;
            }
            len = sp.len;
            memcpy(p, sp.ptr, (size_t)len);
            span_release(&sp);
            store_be32(p + len, sl_crc32(p, (size_t)len));
            s->sink.len += (size_t)len + 4;
        }
        if (sb_grow(s) < 0) {
            goto fail;
        }
        uint16_t *cnt = s->counts + 3 * s->n;
        if (u16_count(PyTuple_GET_ITEM(b, 2), &cnt[0]) < 0
            || u16_count(PyTuple_GET_ITEM(b, 3), &cnt[1]) < 0
            || u16_count(PyTuple_GET_ITEM(b, 4), &cnt[2]) < 0
            || PyList_Append(s->keys, PyTuple_GET_ITEM(b, 1)) < 0) {
            goto fail;
        }
        s->offsets[s->n++] = s->offset;
        s->offset += (uint64_t)len + 4;
        s->dlen += len + 4;
        p += len + 4;
    }
    Py_DECREF(stored);
    Py_RETURN_NONE;
fail:
    /* leave the object as it was before this call */
    if (PyList_SetSlice(s->keys, n0, PyList_GET_SIZE(s->keys), NULL) < 0) {
        PyErr_Clear();
    }
    s->n = n0;
    s->offset = off0;
    s->dlen = d0;
    s->sink.len = (size_t)d0; /* blocks placed and not added are dropped with them */
    Py_DECREF(stored);
    return NULL;
}

/* take(tail=()) -> bytes: the framed bytes not taken yet, then the tail chunks */
static PyObject *sb_take(SstBlocksObject *s, PyObject *args)
{
    PyObject *tail = NULL;
    if (!PyArg_ParseTuple(args, "|O!", &PyList_Type, &tail)) {
        return NULL;
    }
    Py_ssize_t extra = 0;
    Py_ssize_t nt = tail == NULL ? 0 : PyList_GET_SIZE(tail);
    for (Py_ssize_t i = 0; i < nt; i++) {
        if (!PyBytes_Check(PyList_GET_ITEM(tail, i))) {
            PyErr_SetString(PyExc_TypeError, "tail chunks must be bytes");
            return NULL;
        }
        extra += PyBytes_GET_SIZE(PyList_GET_ITEM(tail, i));
    }
    if (sb_reserve(s, extra) < 0) {
        return NULL;
    }
    char *p = PyBytes_AS_STRING(s->data) + s->dlen;
    for (Py_ssize_t i = 0; i < nt; i++) {
        PyObject *c = PyList_GET_ITEM(tail, i);
        memcpy(p, PyBytes_AS_STRING(c), (size_t)PyBytes_GET_SIZE(c));
        p += PyBytes_GET_SIZE(c);
    }
    if (s->sink.len > (size_t)s->dlen) {
        PyErr_SetString(PyExc_ValueError, "blocks placed in the sink were not added");
        return NULL;
    }
    Py_ssize_t len = s->dlen + extra;
    PyObject *out = s->data;
    s->data = NULL;
    s->dlen = s->dcap = 0;
    sb_sync_sink(s);
    if (_PyBytes_Resize(&out, len) < 0) {
        return NULL;
    }
    return out;
}

/* sink_capsule() -> capsule: the sink a block writer places framed blocks in (its
 * set_sink(blocks) takes it; the capsule is valid while this object lives) */
static PyObject *sb_sink_capsule(SstBlocksObject *s, PyObject *Py_UNUSED(unused))
{
    return PyCapsule_New(&s->sink, SL_SINK_CAPSULE, NULL);
}

/* reserve(n): room for n more framed bytes, allocated now (pages are touched only when the
 * blocks are written: an estimate made up front saves the growth's copies) */
static PyObject *sb_reserve_py(SstBlocksObject *s, PyObject *arg)
{
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "reserve() needs a size >= 0");
        return NULL;
    }
    if (sb_reserve(s, n) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static int u64_arg(PyObject *obj, uint64_t *out, const char *what)
{
    uint64_t v = PyLong_Check(obj) ? PyLong_AsUnsignedLongLong(obj) : (uint64_t)-1;
    if (v == (uint64_t)-1 && (!PyLong_Check(obj) || PyErr_Occurred())) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s must fit in u64", what);
        return -1;
    }
    *out = v;
    return 0;
}

/* encode_sst_index: encode_sst_index_with_builder's steps on the shared builder */
static PyObject *sb_encode_index(SstBlocksObject *s, PyObject *Py_UNUSED(unused))
{
    Builder bd;
    PyObject *out = NULL;
    int64_t *metas = PyMem_Malloc((size_t)(s->n ? s->n : 1) * sizeof(int64_t));
    if (metas == NULL) {
        return PyErr_NoMemory();
    }
    if (bd_init(&bd, 1024) < 0) {
        PyMem_Free(metas);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < s->n; i++) {
        PyObject *key = PyList_GET_ITEM(s->keys, i);
        int64_t key_off = create_bytes(&bd, PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key), 0);
        if (key_off < 0) {
            goto done;
        }
        start_object(&bd, 2);
        if (scalar_slot(&bd, 0, s->offsets[i], 8, 1, 0) < 0 || offset_slot(&bd, 1, key_off) < 0 ||
            (metas[i] = end_object(&bd)) < 0) {
            goto done;
        }
    }
    int64_t vec = add_offset_vector(&bd, metas, s->n);
    if (vec < 0) {
        goto done;
    }
    start_object(&bd, 1);
    if (offset_slot(&bd, 0, vec) < 0) {
        goto done;
    }
    out = bd_finish(&bd, end_object(&bd), NULL, 0);
done:
    bd_free(&bd);
    PyMem_Free(metas);
    return out;
}

/* encode_sst_stats: encode_sst_stats_with_builder's steps on the shared builder */
static PyObject *sb_encode_stats(SstBlocksObject *s, PyObject *args)
{
    PyObject *o[5];
    if (!PyArg_ParseTuple(args, "OOOOO", &o[0], &o[1], &o[2], &o[3], &o[4])) {
        return NULL;
    }
    static const char *names[5] = {"num_puts", "num_deletes", "num_merges", "raw_key_size",
                                   "raw_val_size"};
    uint64_t tot[5];
    for (int i = 0; i < 5; i++) {
        if (u64_arg(o[i], &tot[i], names[i]) < 0) {
            return NULL;
        }
    }
    Builder bd;
    PyObject *out = NULL;
    int64_t *tables = PyMem_Malloc((size_t)(s->n ? s->n : 1) * sizeof(int64_t));
    if (tables == NULL) {
        return PyErr_NoMemory();
    }
    if (bd_init(&bd, 1024) < 0) {
        PyMem_Free(tables);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < s->n; i++) {
        const uint16_t *c = s->counts + 3 * i;
        start_object(&bd, 3);
        if (scalar_slot(&bd, 2, c[2], 2, 1, 0) < 0 || scalar_slot(&bd, 1, c[1], 2, 1, 0) < 0 ||
            scalar_slot(&bd, 0, c[0], 2, 1, 0) < 0 || (tables[i] = end_object(&bd)) < 0) {
            goto done;
        }
    }
    int64_t vec = 0;
    if (s->n && (vec = add_offset_vector(&bd, tables, s->n)) < 0) {
        goto done;
    }
    start_object(&bd, 6);
    for (int slot_i = 4; slot_i >= 0; slot_i--) {
        if (scalar_slot(&bd, slot_i, tot[slot_i], 8, 1, 0) < 0) {
            goto done;
        }
    }
    if (offset_slot(&bd, 5, vec) < 0) {
        goto done;
    }
    out = bd_finish(&bd, end_object(&bd), NULL, 0);
done:
    bd_free(&bd);
    PyMem_Free(tables);
    return out;
}

static PyObject *sb_block_stats(SstBlocksObject *s, PyObject *Py_UNUSED(unused))
{
    PyObject *out = PyTuple_New(s->n);
    if (out == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < s->n; i++) {
        const uint16_t *c = s->counts + 3 * i;
        PyObject *t = Py_BuildValue("(HHH)", c[0], c[1], c[2]);
        if (t == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, i, t);
    }
    return out;
}

static PyObject *sb_get_offset(SstBlocksObject *s, void *Py_UNUSED(c))
{
    return PyLong_FromUnsignedLongLong(s->offset);
}

static PyObject *sb_get_count(SstBlocksObject *s, void *Py_UNUSED(c))
{
    return PyLong_FromSsize_t(s->n);
}

static PyObject *sb_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "", kwlist)) {
        return NULL;
    }
    SstBlocksObject *s = (SstBlocksObject *)type->tp_alloc(type, 0);
    if (s == NULL) {
        return NULL;
    }
    s->keys = PyList_New(0);
    if (s->keys == NULL) {
        Py_DECREF(s);
        return NULL;
    }
    return (PyObject *)s;
}

static void sb_dealloc(SstBlocksObject *s)
{
    Py_XDECREF(s->keys);
    Py_XDECREF(s->data);
    PyMem_Free(s->offsets);
    PyMem_Free(s->counts);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyMethodDef sb_methods[] = {
    {"add", (PyCFunction)sb_add, METH_VARARGS,
     "add(blocks, compress=None) -> None\n\nFrame finished blocks (raw, index key, puts, "
     "deletes, merges): compress(raw) (or raw; any bytes-like result), then its CRC-32 "
     "big-endian, appended to the "
     "bytes take() returns; records each block's offset, key and counts. On an error "
     "nothing is recorded."},
    {"take", (PyCFunction)sb_take, METH_VARARGS,
     "take(tail=[]) -> bytes\n\nThe framed bytes added since the last take, followed by "
     "the tail chunks, as one bytes object (grown in place: no copy of the blocks)."},
    {"sink_capsule", (PyCFunction)sb_sink_capsule, METH_NOARGS,
     "sink_capsule() -> capsule\n\nWhere a block writer's set_sink() places uncompressed "
     "blocks framed in place (valid while this object lives)."},
    {"reserve", (PyCFunction)sb_reserve_py, METH_O,
     "reserve(n) -> None\n\nRoom for n more framed bytes before take() (an estimate of the "
     "SST's size: the buffer then never grows by copying)."},
    {"encode_index", (PyCFunction)sb_encode_index, METH_NOARGS,
     "encode_index() -> bytes\n\nThe index payload (format §7.8) of the blocks added."},
    {"encode_stats", (PyCFunction)sb_encode_stats, METH_VARARGS,
     "encode_stats(num_puts, num_deletes, num_merges, raw_key_size, raw_val_size) -> bytes"
     "\n\nThe stats payload (format §7.10) with the blocks' counts."},
    {"block_stats", (PyCFunction)sb_block_stats, METH_NOARGS,
     "block_stats() -> tuple of (puts, deletes, merges) per block"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef sb_getset[] = {
    {"offset", (getter)sb_get_offset, NULL, "bytes framed so far", NULL},
    {"count", (getter)sb_get_count, NULL, "blocks added", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject SstBlocksType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "slatelib._sstwrite.SstBlocks",
    .tp_basicsize = sizeof(SstBlocksObject),
    .tp_dealloc = (destructor)sb_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "SstBlocks()\n\nThe data blocks of one SST being written: framing, index, stats.",
    .tp_methods = sb_methods,
    .tp_getset = sb_getset,
    .tp_new = sb_new,
};

static struct PyModuleDef sstwrite_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "slatelib._sstwrite",
    .m_doc = "Native block framing, index and stats encoding of the SST writer.",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__sstwrite(void)
{
    sl_crc32_init();
    if (PyType_Ready(&SstBlocksType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&sstwrite_module);
    if (m == NULL) {
        return NULL;
    }
    Py_INCREF(&SstBlocksType);
    if (PyModule_AddObject(m, "SstBlocks", (PyObject *)&SstBlocksType) < 0) {
        Py_DECREF(&SstBlocksType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
