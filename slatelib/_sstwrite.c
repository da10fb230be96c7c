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
 * flatbuffers Builder for 0.17.0's creation order).
 * tests/unit/format/test_sst_native.py diffs whole SSTs, native against pure Python.
 *
 * The CRC is zlib's crc32 (the same function the Python path calls), called once per block.
 * Bad input (a count that does not fit its field) raises ValueError.
 * C99, no third-party libraries.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------------ reverse builder
 * A flatbuffer is built back to front: each put() prepends a chunk. Chunks are appended
 * byte-reversed to a forward buffer; reversing the whole buffer at the end yields them in
 * prepend order, each in its own byte order. */

typedef struct {
    unsigned char *buf;
    size_t len;
    size_t cap;
    int failed;
} Rev;

static void rev_put(Rev *r, const void *data, size_t n)
{
    if (r->failed || n == 0) {
        return;
    }
    if (r->len + n > r->cap) {
        size_t cap = r->cap ? r->cap : 256;
        while (cap < r->len + n) {
            cap *= 2;
        }
        unsigned char *b = PyMem_Realloc(r->buf, cap);
        if (b == NULL) {
            r->failed = 1;
            return;
        }
        r->buf = b;
        r->cap = cap;
    }
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        r->buf[r->len + i] = p[n - 1 - i];
    }
    r->len += n;
}

static void rev_zeros(Rev *r, size_t n)
{
    static const unsigned char z[8] = {0};
    rev_put(r, z, n);
}

static void le16(unsigned char *p, unsigned v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static void le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        p[i] = (unsigned char)(v >> (8 * i));
    }
}

static void le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        p[i] = (unsigned char)(v >> (8 * i));
    }
}

static void rev_u32(Rev *r, uint32_t v)
{
    unsigned char b[4];
    le32(b, v);
    rev_put(r, b, 4);
}

static PyObject *rev_finish(Rev *r)
{
    if (r->failed) {
        PyMem_Free(r->buf);
        return PyErr_NoMemory();
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)r->len);
    if (out != NULL) {
        unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
        for (size_t i = 0; i < r->len; i++) {
            o[i] = r->buf[r->len - 1 - i];
        }
    }
    PyMem_Free(r->buf);
    r->buf = NULL;
    return out;
}

/* vtables deduplicated by content, as the Builder does */
typedef struct {
    int n;
    struct {
        int len;
        unsigned vals[8];
        long long pos;
    } e[24];
} VtSet;

static long long vt_get(const VtSet *s, const unsigned *vals, int len)
{
    for (int i = 0; i < s->n; i++) {
        if (s->e[i].len == len && memcmp(s->e[i].vals, vals, sizeof(unsigned) * len) == 0) {
            return s->e[i].pos;
        }
    }
    return 0;
}

static void vt_set(VtSet *s, const unsigned *vals, int len, long long pos)
{
    if (s->n < 24) {
        s->e[s->n].len = len;
        memcpy(s->e[s->n].vals, vals, sizeof(unsigned) * len);
        s->e[s->n].pos = pos;
        s->n++;
    }
}

/* ------------------------------------------------------------------ SstBlocks */

typedef struct {
    PyObject_HEAD
    uint64_t *offsets;
    PyObject *keys;  /* list of index keys */
    uint16_t *counts; /* puts, deletes, merges per block */
    Py_ssize_t n;
    Py_ssize_t cap;
    uint64_t offset; /* bytes framed so far */
    PyObject *crc32; /* zlib.crc32 */
    PyObject *data;  /* framed bytes not taken yet: a bytes object grown in place */
    Py_ssize_t dlen;
    Py_ssize_t dcap;
} SstBlocksObject;

/* Room for `need` more bytes in s->data (realloc: large buffers grow without a copy). */
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
        return 0;
    }
    if (s->dlen + need <= s->dcap) {
        return 0;
    }
    Py_ssize_t cap = s->dcap * 2;
    if (cap < s->dlen + need) {
        cap = s->dlen + need;
    }
    if (_PyBytes_Resize(&s->data, cap) < 0) {
        s->data = NULL;
        s->dlen = s->dcap = 0;
        return -1;
    }
    s->dcap = cap;
    return 0;
}

static int sb_grow(SstBlocksObject *s)
{
    if (s->n < s->cap) {
        return 0;
    }
    Py_ssize_t cap = s->cap ? 2 * s->cap : 256;
    uint64_t *o = PyMem_Realloc(s->offsets, (size_t)cap * sizeof(uint64_t));
    if (o == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    s->offsets = o;
    uint16_t *c = PyMem_Realloc(s->counts, (size_t)cap * 3 * sizeof(uint16_t));
    if (c == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    s->counts = c;
    s->cap = cap;
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
            || !PyBytes_Check(PyTuple_GET_ITEM(b, 0)) || !PyBytes_Check(PyTuple_GET_ITEM(b, 1))) {
            Py_DECREF(stored);
            PyErr_SetString(PyExc_TypeError,
                            "blocks must be (raw bytes, index key bytes, puts, deletes, merges)");
            return NULL;
        }
        PyObject *raw = PyTuple_GET_ITEM(b, 0);
        PyObject *st;
        if (compress == Py_None) {
            st = Py_NewRef(raw);
        }
        else {
            st = PyObject_CallOneArg(compress, raw);
            if (st != NULL && !PyBytes_Check(st)) {
                Py_DECREF(st);
                st = NULL;
                PyErr_SetString(PyExc_TypeError, "compress must return bytes");
            }
            if (st == NULL) {
                Py_DECREF(stored);
                return NULL;
            }
        }
        PyList_SET_ITEM(stored, i, st);
        total += (size_t)PyBytes_GET_SIZE(st) + 4;
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
        Py_ssize_t len = PyBytes_GET_SIZE(st);
        PyObject *crc = PyObject_CallOneArg(s->crc32, st);
        if (crc == NULL) {
            goto fail;
        }
        unsigned long c = PyLong_AsUnsignedLong(crc);
        Py_DECREF(crc);
        if (c == (unsigned long)-1 && PyErr_Occurred()) {
            goto fail;
        }
        memcpy(p, PyBytes_AS_STRING(st), (size_t)len);
        p[len] = (unsigned char)(c >> 24);
        p[len + 1] = (unsigned char)(c >> 16);
        p[len + 2] = (unsigned char)(c >> 8);
        p[len + 3] = (unsigned char)c;
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
    Py_ssize_t len = s->dlen + extra;
    PyObject *out = s->data;
    s->data = NULL;
    s->dlen = s->dcap = 0;
    if (_PyBytes_Resize(&out, len) < 0) {
        return NULL;
    }
    return out;
}

/* encode_sst_index, step for step */
static PyObject *sb_encode_index(SstBlocksObject *s, PyObject *unused)
{
    Rev r = {0};
    VtSet vts = {0};
    long long cur = 0;
    unsigned minalign = 4;
    long long *metas = PyMem_Malloc((size_t)(s->n ? s->n : 1) * sizeof(long long));
    if (metas == NULL) {
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < s->n; i++) {
        PyObject *key = PyList_GET_ITEM(s->keys, i);
        long long klen = PyBytes_GET_SIZE(key);
        long long pad = -(cur + klen) & 3;
        rev_zeros(&r, (size_t)pad);
        rev_put(&r, PyBytes_AS_STRING(key), (size_t)klen);
        rev_u32(&r, (uint32_t)klen);
        cur += pad + klen + 4;
        long long key_off = cur;
        uint64_t offset = s->offsets[i];
        long long obj_size;
        unsigned vk[3];
        if (offset) {
            minalign = 8;
            pad = -cur & 7;
            obj_size = 16 + pad;
            vk[0] = 4;
            vk[1] = 8;
            vk[2] = (unsigned)obj_size;
        }
        else {
            pad = 0;
            obj_size = 8;
            vk[0] = 4;
            vk[1] = 0;
            vk[2] = 8;
        }
        cur += obj_size;
        long long uoff = cur - 4 - key_off;
        long long vt = vt_get(&vts, vk, 3);
        long long soff = vt == 0 ? 8 : vt - cur;
        unsigned char m[24];
        le32(m, (uint32_t)(int32_t)soff);
        le32(m + 4, (uint32_t)uoff);
        if (offset) {
            le64(m + 8, offset);
            memset(m + 16, 0, (size_t)pad);
            rev_put(&r, m, (size_t)(16 + pad));
        }
        else {
            rev_put(&r, m, 8);
        }
        metas[i] = cur;
        if (vt == 0) {
            unsigned char v[8];
            le16(v, 8);
            le16(v + 2, (unsigned)obj_size);
            le16(v + 4, vk[1]);
            le16(v + 6, 4);
            rev_put(&r, v, 8);
            cur += 8;
            vt_set(&vts, vk, 3, cur);
        }
    }
    /* the block_meta vector: entries back to front, then its length */
    long long n = s->n;
    for (long long i = n - 1; i >= 0; i--) {
        rev_u32(&r, (uint32_t)(cur + 4 * (n - i) - metas[i]));
    }
    rev_u32(&r, (uint32_t)n);
    PyMem_Free(metas);
    cur += 4 * n + 4;
    cur += 8;
    long long root = cur;
    unsigned char t[8];
    le32(t, 6);
    le32(t + 4, 4);
    rev_put(&r, t, 8);
    unsigned char v[6];
    le16(v, 6);
    le16(v + 2, 8);
    le16(v + 4, 4);
    rev_put(&r, v, 6);
    cur += 6;
    long long pad = -(cur + 4) & (long long)(minalign - 1);
    unsigned char f[12] = {0};
    le32(f, (uint32_t)(cur + pad + 4 - root));
    rev_put(&r, f, (size_t)(4 + pad));
    return rev_finish(&r);
}

/* the stats vtable layout of one BlockStats table (sst_stats._block_layout) */
static void block_layout(int p, int d, int m, int cur_mod4, int *pad, int *obj_size,
                         unsigned *key, int *keylen, unsigned char *vt, int *vtlen)
{
    int slots[3] = {0, 0, 0};
    int present[3] = {p, d, m};
    int cur = cur_mod4;
    for (int slot = 2; slot >= 0; slot--) {
        if (present[slot]) {
            cur += 2;
            slots[slot] = cur;
        }
    }
    *pad = -cur & 3;
    cur += *pad + 4;
    *obj_size = cur - cur_mod4;
    unsigned voffs[3];
    int nv = 3;
    for (int i = 0; i < 3; i++) {
        voffs[i] = slots[i] ? (unsigned)(cur - slots[i]) : 0;
    }
    while (nv > 0 && voffs[nv - 1] == 0) {
        nv--;
    }
    for (int i = 0; i < nv; i++) {
        key[i] = voffs[nv - 1 - i];
    }
    key[nv] = (unsigned)*obj_size;
    *keylen = nv + 1;
    le16(vt, (unsigned)(4 + 2 * nv));
    le16(vt + 2, (unsigned)*obj_size);
    for (int i = 0; i < nv; i++) {
        le16(vt + 4 + 2 * i, voffs[i]);
    }
    *vtlen = 4 + 2 * nv;
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

/* encode_sst_stats, step for step */
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
    Rev r = {0};
    VtSet vts = {0};
    long long cur = 0;
    long long minalign = 1;
    long long *tables = PyMem_Malloc((size_t)(s->n ? s->n : 1) * sizeof(long long));
    if (tables == NULL) {
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < s->n; i++) {
        const uint16_t *c = s->counts + 3 * i;
        int pad, obj_size, keylen, vtlen;
        unsigned key[4];
        unsigned char vtb[10];
        block_layout(c[0] != 0, c[1] != 0, c[2] != 0, (int)(cur & 3), &pad, &obj_size, key,
                     &keylen, vtb, &vtlen);
        minalign = 4;
        cur += obj_size;
        long long vt = vt_get(&vts, key, keylen);
        unsigned char chunk[16] = {0};
        le32(chunk, (uint32_t)(int32_t)(vt == 0 ? vtlen : vt - cur));
        int at = 4 + pad;
        for (int k = 0; k < 3; k++) {
            if (c[k]) {
                le16(chunk + at, c[k]);
                at += 2;
            }
        }
        rev_put(&r, chunk, (size_t)at);
        tables[i] = cur;
        if (vt == 0) {
            rev_put(&r, vtb, (size_t)vtlen);
            cur += vtlen;
            vt_set(&vts, key, keylen, cur);
        }
    }
    long long vec = 0;
    if (s->n) {
        long long pad = -cur & 3;
        rev_zeros(&r, (size_t)pad);
        cur += pad;
        long long n = s->n;
        for (long long i = n - 1; i >= 0; i--) {
            rev_u32(&r, (uint32_t)(cur + 4 * (n - i) - tables[i]));
        }
        rev_u32(&r, (uint32_t)n);
        cur += 4 * n + 4;
        vec = cur;
    }
    PyMem_Free(tables);
    /* the SstStats table */
    long long obj_end = cur;
    long long slots[6] = {0};
    for (int slot = 4; slot >= 0; slot--) {
        if (tot[slot]) {
            minalign = 8;
            long long pad = -cur & 7;
            rev_zeros(&r, (size_t)pad);
            unsigned char b[8];
            le64(b, tot[slot]);
            rev_put(&r, b, 8);
            cur += pad + 8;
            slots[slot] = cur;
        }
    }
    if (vec) {
        long long pad = -cur & 3;
        rev_zeros(&r, (size_t)pad);
        cur += pad;
        rev_u32(&r, (uint32_t)(cur + 4 - vec));
        cur += 4;
        slots[5] = cur;
    }
    long long pad = -cur & 3;
    if (minalign < 4) {
        minalign = 4;
    }
    rev_zeros(&r, (size_t)pad);
    cur += pad + 4;
    long long root = cur;
    unsigned voffs[6];
    int nv = 6;
    for (int i = 0; i < 6; i++) {
        voffs[i] = slots[i] ? (unsigned)(root - slots[i]) : 0;
    }
    while (nv > 0 && voffs[nv - 1] == 0) {
        nv--;
    }
    unsigned key[7];
    for (int i = 0; i < nv; i++) {
        key[i] = voffs[nv - 1 - i];
    }
    key[nv] = (unsigned)(root - obj_end);
    long long vt = vt_get(&vts, key, nv + 1);
    unsigned char vtb[16];
    int vtlen = 4 + 2 * nv;
    le16(vtb, (unsigned)vtlen);
    le16(vtb + 2, (unsigned)(root - obj_end));
    for (int i = 0; i < nv; i++) {
        le16(vtb + 4 + 2 * i, voffs[i]);
    }
    unsigned char so[4];
    le32(so, (uint32_t)(int32_t)(vt == 0 ? vtlen : vt - root));
    rev_put(&r, so, 4);
    if (vt == 0) {
        rev_put(&r, vtb, (size_t)vtlen);
        cur += vtlen;
    }
    pad = -(cur + 4) & (minalign - 1);
    unsigned char f[12] = {0};
    le32(f, (uint32_t)(cur + pad + 4 - root));
    rev_put(&r, f, (size_t)(4 + pad));
    return rev_finish(&r);
}

static PyObject *sb_block_stats(SstBlocksObject *s, PyObject *unused)
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

static PyObject *sb_get_offset(SstBlocksObject *s, void *c)
{
    return PyLong_FromUnsignedLongLong(s->offset);
}

static PyObject *sb_get_count(SstBlocksObject *s, void *c)
{
    return PyLong_FromSsize_t(s->n);
}

static PyObject *sb_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "", kwlist)) {
        return NULL;
    }
    PyObject *zlib = PyImport_ImportModule("zlib");
    if (zlib == NULL) {
        return NULL;
    }
    PyObject *crc = PyObject_GetAttrString(zlib, "crc32");
    Py_DECREF(zlib);
    if (crc == NULL) {
        return NULL;
    }
    SstBlocksObject *s = (SstBlocksObject *)type->tp_alloc(type, 0);
    if (s == NULL) {
        Py_DECREF(crc);
        return NULL;
    }
    s->crc32 = crc;
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
    Py_XDECREF(s->crc32);
    Py_XDECREF(s->data);
    PyMem_Free(s->offsets);
    PyMem_Free(s->counts);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyMethodDef sb_methods[] = {
    {"add", (PyCFunction)sb_add, METH_VARARGS,
     "add(blocks, compress=None) -> None\n\nFrame finished blocks (raw, index key, puts, "
     "deletes, merges): compress(raw) (or raw), then its CRC-32 big-endian, appended to the "
     "bytes take() returns; records each block's offset, key and counts. On an error "
     "nothing is recorded."},
    {"take", (PyCFunction)sb_take, METH_VARARGS,
     "take(tail=[]) -> bytes\n\nThe framed bytes added since the last take, followed by "
     "the tail chunks, as one bytes object (grown in place: no copy of the blocks)."},
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
