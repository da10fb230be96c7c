/*
 * The one FlatBuffers builder of slatelib's C extensions: the parts that are not hot (see
 * csrc/fbbuild.h for the reference, the tests and the design notes).
 */
#include "fbbuild.h"

int bd_init(Builder *bd, int64_t cap)
{
    memset(bd, 0, sizeof(*bd));
    bd->buf = PyMem_Malloc((size_t)cap);
    bd->vts_cap = 256;
    bd->vts = PyMem_Calloc((size_t)bd->vts_cap, sizeof(int64_t));
    if (bd->buf == NULL || bd->vts == NULL) {
        PyMem_Free(bd->buf);
        PyMem_Free(bd->vts);
        PyErr_NoMemory();
        return -1;
    }
    bd->cap = cap;
    bd->head = cap;
    bd->minalign = 1;
    return 0;
}

void bd_free(Builder *bd)
{
    PyMem_Free(bd->buf);
    PyMem_Free(bd->vts);
    bd->buf = NULL;
    bd->vts = NULL;
}

/* Grown with common.h's sl_grow, then the written bytes move to the new end. */
int bd_grow(Builder *bd, int64_t needed)
{
    int64_t used = OFFSET(bd);
    size_t cap = (size_t)bd->cap;
    size_t want = sl_grown_cap(cap, (size_t)(used + needed), 1);
    if (want == 0 || want > ((size_t)1 << 31)) {
        PyErr_SetString(PyExc_ValueError, "flatbuffers: cannot grow buffer beyond 2 gigabytes");
        return -1;
    }
    void *buf = bd->buf;
    if (sl_grow(&buf, &cap, want, 1, SL_MEM) < 0) {
        return -1;
    }
    bd->buf = buf;
    memmove(bd->buf + cap - (size_t)used, bd->buf + bd->head, (size_t)used);
    bd->head = (int64_t)cap - used;
    bd->cap = (int64_t)cap;
    return 0;
}

static uint64_t vt_hash(const unsigned char *p, int64_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (int64_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static int vts_insert(Builder *bd, int64_t off, uint64_t h);

static int vts_rehash(Builder *bd)
{
    int64_t old_cap = bd->vts_cap, *old = bd->vts;
    bd->vts_cap = old_cap * 2;
    bd->vts = PyMem_Calloc((size_t)bd->vts_cap, sizeof(int64_t));
    if (bd->vts == NULL) {
        bd->vts = old;
        bd->vts_cap = old_cap;
        PyErr_NoMemory();
        return -1;
    }
    bd->vts_n = 0;
    for (int64_t i = 0; i < old_cap; i++) {
        if (old[i]) {
            const unsigned char *p = bd->buf + bd->cap - old[i];
            vts_insert(bd, old[i], vt_hash(p, load_le16(p)));
        }
    }
    PyMem_Free(old);
    return 0;
}

static int vts_insert(Builder *bd, int64_t off, uint64_t h)
{
    int64_t mask = bd->vts_cap - 1, i = (int64_t)(h & (uint64_t)mask);
    while (bd->vts[i])
        i = (i + 1) & mask;
    bd->vts[i] = off;
    bd->vts_n++;
    if (bd->vts_n * 2 > bd->vts_cap)
        return vts_rehash(bd);
    return 0;
}

/* Builder.EndObject / WriteVtable */
int64_t end_object(Builder *bd)
{
    if (bd_prep(bd, 4, 0) < 0)
        return -1;
    place(bd, 4, 4); /* PrependSOffsetTRelative(0): overwritten below */
    int64_t obj = OFFSET(bd);
    int k = bd->nfields;
    while (k > 0 && bd->vt[k - 1] == 0)
        k--;
    unsigned char key[2 * 34];
    int64_t vbytes = 2 * ((int64_t)k + 2);
    int64_t size = obj - bd->object_end;
    key[0] = (unsigned char)(vbytes & 0xFF);
    key[1] = (unsigned char)(vbytes >> 8);
    key[2] = (unsigned char)(size & 0xFF);
    key[3] = (unsigned char)(size >> 8);
    for (int i = 0; i < k; i++) {
        int64_t e = bd->vt[i] ? obj - bd->vt[i] : 0;
        key[4 + 2 * i] = (unsigned char)(e & 0xFF);
        key[5 + 2 * i] = (unsigned char)(e >> 8);
    }
    uint64_t h = vt_hash(key, vbytes);
    int64_t mask = bd->vts_cap - 1, i = (int64_t)(h & (uint64_t)mask);
    while (bd->vts[i]) {
        const unsigned char *p = bd->buf + bd->cap - bd->vts[i];
        if (p[0] == key[0] && p[1] == key[1] && memcmp(p, key, (size_t)vbytes) == 0) {
            int32_t rel = (int32_t)(bd->vts[i] - obj);
            unsigned char *q = bd->buf + bd->cap - obj;
            for (int j = 0; j < 4; j++)
                q[j] = (unsigned char)((uint32_t)rel >> (8 * j));
            return obj;
        }
        i = (i + 1) & mask;
    }
    for (int j = k - 1; j >= 0; j--) {
        uint64_t e = bd->vt[j] ? (uint64_t)(obj - bd->vt[j]) : 0;
        if (prepend(bd, e, 2) < 0)
            return -1;
    }
    if (prepend(bd, (uint64_t)size, 2) < 0 || prepend(bd, (uint64_t)vbytes, 2) < 0)
        return -1;
    int32_t rel = (int32_t)(OFFSET(bd) - obj);
    unsigned char *q = bd->buf + bd->cap - obj;
    for (int j = 0; j < 4; j++)
        q[j] = (unsigned char)((uint32_t)rel >> (8 * j));
    if (vts_insert(bd, OFFSET(bd), h) < 0)
        return -1;
    return obj;
}

int64_t create_bytes(Builder *bd, const char *p, int64_t n, int nul)
{
    if (bd_prep(bd, 4, n + nul) < 0)
        return -1;
    if (nul)
        place(bd, 0, 1);
    bd->head -= n;
    memcpy(bd->buf + bd->head, p, (size_t)n);
    return end_vector(bd, n);
}

/* add_bytes(b, value): bytes(value) of a bytes-like object. */
int64_t add_bytes_obj(Builder *bd, PyObject *v)
{
    if (PyBytes_Check(v))
        return create_bytes(bd, PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v), 0);
    Py_buffer view;
    if (PyObject_GetBuffer(v, &view, PyBUF_SIMPLE) < 0)
        return -1;
    int64_t r = create_bytes(bd, view.buf, view.len, 0);
    PyBuffer_Release(&view);
    return r;
}

int64_t add_string_obj(Builder *bd, PyObject *v)
{
    if (!PyUnicode_Check(v)) {
        PyErr_SetString(PyExc_TypeError, "expected str");
        return -1;
    }
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(v, &n);
    if (s == NULL)
        return -1;
    return create_bytes(bd, s, n, 1);
}

int64_t add_offset_vector(Builder *bd, const int64_t *offs, int64_t n)
{
    if (start_vector(bd, 4, n, 4) < 0)
        return -1;
    for (int64_t i = n - 1; i >= 0; i--)
        if (prepend_uoffset(bd, offs[i]) < 0)
            return -1;
    return end_vector(bd, n);
}


PyObject *bd_finish(Builder *bd, int64_t root, const unsigned char *prefix, size_t prefix_len)
{
    if (root < 0 || bd_prep(bd, bd->minalign, 4) < 0 || prepend_uoffset(bd, root) < 0)
        return NULL;
    int64_t used = OFFSET(bd);
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(used + (int64_t)prefix_len));
    if (out == NULL)
        return NULL;
    char *p = PyBytes_AS_STRING(out);
    if (prefix_len)
        memcpy(p, prefix, prefix_len);
    memcpy(p + prefix_len, bd->buf + bd->head, (size_t)used);
    return out;
}
