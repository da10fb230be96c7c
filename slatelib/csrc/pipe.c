/*
 * The native decode -> merge -> sink pipeline of slatelib._speedups, its own translation
 * unit (declarations: csrc/pipe.h; what it uses of _speedups.c: csrc/speedups.h; design:
 * docs/rfcs/0015-native-pipeline.md). Python reference: the pure paths of
 * slatelib/format/native_pipe.py and slatelib/format/native_merge.py; tests:
 * tests/unit/format/test_native_pipe.py, tests/unit/format/test_native_merge.py.
 *
 *   check_blocks(data, bounds, version, verify_crc, lo=None, hi=None, lo_excl=False,
 *                hi_incl=False) -> CheckedBlocks
 *       CRC-checks (verify_crc) and fully validates the v1/v2 blocks data[bounds[i]:
 *       bounds[i+1]] (format §7.4-7.6) with the GIL released, and records the position of
 *       every entry inside the key range. No Python object per entry: keys are copied into
 *       one arena, values stay in `data`, which the CheckedBlocks keeps alive (it holds a
 *       buffer view of it). Any damage raises ValueError naming the block; callers then run
 *       the per-block Python path, which raises the precise error.
 *   Pipe(sources, mode, *, fold=None, min_seq=0, bottom=False, clock_tick=0)
 *       slatelib's one streaming k-way merge (it replaced slatelib/_merge.c, whose rules it
 *       took over unchanged), over cursors that read CheckedBlocks natively or lists of
 *       Python rows (WAL and memtable sources, and every source of
 *       slatelib.format.native_merge). Per key: every version (PIPE_ROWS: heapq.merge of
 *       the sources), 0.17's compaction retention (PIPE_RETAIN: p_retain_key) or the read
 *       path's resolution (PIPE_RESOLVE: p_resolve_key), feeding one of the sinks: fill()
 *       (a BlockWriterV2), range_stats() (the digest of range_stats), arrow() (Arrow
 *       buffers), rows() (Python rows or (key, value) pairs: the reference's shape).
 *
 * Every pointer into a payload is owned: a cursor holds its current block, a gathered
 * version holds its block (or its row tuple), and the order check holds the previous one.
 */

#include "pipe.h"

#include <stdint.h>
#include <string.h>

#include "block.h"
#include "common.h"
#include "speedups.h"

/* ------------------------------------------------------------------ CRC-32 (zlib) */

PyDoc_STRVAR(pipe_crc32_doc,
"pipe_crc32(data, impl=0, /) -> (crc, source)\n\n"
"zlib.crc32(data) as check_blocks computes it (impl 0): folded with PCLMULQDQ where the CPU\n"
"has it and data holds 64 bytes or more (source 'clmul'), else zlib's own crc32 when the\n"
"loaded libz was found ('zlib'), else the built-in table ('table'). impl 1 (or True): the\n"
"table; impl 2: the folding path where the CPU has it, else the table.");

static PyObject *py_pipe_crc32(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *data;
    int impl = 0;
    if (!PyArg_ParseTuple(args, "O|i:pipe_crc32", &data, &impl)) {
        return NULL;
    }
    ByteSpan s;
    if (span_get(data, &s, "data") < 0) {
        return NULL;
    }
    size_t n = (size_t)s.len;
    int folds = sl_crc32_uses_clmul() && n >= 64;
    const char *source = impl == 1 ? "table"
                         : folds ? "clmul"
                         : impl == 0 && sl_crc32_uses_zlib() && n >= 64 ? "zlib" : "table";
    uint32_t c = impl == 1 ? sl_crc32_table(s.ptr, n)
                 : impl == 2 ? sl_crc32_clmul(s.ptr, n) : sl_crc32(s.ptr, n);
    span_release(&s);
    return Py_BuildValue("(ks)", (unsigned long)c, source);
}

/* ------------------------------------------------------------------ checked blocks */

typedef struct {
    size_t koff, klen; /* the key, in the key arena */
    size_t voff, vlen; /* the value, in the data buffer (vlen 0 for a tombstone) */
    uint64_t seq;
    int64_t exp, cre;
    unsigned char kind, has_exp, has_cre;
} PEntry;

typedef struct {
    PyObject_HEAD
    Py_buffer view; /* of the data: every value points into it */
    int has_view;
    unsigned char *keys; /* PyMem_Raw */
    size_t keys_len, keys_cap;
    PEntry *ents; /* PyMem_Raw */
    Py_ssize_t n, cap;
    int ended; /* an entry at or past the end bound was seen */
} CheckedBlocksObject;

static PyTypeObject CheckedBlocksType;

static void cb_dealloc(CheckedBlocksObject *self)
{
    PyMem_RawFree(self->keys);
    PyMem_RawFree(self->ents);
    if (self->has_view) {
        PyBuffer_Release(&self->view);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static inline int raw_cmp(const unsigned char *a, size_t alen, const unsigned char *b, size_t blen)
{
    return sl_key_cmp(a, alen, b, blen);
}

typedef struct {
    const unsigned char *base; /* the data */
    int version;
    const unsigned char *lo, *hi;
    size_t lo_len, hi_len;
    int has_lo, lo_excl, has_hi, hi_incl;
    CheckedBlocksObject *out;
    unsigned char *cur; /* the key being decoded (v2: also the previous key) */
    size_t cur_cap;
    unsigned char *first; /* v1: the block's first key */
    size_t first_cap;
    const char *err; /* a malformed block, or NULL */
    int nomem;
} ParseCtx;

/* Record the entry whose key is ctx->cur[0:klen] if it lies in the range. 0 or -1 (nomem). */
static int record(ParseCtx *x, size_t klen, size_t voff, size_t vlen, uint64_t seq, int kind,
                  int has_exp, uint64_t exp, int has_cre, uint64_t cre)
{
    CheckedBlocksObject *o = x->out;
    if (o->ended) {
        return 0;
    }
    if (x->has_hi) {
        int c = raw_cmp(x->cur, klen, x->hi, x->hi_len);
        if (c > 0 || (c == 0 && !x->hi_incl)) {
            o->ended = 1;
            return 0;
        }
    }
    if (x->has_lo) {
        int c = raw_cmp(x->cur, klen, x->lo, x->lo_len);
        if (c < 0 || (c == 0 && x->lo_excl)) {
            return 0;
        }
    }
    size_t ncap = (size_t)o->cap;
    if (sl_grow((void **)&o->ents, &ncap, (size_t)o->n + 1, sizeof(PEntry), SL_RAW) < 0 ||
        sl_grow((void **)&o->keys, &o->keys_cap, o->keys_len + (klen ? klen : 1), 1, SL_RAW) < 0) {
        o->cap = (Py_ssize_t)ncap;
        x->nomem = 1;
        return -1;
    }
    o->cap = (Py_ssize_t)ncap;
    PEntry *e = &o->ents[o->n++];
    e->koff = o->keys_len;
    e->klen = klen;
    sl_copy(o->keys + o->keys_len, x->cur, klen);
    o->keys_len += klen;
    e->voff = voff;
    e->vlen = kind == KIND_TOMBSTONE ? 0 : vlen;
    e->seq = seq;
    e->kind = (unsigned char)kind;
    e->has_exp = (unsigned char)has_exp;
    e->has_cre = (unsigned char)has_cre;
    e->exp = has_exp ? u64_to_i64(exp) : 0;
    e->cre = has_cre ? u64_to_i64(cre) : 0;
    return 0;
}

/* Put prefix[0:shared] + suffix into ctx->cur (prefix may be ctx->cur itself). */
static int set_cur(ParseCtx *x, const unsigned char *prefix, size_t shared,
                   const unsigned char *suffix, size_t unshared)
{
    size_t need = shared + unshared;
    if (need > x->cur_cap) {
        unsigned char *old = x->cur;
        size_t cap = x->cur_cap;
        if (sl_grow((void **)&x->cur, &cap, need, 1, SL_RAW) < 0) {
            x->nomem = 1;
            return -1;
        }
        if (prefix == old) {
            prefix = x->cur;
        }
        x->cur_cap = cap;
    }
    if (shared && prefix != x->cur) {
        memcpy(x->cur, prefix, shared);
    }
    sl_copy(x->cur + shared, suffix, unshared);
    return 0;
}

/* One block payload p[0:n] at offset `at` of the data, walked by the block entry parser
 * of _speedups.c (block_iter_next: the checks decode_block makes, made once). */
static int parse_block(ParseCtx *x, const unsigned char *p, size_t n, size_t at)
{
    BlockIter it;
    BlockEntry e;
    if (block_iter_init(&it, x->version, p, n) < 0) {
        x->err = it.err;
        return -1;
    }
    int r;
    while ((r = block_iter_next(&it, &e)) > 0) {
        /* the base key: the previous one (v2, held in cur) or the block's first one (v1) */
        if (set_cur(x, x->version == 2 ? x->cur : x->first, e.shared, p + e.kstart,
                    e.unshared) < 0) {
            return -1;
        }
        size_t klen = e.shared + e.unshared;
        if (x->version == 1 && e.sets_base) {
            if (sl_grow((void **)&x->first, &x->first_cap, klen ? klen : 1, 1, SL_RAW) < 0) {
                x->nomem = 1;
                return -1;
            }
            if (klen) {
                memcpy(x->first, x->cur, klen);
            }
        }
        if (record(x, klen, at + e.vstart, e.vlen, e.seq, e.kind, e.has_exp, e.exp, e.has_cre,
                   e.cre) < 0) {
            return -1;
        }
    }
    if (r < 0) {
        x->err = it.err;
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(check_blocks_doc,
"check_blocks(data, bounds, version, verify_crc, lo=None, hi=None, lo_excl=False,\n"
"             hi_incl=False, /) -> CheckedBlocks\n\n"
"The uncompressed blocks data[bounds[i]:bounds[i+1]] of an SST of format `version` (1 or\n"
"2): with verify_crc each ends in its CRC-32 (big-endian), which is checked; without, each\n"
"is a bare block payload (one the caller checked and decompressed). Every block is fully\n"
"validated; the entries with lo <= key < hi (lo < key with lo_excl, key <= hi with\n"
"hi_incl; None: unbounded) are recorded, with no Python object per entry. ValueError\n"
"names the first damaged block (its position in bounds). The GIL is released meanwhile.");

static PyObject *py_check_blocks(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *data, *bounds, *lo_obj = Py_None, *hi_obj = Py_None;
    int version, verify_crc, lo_excl = 0, hi_incl = 0;
    if (!PyArg_ParseTuple(args, "OO!ip|OOpp:check_blocks", &data, &PyList_Type, &bounds,
                          &version, &verify_crc, &lo_obj, &hi_obj, &lo_excl, &hi_incl)) {
        return NULL;
    }
    if (version != 1 && version != 2) {
        PyErr_Format(PyExc_ValueError, "unsupported SST format version %d", version);
        return NULL;
    }
    if ((lo_obj != Py_None && !PyBytes_Check(lo_obj)) ||
        (hi_obj != Py_None && !PyBytes_Check(hi_obj))) {
        PyErr_SetString(PyExc_TypeError, "lo and hi must be bytes or None");
        return NULL;
    }
    Py_ssize_t nb = PyList_GET_SIZE(bounds) - 1;
    if (nb < 0) {
        PyErr_SetString(PyExc_ValueError, "bounds must hold at least one offset");
        return NULL;
    }
    CheckedBlocksObject *o = PyObject_New(CheckedBlocksObject, &CheckedBlocksType);
    if (o == NULL) {
        return NULL;
    }
    o->has_view = 0;
    o->keys = NULL;
    o->keys_len = o->keys_cap = 0;
    o->ents = NULL;
    o->n = o->cap = 0;
    o->ended = 0;
    if (PyObject_GetBuffer(data, &o->view, PyBUF_SIMPLE) < 0) {
        Py_DECREF(o);
        return NULL;
    }
    o->has_view = 1;
    Py_ssize_t *bv = PyMem_Malloc((size_t)(nb + 1) * sizeof(Py_ssize_t));
    if (bv == NULL) {
        Py_DECREF(o);
        return PyErr_NoMemory();
    }
    Py_ssize_t len = o->view.len;
    for (Py_ssize_t i = 0; i <= nb; i++) {
        bv[i] = PyLong_AsSsize_t(PyList_GET_ITEM(bounds, i));
        if (bv[i] == -1 && PyErr_Occurred()) {
            PyMem_Free(bv);
            Py_DECREF(o);
            return NULL;
        }
    }
    for (Py_ssize_t i = 0; i < nb; i++) {
        if (bv[i] < 0 || bv[i + 1] > len + SL_FAULT_BOUNDS_SLACK ||
            bv[i + 1] - bv[i] < (verify_crc ? 4 : 0)) {
            PyErr_Format(PyExc_ValueError, "block %zd: bounds [%zd, %zd) out of range", i, bv[i],
                         bv[i + 1]);
            PyMem_Free(bv);
            Py_DECREF(o);
            return NULL;
        }
    }
    ParseCtx x;
    memset(&x, 0, sizeof x);
    x.base = (const unsigned char *)o->view.buf;
    x.version = version;
    x.out = o;
    if (lo_obj != Py_None) {
        x.has_lo = 1;
        x.lo = (const unsigned char *)PyBytes_AS_STRING(lo_obj);
        x.lo_len = (size_t)PyBytes_GET_SIZE(lo_obj);
        x.lo_excl = lo_excl;
    }
    if (hi_obj != Py_None) {
        x.has_hi = 1;
        x.hi = (const unsigned char *)PyBytes_AS_STRING(hi_obj);
        x.hi_len = (size_t)PyBytes_GET_SIZE(hi_obj);
        x.hi_incl = hi_incl;
    }
    Py_ssize_t bad = -1;
    int crc_bad = 0;
    /* lo, hi (arguments) and data (viewed) stay alive and unchanged: no GIL needed */
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < nb; i++) {
        const unsigned char *p = x.base + bv[i];
        size_t n = (size_t)(bv[i + 1] - bv[i]);
        if (verify_crc) {
            n -= 4;
            if (sl_crc32(p, n) != load_be32(p + n)) {
                crc_bad = 1;
                bad = i;
                break;
            }
        }
        if (parse_block(&x, p, n, (size_t)bv[i]) < 0) {
            bad = i;
            break;
        }
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(bv);
    PyMem_RawFree(x.cur);
    PyMem_RawFree(x.first);
    if (bad >= 0) {
        if (x.nomem) {
            PyErr_NoMemory();
        } else if (crc_bad) {
            PyErr_Format(PyExc_ValueError, "block %zd: checksum mismatch", bad);
        } else {
            PyErr_Format(PyExc_ValueError, "block %zd: %s", bad, x.err);
        }
        Py_DECREF(o);
        return NULL;
    }
    return (PyObject *)o;
}

static PyObject *entry_row(CheckedBlocksObject *o, const PEntry *e);

static Py_ssize_t cb_len(CheckedBlocksObject *self)
{
    return self->n;
}

static PyObject *cb_rows(CheckedBlocksObject *self, PyObject *unused)
{
    (void)unused;
    PyObject *out = PyList_New(self->n);
    if (out == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < self->n; i++) {
        PyObject *r = entry_row(self, &self->ents[i]);
        if (r == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, r);
    }
    return out;
}

static PyObject *cb_get_ended(CheckedBlocksObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(self->ended);
}

static PyObject *cb_get_nbytes(CheckedBlocksObject *self, void *c)
{
    (void)c;
    return PyLong_FromSize_t((size_t)self->view.len + self->keys_len +
                             (size_t)self->cap * sizeof(PEntry));
}

static PySequenceMethods cb_as_sequence = {
    .sq_length = (lenfunc)cb_len,
};

static PyMethodDef cb_methods[] = {
    {"rows", (PyCFunction)cb_rows, METH_NOARGS,
     "rows() -> list\n\nThe recorded entries as row tuples (key, seq, kind, value, expire_ts,\n"
     "create_ts), exactly what decode_blocks returns for them."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef cb_getset[] = {
    {"ended", (getter)cb_get_ended, NULL,
     "True if an entry at or past the end bound was seen (the range ends here)", NULL},
    {"nbytes", (getter)cb_get_nbytes, NULL, "memory held (data, keys, entries), about", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject CheckedBlocksType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "slatelib._speedups.CheckedBlocks",
    .tp_basicsize = sizeof(CheckedBlocksObject),
    .tp_dealloc = (destructor)cb_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Checked blocks of one ranged get (see check_blocks); a Pipe source block.",
    .tp_as_sequence = &cb_as_sequence,
    .tp_methods = cb_methods,
    .tp_getset = cb_getset,
};

/* ------------------------------------------------------------------ the pipe */

#define PIPE_ROWS 0
#define PIPE_RESOLVE 1
#define PIPE_RETAIN 2

/* Misordered or malformed input rows: a ValueError subclass, created at module init. */
static PyObject *PipeInputError;
/* A row the block writer refused (its ValueError, re-raised as this ValueError subclass so
 * that callers tell it from a merge operator's own ValueError). */
static PyObject *PipeWriterError;

/* After a failed block-writer call: its ValueError becomes PipeWriterError. Returns -1. */
static int writer_failed(void)
{
    if (!PyErr_ExceptionMatches(PyExc_ValueError)) {
        return -1;
    }
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    PyObject *msg = v != NULL ? PyObject_Str(v) : NULL;
    Py_XDECREF(t);
    Py_XDECREF(v);
    Py_XDECREF(tb);
    if (msg != NULL) {
        PyErr_SetObject(PipeWriterError, msg);
        Py_DECREF(msg);
    }
    return -1;
}

/* One version as the merge sees it: pointers into its owner's memory. */
typedef struct {
    const unsigned char *key;
    size_t klen;
    const unsigned char *val; /* NULL: not read yet (a Python row's value: see item_val) */
    size_t vlen;
    uint64_t seq;
    int64_t exp, cre;
    int kind, has_exp, has_cre;
    PyObject *row; /* the row tuple of a Python source (borrowed), else NULL */
    int src;         /* a Python row: its source and position, for item_val's error */
    Py_ssize_t nrow;
} PItem;

typedef struct {
    PItem it;
    PyObject *owner; /* owned: the CheckedBlocks or the row tuple that holds the bytes */
} PVer;

typedef struct {
    PyObject *iter;  /* owned; NULL once exhausted */
    PyObject *block; /* owned: a CheckedBlocks or a list of rows; NULL when none */
    int native;
    Py_ssize_t pos, len;
    PItem cur;
    uint64_t kpre; /* cur's key prefix (key_prefix): most heap compares end on it, without
                    * touching the key's own memory */
    int src;
    Py_ssize_t nrow;
} PCursor;

/* The first 8 bytes of a key as a big-endian integer, zero-padded: when two prefixes differ
 * they order as the keys do (a zero pad is below any byte where the padded key ended: it is
 * then a proper prefix of the other, hence smaller); equal prefixes need the whole compare. */
static inline uint64_t key_prefix(const unsigned char *k, size_t klen)
{
    if (klen >= 8) {
        return load_be64(k);
    }
    uint64_t v = 0;
    for (size_t i = 0; i < 8; i++) {
        v = v << 8 | (i < klen ? k[i] : 0u);
    }
    return v;
}

static inline void item_of_entry(PItem *it, CheckedBlocksObject *o, const PEntry *e)
{
    it->key = o->keys + e->koff;
    it->klen = e->klen;
    it->val = (const unsigned char *)o->view.buf + e->voff;
    it->vlen = e->vlen;
    it->seq = e->seq;
    it->exp = e->exp;
    it->cre = e->cre;
    it->kind = e->kind;
    it->has_exp = e->has_exp;
    it->has_cre = e->has_cre;
    it->row = NULL;
}

static inline int opt_i64(PyObject *o, int *has, int64_t *out)
{
    if (o == Py_None) {
        *has = 0;
        *out = 0;
        return 0;
    }
    if (!PyLong_Check(o)) {
        return -1;
    }
    long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return -1;
    }
    *has = 1;
    *out = (int64_t)v;
    return 0;
}

/* The row at c->pos of a list block into c->cur. */
static inline int load_py_row(PCursor *c)
{
    PyObject *row = PyList_GET_ITEM(c->block, c->pos);
    const char *why = NULL;
    if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != 6) {
        why = "not a 6-tuple row";
        goto bad;
    }
    PyObject *key = PyTuple_GET_ITEM(row, 0);
    if (!PyBytes_Check(key)) {
        why = "key is not bytes";
        goto bad;
    }
    PyObject *seq = PyTuple_GET_ITEM(row, 1);
    uint64_t s = PyLong_Check(seq) ? PyLong_AsUnsignedLongLong(seq) : (uint64_t)-1;
    if (s == (uint64_t)-1 && (!PyLong_Check(seq) || PyErr_Occurred())) {
        PyErr_Clear();
        why = "seq is not an integer in [0, 2^64)";
        goto bad;
    }
    PyObject *kind = PyTuple_GET_ITEM(row, 2);
    long k = PyLong_Check(kind) ? PyLong_AsLong(kind) : -1;
    if (k < KIND_VALUE || k > KIND_MERGE) {
        PyErr_Clear();
        why = "unknown row kind";
        goto bad;
    }
    PItem *it = &c->cur;
    if (opt_i64(PyTuple_GET_ITEM(row, 4), &it->has_exp, &it->exp) < 0 ||
        opt_i64(PyTuple_GET_ITEM(row, 5), &it->has_cre, &it->cre) < 0) {
        why = "expire_ts / create_ts is not None or an integer in the i64 range";
        goto bad;
    }
    it->key = (const unsigned char *)PyBytes_AS_STRING(key);
    it->klen = (size_t)PyBytes_GET_SIZE(key);
    /* The value is read when a sink needs its bytes (item_val), not here: the merge never
     * looks at it, and the rows() sink passes the row (or its value object) on as it is, so
     * a merge over Python rows touches no value object (one memory access less per row). */
    it->val = k == KIND_TOMBSTONE ? (const unsigned char *)"" : NULL;
    it->vlen = 0;
    it->seq = s;
    it->kind = (int)k;
    it->row = row;
    it->src = c->src;
    it->nrow = c->nrow;
    return 0;
bad:
    PyErr_Format(PipeInputError, "source %d, row %zd: %s", c->src, c->nrow, why);
    return -1;
}

static int load_cur(PCursor *c)
{
    if (c->native) {
        CheckedBlocksObject *o = (CheckedBlocksObject *)c->block;
        item_of_entry(&c->cur, o, &o->ents[c->pos]);
    }
    else if (load_py_row(c) < 0) {
        return -1;
    }
    c->kpre = key_prefix(c->cur.key, c->cur.klen);
    return 0;
}

/* The owner of the cursor's current item (borrowed). */
static inline PyObject *cur_owner(PCursor *c)
{
    return c->native ? c->block : c->cur.row;
}

/* Next non-empty block. 1: loaded, 0: exhausted, -1: error. */
static int p_next_block(PCursor *c)
{
    Py_CLEAR(c->block);
    while (c->iter != NULL) {
        PyObject *b = PyIter_Next(c->iter);
        if (b == NULL) {
            if (PyErr_Occurred()) {
                return -1;
            }
            Py_CLEAR(c->iter);
            return 0;
        }
        Py_ssize_t n;
        if (Py_IS_TYPE(b, &CheckedBlocksType)) {
            c->native = 1;
            n = ((CheckedBlocksObject *)b)->n;
        } else if (PyList_Check(b)) {
            c->native = 0;
            n = PyList_GET_SIZE(b);
        } else {
            PyErr_Format(PyExc_TypeError,
                         "source %d yielded %.100s, not a list of rows or CheckedBlocks",
                         c->src, Py_TYPE(b)->tp_name);
            Py_DECREF(b);
            return -1;
        }
        if (n == 0) {
            Py_DECREF(b);
            continue;
        }
        c->block = b;
        c->pos = 0;
        c->len = n;
        if (load_cur(c) < 0) {
            return -1;
        }
        c->nrow++;
        return 1;
    }
    return 0;
}

/* Move to the next item, checking the order. 1: an item, 0: exhausted, -1: error. */
static int p_advance(PCursor *c)
{
    PyObject *prev = cur_owner(c);
    const unsigned char *pkey = c->cur.key;
    size_t pklen = c->cur.klen;
    uint64_t pseq = c->cur.seq;
    uint64_t pkpre = c->kpre;
    int r;
    Py_INCREF(prev); /* keeps pkey alive while the block may go */
    if (++c->pos < c->len) {
        r = load_cur(c) < 0 ? -1 : 1;
        if (r == 1) {
            c->nrow++;
        }
    } else {
        r = p_next_block(c);
    }
    if (r == 1 && pkpre != c->kpre) {
        if (pkpre > c->kpre) {
            PyErr_Format(PipeInputError,
                         "source %d, row %zd: out of order (rows must be key ascending, "
                         "seq descending)", c->src, c->nrow - 1);
            r = -1;
        }
    }
    else if (r == 1) {
        int cmp = raw_cmp(pkey, pklen, c->cur.key, c->cur.klen);
        if (cmp > 0 || (cmp == 0 && c->cur.seq > pseq)) {
            PyErr_Format(PipeInputError,
                         "source %d, row %zd: out of order (rows must be key ascending, "
                         "seq descending)", c->src, c->nrow - 1);
            r = -1;
        }
    }
    Py_DECREF(prev);
    return r;
}

static inline int p_less(const PCursor *a, const PCursor *b)
{
    if (a->kpre != b->kpre) {
        return a->kpre < b->kpre;
    }
    int cmp = raw_cmp(a->cur.key, a->cur.klen, b->cur.key, b->cur.klen);
    if (cmp) {
        return cmp < 0;
    }
    if (a->cur.seq != b->cur.seq) {
        return a->cur.seq > b->cur.seq;
    }
    return a->src < b->src;
}

enum { SINK_NONE, SINK_ROWS, SINK_BW, SINK_STATS, SINK_ARROW };

/* Arrow output: growable PyMem buffers (csrc/common.h), turned into bytes per batch. */
typedef struct {
    SlBuf koff, kdata, voff, vdata, seq, exp_valid, exp, cre_valid, cre;
    Py_ssize_t n, exp_nulls, cre_nulls;
    int want_seq, want_exp, want_cre;
} ArrowOut;

typedef struct {
    PyObject_HEAD
    PCursor *cursors;
    PCursor **heap;
    int ncur, nheap, started, finished, failed, busy, mode;
    Py_ssize_t run; /* rows(): the items one step may emit (PIPE_ROWS versions, PIPE_RESOLVE
                     * keys); 0 elsewhere: one version or key per step */
    PyObject *fold; /* or NULL */
    uint64_t min_seq;
    int bottom;
    long long tick;
    PVer *vers; /* versions of the current key (each owns its owner) */
    Py_ssize_t nvers, cap;
    PItem *outv; /* retain: the key's kept items before the bottom rule */
    Py_ssize_t outcap;
    /* the sink of the current call */
    int sink;
    PyObject *out_list;        /* SINK_ROWS (borrowed) */
    BlockWriterObject *bw;     /* SINK_BW (borrowed) */
    RangeAcc acc;              /* SINK_STATS */
    ArrowOut arrow;            /* SINK_ARROW */
    long long rows_in, rows_out, versions_dropped, tombstones_dropped, expired_to_tombstone,
        expired_merges_dropped;
} PipeObject;

static PyTypeObject PipeType;

static void p_sift_down(PipeObject *m, int i)
{
    PCursor **h = m->heap;
    int n = m->nheap;
    PCursor *x = h[i];
    for (;;) {
        int l = 2 * i + 1;
        if (l >= n) {
            break;
        }
        int r = l + 1;
        int s = (r < n && p_less(h[r], h[l])) ? r : l;
        if (!p_less(h[s], x)) {
            break;
        }
        h[i] = h[s];
        i = s;
    }
    h[i] = x;
}

static int p_pop_advance(PipeObject *m)
{
    PCursor *c = m->heap[0];
    int r = p_advance(c);
    if (r < 0) {
        return -1;
    }
    if (r == 0) {
        m->heap[0] = m->heap[--m->nheap];
        if (m->nheap == 0) {
            return 0;
        }
    }
    if (m->nheap > 1) {
        p_sift_down(m, 0);
    }
    return 0;
}

static int p_start(PipeObject *m)
{
    m->started = 1;
    for (int i = 0; i < m->ncur; i++) {
        int r = p_next_block(&m->cursors[i]);
        if (r < 0) {
            return -1;
        }
        if (r == 1) {
            m->heap[m->nheap++] = &m->cursors[i];
        }
    }
    for (int i = m->nheap / 2 - 1; i >= 0; i--) {
        p_sift_down(m, i);
    }
    return 0;
}

static void p_vers_clear(PipeObject *m)
{
    for (Py_ssize_t i = 0; i < m->nvers; i++) {
        Py_DECREF(m->vers[i].owner);
    }
    m->nvers = 0;
}

static int p_vers_push(PipeObject *m, PCursor *c)
{
    if (m->nvers == m->cap) {
        /* outv first: it never has less room than vers */
        size_t ocap = (size_t)m->outcap, vcap = (size_t)m->cap;
        if (sl_grow((void **)&m->outv, &ocap, (size_t)m->nvers + 1, sizeof(PItem), SL_MEM) < 0) {
            return -1;
        }
        m->outcap = (Py_ssize_t)ocap;
        if (sl_grow((void **)&m->vers, &vcap, (size_t)m->nvers + 1, sizeof(PVer), SL_MEM) < 0) {
            return -1;
        }
        m->cap = (Py_ssize_t)vcap;
    }
    PVer *v = &m->vers[m->nvers++];
    v->it = c->cur;
    v->owner = cur_owner(c);
    Py_INCREF(v->owner);
    return 0;
}

/* Every version of the top key into m->vers (its owners keep the key bytes alive). */
static int p_gather(PipeObject *m)
{
    p_vers_clear(m);
    if (p_vers_push(m, m->heap[0]) < 0) {
        return -1;
    }
    const unsigned char *key = m->vers[0].it.key;
    size_t klen = m->vers[0].it.klen;
    if (p_pop_advance(m) < 0) {
        return -1;
    }
    while (m->nheap) {
        PCursor *top = m->heap[0];
        if (!sl_key_eq(top->cur.key, top->cur.klen, key, klen)) {
            break;
        }
        if (p_vers_push(m, top) < 0 || p_pop_advance(m) < 0) {
            return -1;
        }
    }
    return 0;
}

static PyObject *opt_i64_obj(int has, int64_t v)
{
    if (!has) {
        Py_RETURN_NONE;
    }
    return PyLong_FromLongLong(v);
}

/* A new row tuple (key, seq, kind, value, expire_ts, create_ts) of raw fields. */
static PyObject *raw_row(const unsigned char *k, size_t klen, uint64_t seq, int kind,
                         const unsigned char *v, size_t vlen, int has_exp, int64_t exp,
                         int has_cre, int64_t cre)
{
    PyObject *items[6];
    items[0] = PyBytes_FromStringAndSize((const char *)k, (Py_ssize_t)klen);
    items[1] = PyLong_FromUnsignedLongLong(seq);
    items[2] = PyLong_FromLong(kind);
    items[3] = PyBytes_FromStringAndSize(kind == KIND_TOMBSTONE ? NULL : (const char *)v,
                                         kind == KIND_TOMBSTONE ? 0 : (Py_ssize_t)vlen);
    items[4] = opt_i64_obj(has_exp, exp);
    items[5] = opt_i64_obj(has_cre, cre);
    PyObject *t = PyTuple_New(6);
    for (int i = 0; i < 6; i++) {
        if (items[i] == NULL || t == NULL) {
            for (int j = 0; j < 6; j++) {
                Py_XDECREF(items[j]);
            }
            Py_XDECREF(t);
            return NULL;
        }
    }
    for (int i = 0; i < 6; i++) {
        PyTuple_SET_ITEM(t, i, items[i]);
    }
    return t;
}

static PyObject *entry_row(CheckedBlocksObject *o, const PEntry *e)
{
    return raw_row(o->keys + e->koff, e->klen, e->seq, e->kind,
                   (const unsigned char *)o->view.buf + e->voff, e->vlen, e->has_exp, e->exp,
                   e->has_cre, e->cre);
}

/* The Python row of an item: its own tuple, else a new one. */
static PyObject *item_row(const PItem *it)
{
    if (it->row != NULL) {
        Py_INCREF(it->row);
        return it->row;
    }
    return raw_row(it->key, it->klen, it->seq, it->kind, it->val, it->vlen, it->has_exp,
                   it->exp, it->has_cre, it->cre);
}

static PyObject *p_vers_list(PipeObject *m)
{
    PyObject *list = PyList_New(m->nvers);
    if (list == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < m->nvers; i++) {
        PyObject *r = item_row(&m->vers[i].it);
        if (r == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, r);
    }
    return list;
}

static int arrow_put_i64(SlBuf *b, int64_t v)
{
    return sl_buf_put(b, &v, sizeof v);
}

static int arrow_put_valid(SlBuf *b, Py_ssize_t i, int valid)
{
    if (i % 8 == 0) {
        unsigned char z = 0;
        if (sl_buf_put(b, &z, 1) < 0) {
            return -1;
        }
    }
    if (valid) {
        b->p[i / 8] |= (unsigned char)(1u << (i % 8));
    }
    return 0;
}

/* `it` with its value bytes: `it` itself, or `*tmp` filled from the Python row whose value
 * was not read yet (PipeInputError if it is not bytes). NULL on error. */
static const PItem *item_val(const PItem *it, PItem *tmp)
{
    if (it->val != NULL) {
        return it;
    }
    PyObject *v = PyTuple_GET_ITEM(it->row, 3);
    if (!PyBytes_Check(v)) {
        PyErr_Format(PipeInputError, "source %d, row %zd: value is not bytes", it->src,
                     it->nrow);
        return NULL;
    }
    *tmp = *it;
    tmp->val = (const unsigned char *)PyBytes_AS_STRING(v);
    tmp->vlen = (size_t)PyBytes_GET_SIZE(v);
    return tmp;
}

/* One visible (resolve) or kept (retain) item into the sink. `pyrow`: the item as a Python
 * row when there is one (a fold's output), else NULL. */
static int p_emit(PipeObject *m, const PItem *it, PyObject *pyrow)
{
    PItem tmp;
    if (m->sink != SINK_ROWS && pyrow == NULL && (it = item_val(it, &tmp)) == NULL) {
        return -1;
    }
    switch (m->sink) {
    case SINK_ROWS: {
        PyObject *r;
        if (m->mode == PIPE_RESOLVE) {
            PyObject *k = it->row != NULL ? PyTuple_GET_ITEM(it->row, 0) : NULL;
            PyObject *v = pyrow != NULL ? pyrow : (it->row != NULL ? PyTuple_GET_ITEM(it->row, 3)
                                                                   : NULL);
            PyObject *kn = k != NULL ? (Py_INCREF(k), k)
                : PyBytes_FromStringAndSize((const char *)it->key, (Py_ssize_t)it->klen);
            PyObject *vn = v != NULL ? (Py_INCREF(v), v)
                : PyBytes_FromStringAndSize((const char *)it->val, (Py_ssize_t)it->vlen);
            r = (kn != NULL && vn != NULL) ? PyTuple_Pack(2, kn, vn) : NULL;
            Py_XDECREF(kn);
            Py_XDECREF(vn);
        } else if (pyrow != NULL) {
            Py_INCREF(pyrow);
            r = pyrow;
        } else {
            r = item_row(it);
        }
        if (r == NULL) {
            return -1;
        }
        int rc = PyList_Append(m->out_list, r);
        Py_DECREF(r);
        return rc;
    }
    case SINK_BW: {
        int rc = pyrow != NULL
            ? bw_add_row(m->bw, pyrow)
            : bw_add_raw(m->bw, NULL, it->key, it->klen, it->seq, it->kind, it->val, it->vlen,
                         it->has_exp, it->exp, it->has_cre, it->cre);
        return rc < 0 ? writer_failed() : 0;
    }
    case SINK_STATS:
        if ((uint64_t)it->klen > 0xFFFFFFFFu) {
            PyErr_SetString(PyExc_ValueError, "key longer than 2^32 - 1 bytes");
            return -1;
        }
        acc_raw(&m->acc, it->key, it->klen, it->val, it->vlen);
        return 0;
    case SINK_ARROW: {
        ArrowOut *a = &m->arrow;
        if (a->kdata.len + it->klen > (size_t)INT32_MAX ||
            a->vdata.len + it->vlen > (size_t)INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "an Arrow batch would exceed 2 GiB of keys or values");
            return -1;
        }
        if (sl_buf_put(&a->kdata, it->key, it->klen) < 0 || sl_buf_put(&a->vdata, it->val, it->vlen) < 0) {
            return -1;
        }
        int32_t ko = (int32_t)a->kdata.len, vo = (int32_t)a->vdata.len;
        if (sl_buf_put(&a->koff, &ko, 4) < 0 || sl_buf_put(&a->voff, &vo, 4) < 0) {
            return -1;
        }
        if (a->want_seq && it->seq > (uint64_t)INT64_MAX) {
            /* the row path's pyarrow conversion refuses it too: never wrap to negative */
            PyErr_Format(PyExc_OverflowError,
                         "seq %llu does not fit the int64 'seq' column",
                         (unsigned long long)it->seq);
            return -1;
        }
        if (a->want_seq && arrow_put_i64(&a->seq, (int64_t)it->seq) < 0) {
            return -1;
        }
        if (a->want_exp) {
            if (arrow_put_valid(&a->exp_valid, a->n, it->has_exp) < 0 ||
                arrow_put_i64(&a->exp, it->has_exp ? it->exp : 0) < 0) {
                return -1;
            }
            a->exp_nulls += !it->has_exp;
        }
        if (a->want_cre) {
            if (arrow_put_valid(&a->cre_valid, a->n, it->has_cre) < 0 ||
                arrow_put_i64(&a->cre, it->has_cre ? it->cre : 0) < 0) {
                return -1;
            }
            a->cre_nulls += !it->has_cre;
        }
        a->n++;
        return 0;
    }
    default:
        PyErr_SetString(PyExc_RuntimeError, "Pipe has no sink");
        return -1;
    }
}

/* One key of PIPE_RETAIN, versions in m->vers newest first: the steps of
 * slatelib.core.retention.retain_window for one key. */
static int p_retain_key(PipeObject *m)
{
    Py_ssize_t n = 1;
    int has_merge = m->vers[0].it.kind == KIND_MERGE;
    if (m->nvers > 1) {
        uint64_t last = m->vers[0].it.seq;
        for (Py_ssize_t i = 1; i < m->nvers; i++) {
            uint64_t s = m->vers[i].it.seq;
            if (s == last) {
                Py_DECREF(m->vers[i].owner);
                m->versions_dropped++;
                continue;
            }
            last = s;
            has_merge |= m->vers[i].it.kind == KIND_MERGE;
            m->vers[n++] = m->vers[i];
        }
        m->nvers = n;
    }
    if (has_merge && m->fold != NULL) {
        PyObject *versions = p_vers_list(m);
        if (versions == NULL) {
            return -1;
        }
        PyObject *kept = PyObject_CallOneArg(m->fold, versions);
        Py_DECREF(versions);
        if (kept == NULL) {
            return -1;
        }
        if (!PyList_Check(kept)) {
            Py_DECREF(kept);
            PyErr_SetString(PyExc_TypeError, "retention fold must return a list of rows");
            return -1;
        }
        Py_ssize_t k = PyList_GET_SIZE(kept);
        for (Py_ssize_t i = 0; i < k && i < PyList_GET_SIZE(kept); i++) {
            PyObject *r = PyList_GET_ITEM(kept, i);
            Py_INCREF(r);
            int rc = p_emit(m, NULL, r);
            Py_DECREF(r);
            if (rc < 0) {
                Py_DECREF(kept);
                return -1;
            }
        }
        m->rows_out += k;
        Py_DECREF(kept);
        return 0;
    }
    Py_ssize_t nout = 0, consumed = 0;
    for (Py_ssize_t i = 0; i < m->nvers; i++) {
        PItem it = m->vers[i].it;
        consumed++;
        if (it.has_exp && it.exp <= m->tick) {
            if (it.kind == KIND_MERGE) {
                m->expired_merges_dropped++;
                continue;
            }
            /* an expired value becomes a tombstone: same key, seq and create_ts */
            it.kind = KIND_TOMBSTONE;
            it.val = (const unsigned char *)"";
            it.vlen = 0;
            it.has_exp = 0;
            it.exp = 0;
            it.row = NULL;
            m->expired_to_tombstone++;
        }
        m->outv[nout++] = it;
        if (!(it.seq > m->min_seq || it.kind == KIND_MERGE)) {
            break;
        }
    }
    m->versions_dropped += m->nvers - consumed;
    if (m->bottom) {
        Py_ssize_t keep = nout;
        while (keep > 0 && m->outv[keep - 1].kind == KIND_TOMBSTONE) {
            keep--;
        }
        m->tombstones_dropped += nout - keep;
        nout = keep;
    }
    for (Py_ssize_t i = 0; i < nout; i++) {
        if (p_emit(m, &m->outv[i], NULL) < 0) {
            return -1;
        }
    }
    m->rows_out += nout;
    return 0;
}

/* One key of PIPE_RETAIN when it has a single version, known without moving any cursor:
 * the next entry of the top's block and the heap's second smallest (one of the root's
 * children: a version of the same key would sort before any other key) hold other keys.
 * Then p_retain_key's rules for one version run on the top's item in place (no gathering,
 * no copies) and the top advances. 1: done, 0: not known to be single (or a merge operand
 * to fold): the caller gathers, -1: error. */
static int p_retain_single(PipeObject *m)
{
    PCursor *top = m->heap[0];
    const PItem *it = &top->cur;
    if (!top->native || top->pos + 1 >= top->len || (it->kind == KIND_MERGE && m->fold != NULL)) {
        return 0;
    }
    for (int j = 1; j <= 2 && j < m->nheap; j++) {
        const PCursor *o = m->heap[j];
        if (o->kpre == top->kpre && sl_key_eq(o->cur.key, o->cur.klen, it->key, it->klen)) {
            return 0;
        }
    }
    const CheckedBlocksObject *b = (const CheckedBlocksObject *)top->block;
    const PEntry *e = &b->ents[top->pos + 1];
    if (sl_key_eq(b->keys + e->koff, e->klen, it->key, it->klen)) {
        return 0;
    }
    m->rows_in++;
    PItem tomb;
    if (it->has_exp && it->exp <= m->tick) {
        if (it->kind == KIND_MERGE) {
            m->expired_merges_dropped++;
            it = NULL;
        } else {
            /* an expired value becomes a tombstone: same key, seq and create_ts */
            tomb = *it;
            tomb.kind = KIND_TOMBSTONE;
            tomb.val = (const unsigned char *)"";
            tomb.vlen = 0;
            tomb.has_exp = 0;
            tomb.exp = 0;
            tomb.row = NULL;
            m->expired_to_tombstone++;
            it = &tomb;
        }
    }
    if (it != NULL && m->bottom && it->kind == KIND_TOMBSTONE) {
        m->tombstones_dropped++;
        it = NULL;
    }
    if (it != NULL) {
        if (p_emit(m, it, NULL) < 0) {
            return -1;
        }
        m->rows_out++;
    }
    return p_pop_advance(m) < 0 ? -1 : 1;
}

/* One key of PIPE_RESOLVE: slatelib.core.merge.resolve_rows for one key. */
static int p_resolve_key(PipeObject *m)
{
    PCursor *top = m->heap[0];
    if (top->cur.kind == KIND_MERGE) {
        if (p_gather(m) < 0) {
            return -1;
        }
        m->rows_in += m->nvers;
        const PItem *head = &m->vers[0].it;
        PyObject *key = head->row != NULL ? PyTuple_GET_ITEM(head->row, 0) : NULL;
        if (key != NULL) {
            Py_INCREF(key);
        } else {
            key = PyBytes_FromStringAndSize((const char *)head->key, (Py_ssize_t)head->klen);
            if (key == NULL) {
                return -1;
            }
        }
        PyObject *versions = p_vers_list(m);
        PyObject *value = NULL;
        if (versions != NULL) {
            value = m->fold != NULL
                ? PyObject_CallFunctionObjArgs(m->fold, key, versions, NULL)
                : (PyErr_SetString(PyExc_TypeError, "merge operands need a fold"), NULL);
        }
        Py_XDECREF(versions);
        Py_DECREF(key);
        if (value == NULL) {
            return -1;
        }
        int rc = 0;
        if (value != Py_None && !PyBytes_Check(value)) {
            /* an operator may return any bytes-like object: its bytes are the value */
            PyObject *b = PyObject_CheckBuffer(value) ? PyBytes_FromObject(value) : NULL;
            if (b == NULL && !PyErr_Occurred()) {
                PyErr_Format(PyExc_TypeError, "a merge must produce bytes or None, not %.100s",
                             Py_TYPE(value)->tp_name);
            }
            Py_SETREF(value, b);
            if (value == NULL) {
                return -1;
            }
        }
        if (value != Py_None) {
            /* the visible row: the newest operand's seq and timestamps, the folded value */
            PItem it = *head;
            it.kind = KIND_VALUE;
            it.val = (const unsigned char *)PyBytes_AS_STRING(value);
            it.vlen = (size_t)PyBytes_GET_SIZE(value);
            rc = p_emit(m, &it, value);
            if (rc == 0) {
                m->rows_out++;
            }
        }
        Py_DECREF(value);
        return rc;
    }
    /* a value or a tombstone: the newest version decides, the rest is skipped */
    const unsigned char *key = top->cur.key; /* alive while `owner` is held */
    size_t klen = top->cur.klen;
    PyObject *owner = cur_owner(top);
    Py_INCREF(owner);
    int rc = 0;
    if (top->cur.kind == KIND_VALUE) {
        rc = p_emit(m, &top->cur, NULL);
        if (rc == 0) {
            m->rows_out++;
        }
    }
    if (rc == 0) {
        rc = p_pop_advance(m);
        m->rows_in++;
    }
    while (rc == 0 && m->nheap) {
        top = m->heap[0];
        if (!sl_key_eq(top->cur.key, top->cur.klen, key, klen)) {
            break;
        }
        rc = p_pop_advance(m);
        m->rows_in++;
    }
    Py_DECREF(owner);
    return rc;
}

/* Process one key (PIPE_ROWS: one version; up to m->run of them for rows()) into the sink.
 * 1: done, 0: the input is exhausted, -1: error. */
static int p_step(PipeObject *m)
{
    if (m->failed) {
        /* never report a failed merge as a finished one: its output is incomplete */
        PyErr_SetString(PyExc_RuntimeError, "this Pipe failed earlier; its output is incomplete");
        return -1;
    }
    if (m->finished) {
        return 0;
    }
    if (!m->started && p_start(m) < 0) {
        m->finished = m->failed = 1;
        return -1;
    }
    if (m->nheap == 0) {
        m->finished = 1;
        return 0;
    }
    int rc;
    if (m->mode == PIPE_ROWS) {
        /* versions as they are (heapq.merge's next items): up to m->run of them in one step */
        Py_ssize_t n = m->run > 1 ? m->run : 1;
        rc = 0;
        while (rc == 0 && n-- > 0 && m->nheap) {
            PCursor *top = m->heap[0];
            rc = (m->sink == SINK_ROWS && top->cur.row != NULL)
                ? PyList_Append(m->out_list, top->cur.row) /* a Python row goes out as it is */
                : p_emit(m, &top->cur, NULL);
            if (rc == 0) {
                m->rows_in++;
                m->rows_out++;
                rc = p_pop_advance(m);
            }
        }
    } else if (m->mode == PIPE_RESOLVE) {
        /* up to m->run keys: each gives at most one pair, so rows() never overshoots */
        Py_ssize_t n = m->run > 1 ? m->run : 1;
        do {
            rc = p_resolve_key(m);
        } while (rc == 0 && --n > 0 && m->nheap);
    } else {
        rc = p_retain_single(m);
        if (rc == 0) {
            rc = p_gather(m);
            if (rc == 0) {
                m->rows_in += m->nvers;
                rc = p_retain_key(m);
            }
        } else if (rc == 1) {
            rc = 0;
        }
    }
    if (m->nvers) {
        p_vers_clear(m);
    }
    if (rc < 0) {
        m->finished = m->failed = 1;
        return -1;
    }
    return 1;
}

static int p_enter(PipeObject *m, int sink)
{
    if (m->busy) {
        PyErr_SetString(PyExc_RuntimeError, "Pipe is already in use");
        return -1;
    }
    m->busy = 1;
    m->sink = sink;
    return 0;
}

static void p_leave(PipeObject *m)
{
    m->busy = 0;
    m->sink = SINK_NONE;
    m->out_list = NULL;
    m->bw = NULL;
}

PyDoc_STRVAR(pipe_fill_doc,
"fill(writer, budget, /) -> bool\n\n"
"MODE_RETAIN: add the kept rows of whole keys to `writer` (a BlockWriterV2) until it has\n"
"taken at least `budget` encoded bytes in this call (checked after each key) or the input\n"
"ends. True when the input is exhausted. A row the writer rejects raises ValueError.");

static PyObject *pipe_fill(PipeObject *m, PyObject *args)
{
    PyObject *w;
    long long budget;
    if (!PyArg_ParseTuple(args, "O!L:fill", &BlockWriterType, &w, &budget)) {
        return NULL;
    }
    if (m->mode != PIPE_RETAIN) {
        PyErr_SetString(PyExc_ValueError, "fill() needs MODE_RETAIN");
        return NULL;
    }
    BlockWriterObject *bw = (BlockWriterObject *)w;
    if (bw_enter(bw) < 0) {
        return NULL;
    }
    if (p_enter(m, SINK_BW) < 0) {
        bw->busy = 0;
        return NULL;
    }
    m->bw = bw;
    Py_INCREF(w); /* a fold could drop the caller's last reference */
#define BW_SIZE(b) ((b)->closed_bytes + ((b)->block_rows ? (b)->data_len + 2 * (b)->num_restarts + 2 : 0))
    uint64_t start = BW_SIZE(bw);
    int r = 1;
    while (budget > 0) {
        r = p_step(m);
        if (r <= 0) {
            break;
        }
        if (BW_SIZE(bw) - start >= (uint64_t)budget) {
            break;
        }
    }
#undef BW_SIZE
    p_leave(m);
    bw->busy = 0;
    Py_DECREF(w);
    if (r < 0) {
        return NULL;
    }
    return PyBool_FromLong(m->finished);
}

PyDoc_STRVAR(pipe_rows_doc,
"rows(limit, /) -> list\n\n"
"At least `limit` items (or the rest of the input) as the reference produces them: every\n"
"row (PIPE_ROWS, exactly `limit`), kept rows (PIPE_RETAIN) or visible (key, value) pairs\n"
"(PIPE_RESOLVE), the last two ending at a key boundary. An empty list: the input is\n"
"exhausted.");

static PyObject *pipe_rows(PipeObject *m, PyObject *arg)
{
    Py_ssize_t limit = PyLong_AsSsize_t(arg);
    if (limit == -1 && PyErr_Occurred()) {
        return NULL;
    }
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        return NULL;
    }
    if (p_enter(m, SINK_ROWS) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    m->out_list = out;
    int r = 1;
    while (PyList_GET_SIZE(out) < (limit > 0 ? limit : 1)) {
        m->run = (limit > 0 ? limit : 1) - PyList_GET_SIZE(out);
        r = p_step(m);
        if (r <= 0) {
            break;
        }
    }
    m->run = 0;
    p_leave(m);
    if (r < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

PyDoc_STRVAR(pipe_range_stats_doc,
"range_stats() -> (keys, nbytes, digest)\n\n"
"MODE_RESOLVE: the rest of the visible pairs summed exactly as range_stats() sums them.");

static PyObject *pipe_range_stats(PipeObject *m, PyObject *unused)
{
    (void)unused;
    if (m->mode != PIPE_RESOLVE) {
        PyErr_SetString(PyExc_ValueError, "range_stats() needs MODE_RESOLVE");
        return NULL;
    }
    if (p_enter(m, SINK_STATS) < 0) {
        return NULL;
    }
    memset(&m->acc, 0, sizeof m->acc);
    int r;
    while ((r = p_step(m)) > 0) {
    }
    p_leave(m);
    if (r < 0) {
        return NULL;
    }
    return acc_result(&m->acc);
}

static void arrow_reset(ArrowOut *a)
{
    a->koff.len = a->kdata.len = a->voff.len = a->vdata.len = 0;
    a->seq.len = a->exp_valid.len = a->exp.len = a->cre_valid.len = a->cre.len = 0;
    a->n = a->exp_nulls = a->cre_nulls = 0;
}

static void arrow_free(ArrowOut *a)
{
    SlBuf *bufs[] = {&a->koff, &a->kdata, &a->voff, &a->vdata, &a->seq, &a->exp_valid, &a->exp,
                   &a->cre_valid, &a->cre};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        PyMem_Free(bufs[i]->p);
        bufs[i]->p = NULL;
        bufs[i]->len = bufs[i]->cap = 0;
    }
}

static PyObject *buf_bytes(const SlBuf *b)
{
    return PyBytes_FromStringAndSize(b->len ? (const char *)b->p : NULL, (Py_ssize_t)b->len);
}

PyDoc_STRVAR(pipe_arrow_doc,
"arrow(max_rows, max_bytes, seq, expire_ts, create_ts, /) -> tuple | None\n\n"
"MODE_RESOLVE: the next visible rows (at most max_rows, stopping once keys + values reach\n"
"max_bytes) as Arrow buffers: (n, key_offsets, key_data, value_offsets, value_data,\n"
"seq, expire_valid, expire_nulls, expire, create_valid, create_nulls, create); offsets\n"
"are int32 (n + 1 of them), seq/expire/create int64 (None when not asked for), *_valid\n"
"validity bitmaps. None: the input is exhausted.");

static PyObject *pipe_arrow(PipeObject *m, PyObject *args)
{
    Py_ssize_t max_rows, max_bytes;
    int want_seq, want_exp, want_cre;
    if (!PyArg_ParseTuple(args, "nnppp:arrow", &max_rows, &max_bytes, &want_seq, &want_exp,
                          &want_cre)) {
        return NULL;
    }
    if (m->mode != PIPE_RESOLVE) {
        PyErr_SetString(PyExc_ValueError, "arrow() needs MODE_RESOLVE");
        return NULL;
    }
    if (p_enter(m, SINK_ARROW) < 0) {
        return NULL;
    }
    ArrowOut *a = &m->arrow;
    arrow_reset(a);
    a->want_seq = want_seq;
    a->want_exp = want_exp;
    a->want_cre = want_cre;
    int32_t zero = 0;
    int r = 1;
    if (sl_buf_put(&a->koff, &zero, 4) < 0 || sl_buf_put(&a->voff, &zero, 4) < 0) {
        r = -1;
    }
    while (r > 0 && a->n < (max_rows > 0 ? max_rows : 1) &&
           (Py_ssize_t)(a->kdata.len + a->vdata.len) < (max_bytes > 0 ? max_bytes : 1)) {
        r = p_step(m);
    }
    p_leave(m);
    if (r < 0) {
        arrow_reset(a);
        return NULL;
    }
    if (a->n == 0) {
        arrow_reset(a);
        Py_RETURN_NONE;
    }
    PyObject *out = Py_BuildValue(
        "(nNNNNNNnNNnN)", a->n, buf_bytes(&a->koff), buf_bytes(&a->kdata), buf_bytes(&a->voff),
        buf_bytes(&a->vdata),
        want_seq ? buf_bytes(&a->seq) : (Py_INCREF(Py_None), Py_None),
        want_exp ? buf_bytes(&a->exp_valid) : (Py_INCREF(Py_None), Py_None), a->exp_nulls,
        want_exp ? buf_bytes(&a->exp) : (Py_INCREF(Py_None), Py_None),
        want_cre ? buf_bytes(&a->cre_valid) : (Py_INCREF(Py_None), Py_None), a->cre_nulls,
        want_cre ? buf_bytes(&a->cre) : (Py_INCREF(Py_None), Py_None));
    arrow_reset(a);
    return out;
}

static void pipe_release(PipeObject *m)
{
    p_vers_clear(m);
    if (m->cursors != NULL) {
        for (int i = 0; i < m->ncur; i++) {
            Py_CLEAR(m->cursors[i].iter);
            Py_CLEAR(m->cursors[i].block);
        }
    }
    m->nheap = 0;
    m->finished = 1;
}

static void pipe_dealloc(PipeObject *m)
{
    PyObject_GC_UnTrack(m);
    pipe_release(m);
    PyMem_Free(m->cursors);
    PyMem_Free(m->heap);
    PyMem_Free(m->vers);
    PyMem_Free(m->outv);
    arrow_free(&m->arrow);
    Py_CLEAR(m->fold);
    Py_TYPE(m)->tp_free((PyObject *)m);
}

static int pipe_traverse(PipeObject *m, visitproc visit, void *arg)
{
    Py_VISIT(m->fold);
    if (m->cursors != NULL) {
        for (int i = 0; i < m->ncur; i++) {
            Py_VISIT(m->cursors[i].iter);
            Py_VISIT(m->cursors[i].block);
        }
    }
    for (Py_ssize_t i = 0; i < m->nvers; i++) {
        Py_VISIT(m->vers[i].owner);
    }
    return 0;
}

static int pipe_clear(PipeObject *m)
{
    if (m->busy) {
        return 0; /* a running step holds borrowed pointers into the cursors */
    }
    pipe_release(m);
    Py_CLEAR(m->fold);
    return 0;
}

static PyObject *pipe_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"sources", "mode", "fold", "min_seq", "bottom", "clock_tick", NULL};
    PyObject *sources, *fold = Py_None, *min_seq_obj = NULL;
    int mode, bottom = 0;
    long long tick = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "Oi|$OOpL:Pipe", kwlist, &sources, &mode, &fold,
                                     &min_seq_obj, &bottom, &tick)) {
        return NULL;
    }
    if (mode != PIPE_ROWS && mode != PIPE_RESOLVE && mode != PIPE_RETAIN) {
        PyErr_Format(PyExc_ValueError, "unknown pipe mode %d", mode);
        return NULL;
    }
    if (fold != Py_None && !PyCallable_Check(fold)) {
        PyErr_SetString(PyExc_TypeError, "fold must be callable or None");
        return NULL;
    }
    uint64_t min_seq = 0;
    if (min_seq_obj != NULL && min_seq_obj != Py_None) {
        min_seq = PyLong_Check(min_seq_obj) ? PyLong_AsUnsignedLongLong(min_seq_obj)
                                            : (uint64_t)-1;
        if (min_seq == (uint64_t)-1 && (!PyLong_Check(min_seq_obj) || PyErr_Occurred())) {
            PyErr_Clear();
            PyErr_SetString(PyExc_ValueError, "min_seq must be an integer in [0, 2^64)");
            return NULL;
        }
    }
    PyObject *seq = PySequence_Fast(sources, "sources must be a sequence of iterables");
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > INT_MAX / 2) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "too many sources");
        return NULL;
    }
    PipeObject *m = (PipeObject *)type->tp_alloc(type, 0);
    if (m == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    m->mode = mode;
    m->min_seq = min_seq;
    m->bottom = bottom;
    m->tick = tick;
    if (fold != Py_None) {
        Py_INCREF(fold);
        m->fold = fold;
    }
    m->cursors = PyMem_Calloc((size_t)(n ? n : 1), sizeof(PCursor));
    m->heap = PyMem_Calloc((size_t)(n ? n : 1), sizeof(PCursor *));
    if (m->cursors == NULL || m->heap == NULL) {
        Py_DECREF(seq);
        Py_DECREF(m);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PyObject_GetIter(PySequence_Fast_GET_ITEM(seq, i));
        if (it == NULL) {
            Py_DECREF(seq);
            Py_DECREF(m);
            return NULL;
        }
        m->cursors[i].iter = it;
        m->cursors[i].src = (int)i;
        m->ncur = (int)i + 1;
    }
    Py_DECREF(seq);
    return (PyObject *)m;
}

static PyObject *pipe_get_stats(PipeObject *m, void *c)
{
    (void)c;
    return Py_BuildValue("(LLLLLL)", m->rows_in, m->rows_out, m->versions_dropped,
                         m->tombstones_dropped, m->expired_to_tombstone,
                         m->expired_merges_dropped);
}

static PyObject *pipe_get_finished(PipeObject *m, void *c)
{
    (void)c;
    return PyBool_FromLong(m->finished);
}

static PyGetSetDef pipe_getset[] = {
    {"stats", (getter)pipe_get_stats, NULL,
     "(rows_in, rows_out, versions_dropped, tombstones_dropped, expired_to_tombstone, "
     "expired_merges_dropped) so far; a fold's own work is not in it",
     NULL},
    {"finished", (getter)pipe_get_finished, NULL, "the input is exhausted (or failed)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef pipe_methods[] = {
    {"fill", (PyCFunction)pipe_fill, METH_VARARGS, pipe_fill_doc},
    {"rows", (PyCFunction)pipe_rows, METH_O, pipe_rows_doc},
    {"range_stats", (PyCFunction)pipe_range_stats, METH_NOARGS, pipe_range_stats_doc},
    {"arrow", (PyCFunction)pipe_arrow, METH_VARARGS, pipe_arrow_doc},
    {NULL, NULL, 0, NULL},
};

PyDoc_STRVAR(pipe_doc,
"Pipe(sources, mode, *, fold=None, min_seq=0, bottom=False, clock_tick=0)\n\n"
"The k-way merge of `sources` (iterables yielding CheckedBlocks or lists of rows, newest\n"
"first): every version (PIPE_ROWS), 0.17's compaction retention (PIPE_RETAIN) or the read\n"
"path's resolution (PIPE_RESOLVE); drained by fill(), rows(), range_stats() or arrow(); a\n"
"misordered or malformed row raises PipeInputError, a row the writer of fill() refuses\n"
"PipeWriterError (both ValueErrors). `fold`: retain fold(versions) -> rows for a key\n"
"with merge operands (without one they are kept unfolded), resolve fold(key, versions) ->\n"
"bytes | None for a key whose newest version is an operand.");

static PyTypeObject PipeType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "slatelib._speedups.Pipe",
    .tp_basicsize = sizeof(PipeObject),
    .tp_dealloc = (destructor)pipe_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = pipe_doc,
    .tp_traverse = (traverseproc)pipe_traverse,
    .tp_clear = (inquiry)pipe_clear,
    .tp_methods = pipe_methods,
    .tp_getset = pipe_getset,
    .tp_new = pipe_new,
};

static PyMethodDef pipe_functions[] = {
    {"check_blocks", py_check_blocks, METH_VARARGS, check_blocks_doc},
    {"pipe_crc32", py_pipe_crc32, METH_VARARGS, pipe_crc32_doc},
    {NULL, NULL, 0, NULL},
};

/* Called from the module init (after sl_crc32_init): functions, types, the error classes,
 * constants. 0 or -1. */
int pipe_init_module(PyObject *m)
{
    if (PyModule_AddFunctions(m, pipe_functions) < 0) {
        return -1;
    }
    if (PyType_Ready(&CheckedBlocksType) < 0 || PyType_Ready(&PipeType) < 0) {
        return -1;
    }
    PipeInputError = PyErr_NewException("slatelib._speedups.PipeInputError", PyExc_ValueError,
                                        NULL);
    PipeWriterError = PyErr_NewException("slatelib._speedups.PipeWriterError", PyExc_ValueError,
                                         NULL);
    if (PipeInputError == NULL || PyModule_AddObjectRef(m, "PipeInputError", PipeInputError) < 0 ||
        PipeWriterError == NULL || PyModule_AddObjectRef(m, "PipeWriterError", PipeWriterError) < 0 ||
        PyModule_AddObjectRef(m, "CheckedBlocks", (PyObject *)&CheckedBlocksType) < 0 ||
        PyModule_AddObjectRef(m, "Pipe", (PyObject *)&PipeType) < 0 ||
        PyModule_AddIntConstant(m, "PIPE_ROWS", PIPE_ROWS) < 0 ||
        PyModule_AddIntConstant(m, "PIPE_RESOLVE", PIPE_RESOLVE) < 0 ||
        PyModule_AddIntConstant(m, "PIPE_RETAIN", PIPE_RETAIN) < 0) {
        return -1;
    }
    return 0;
}
