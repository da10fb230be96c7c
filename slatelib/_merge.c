/*
 * slatelib._merge: a streaming k-way merge of sorted row sources, with 0.17's compaction
 * retention or the read path's key resolution applied as the rows go by.
 *
 * The pure-Python code is the reference, and this module returns exactly what it returns:
 *   - mode MODE_ROWS: heapq.merge(*sources, key=(key, -seq)) (slatelib.core.merge.merge_sources);
 *   - mode MODE_RESOLVE: slatelib.core.merge.resolve_rows over that merge;
 *   - mode MODE_RETAIN: slatelib.core.window_merge.merge_windows followed by
 *     slatelib.core.retention.retain_window on every window.
 * tests/unit/format/test_native_merge.py checks this differentially, on random inputs, and
 * the unit merge matrix (tests/unit/core/test_retention.py) runs against both.
 *
 * A source is an iterator of *blocks*: lists of rows (key, seq, kind, value, expire_ts,
 * create_ts) in storage order (key ascending, seq descending), newest source first. A row
 * that sorts before its predecessor in the same source raises MergeInputError, a ValueError
 * (the Python merge would silently misorder). Versions of one key are ordered by seq
 * descending, and equal seqs by source (the newest source first), as the reference does.
 *
 * Merge operands need the user's merge operator, which is Python: a key whose rows need it
 * is handed to `fold`, a Python callable, with the key's versions:
 *   - resolve: fold(key, versions) -> bytes or None, for a key whose newest version is a
 *     merge operand (slatelib.core.merge.resolve_versions);
 *   - retain: fold(versions) -> list of rows, for a key with at least one merge operand
 *     (slatelib.core.retention.retain_versions, which also counts its own stats). Without
 *     fold, operands are kept unfolded, as the reference does without an operator.
 *
 * Memory: one block per source (plus what the sources prefetch) and one output batch.
 * C99, no third-party libraries.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <limits.h>
#include <stdint.h>
#include <string.h>

#define KIND_VALUE 0
#define KIND_TOMBSTONE 1
#define KIND_MERGE 2

#define MODE_ROWS 0
#define MODE_RESOLVE 1
#define MODE_RETAIN 2

/* Malformed or misordered input rows (a ValueError subclass; set at module init). */
static PyObject *MergeInputError;

/* ------------------------------------------------------------------ cursors */

typedef struct {
    PyObject *iter;   /* iterator of lists of rows (owned); NULL once exhausted */
    PyObject *block;  /* current list (owned), or NULL */
    Py_ssize_t pos;
    Py_ssize_t len;
    PyObject *row;    /* current row (borrowed from block) */
    const char *key;
    Py_ssize_t klen;
    uint64_t seq;
    int kind;
    int src;
    Py_ssize_t nrow;  /* rows read from this source so far (for error messages) */
} Cursor;

static int load_row(Cursor *c)
{
    PyObject *row = PyList_GET_ITEM(c->block, c->pos);
    if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != 6) {
        PyErr_Format(MergeInputError, "source %d, row %zd: not a 6-tuple row", c->src,
                     c->nrow);
        return -1;
    }
    PyObject *key = PyTuple_GET_ITEM(row, 0);
    if (!PyBytes_Check(key)) {
        PyErr_Format(MergeInputError, "source %d, row %zd: key is not bytes", c->src, c->nrow);
        return -1;
    }
    PyObject *seq = PyTuple_GET_ITEM(row, 1);
    uint64_t s = PyLong_Check(seq) ? PyLong_AsUnsignedLongLong(seq) : (uint64_t)-1;
    if (s == (uint64_t)-1 && (!PyLong_Check(seq) || PyErr_Occurred())) {
        PyErr_Clear();
        PyErr_Format(MergeInputError, "source %d, row %zd: seq is not an integer in [0, 2^64)",
                     c->src, c->nrow);
        return -1;
    }
    PyObject *kind = PyTuple_GET_ITEM(row, 2);
    long k = PyLong_Check(kind) ? PyLong_AsLong(kind) : -1;
    if (k < KIND_VALUE || k > KIND_MERGE) {
        PyErr_Clear();
        PyErr_Format(MergeInputError, "source %d, row %zd: unknown row kind", c->src, c->nrow);
        return -1;
    }
    c->row = row;
    c->key = PyBytes_AS_STRING(key);
    c->klen = PyBytes_GET_SIZE(key);
    c->seq = s;
    c->kind = (int)k;
    return 0;
}

static inline int key_cmp(const char *a, Py_ssize_t alen, const char *b, Py_ssize_t blen)
{
    Py_ssize_t n = alen < blen ? alen : blen;
    int r = n ? memcmp(a, b, (size_t)n) : 0;
    if (r) {
        return r;
    }
    return alen < blen ? -1 : (alen > blen ? 1 : 0);
}

/* Next non-empty block into the cursor. 1: loaded, 0: exhausted, -1: error. */
static int next_block(Cursor *c)
{
    Py_CLEAR(c->block);
    c->row = NULL;
    while (c->iter != NULL) {
        PyObject *b = PyIter_Next(c->iter);
        if (b == NULL) {
            if (PyErr_Occurred()) {
                return -1;
            }
            Py_CLEAR(c->iter);
            return 0;
        }
        if (!PyList_Check(b)) {
            Py_DECREF(b);
            PyErr_Format(PyExc_TypeError, "source %d yielded a block that is not a list",
                         c->src);
            return -1;
        }
        if (PyList_GET_SIZE(b) == 0) {
            Py_DECREF(b);
            continue;
        }
        c->block = b;
        c->pos = 0;
        c->len = PyList_GET_SIZE(b);
        if (load_row(c) < 0) {
            return -1;
        }
        c->nrow++;
        return 1;
    }
    return 0;
}

/* Move to the cursor's next row, checking its order. 1: a row, 0: exhausted, -1: error. */
static int advance(Cursor *c)
{
    PyObject *prev = c->row;
    const char *pkey = c->key;
    Py_ssize_t pklen = c->klen;
    uint64_t pseq = c->seq;
    int r;
    Py_INCREF(prev); /* the block holding it may go */
    if (++c->pos < c->len) {
        r = load_row(c) < 0 ? -1 : 1;
        if (r == 1) {
            c->nrow++;
        }
    }
    else {
        r = next_block(c);
    }
    if (r == 1) {
        int cmp = key_cmp(pkey, pklen, c->key, c->klen);
        if (cmp > 0 || (cmp == 0 && c->seq > pseq)) {
            PyErr_Format(MergeInputError,
                         "source %d, row %zd: out of order (rows must be key ascending, "
                         "seq descending)", c->src, c->nrow - 1);
            r = -1;
        }
    }
    Py_DECREF(prev);
    return r;
}

/* a sorts before b: key ascending, seq descending, newest source first */
static inline int cur_less(const Cursor *a, const Cursor *b)
{
    int cmp = key_cmp(a->key, a->klen, b->key, b->klen);
    if (cmp) {
        return cmp < 0;
    }
    if (a->seq != b->seq) {
        return a->seq > b->seq;
    }
    return a->src < b->src;
}

/* ------------------------------------------------------------------ the merger */

typedef struct {
    PyObject_HEAD
    Cursor *cursors;
    Cursor **heap;
    int ncur;
    int nheap;
    int started;
    int finished;
    int mode;
    PyObject *fold;      /* or NULL */
    Py_ssize_t batch;
    uint64_t min_seq;
    int bottom;
    long long tick;
    /* versions of the current key (owned references) */
    PyObject **vers;
    Py_ssize_t nvers;
    Py_ssize_t cap;
    /* counters */
    long long rows_in, rows_out, versions_dropped, tombstones_dropped, expired_to_tombstone,
        expired_merges_dropped;
} MergerObject;

static PyTypeObject MergerType;

static void sift_down(MergerObject *m, int i)
{
    Cursor **h = m->heap;
    int n = m->nheap;
    Cursor *x = h[i];
    for (;;) {
        int l = 2 * i + 1;
        if (l >= n) {
            break;
        }
        int r = l + 1;
        int s = (r < n && cur_less(h[r], h[l])) ? r : l;
        if (!cur_less(h[s], x)) {
            break;
        }
        h[i] = h[s];
        i = s;
    }
    h[i] = x;
}

/* Advance the heap's top cursor and restore the heap. 0 or -1. */
static int pop_advance(MergerObject *m)
{
    Cursor *c = m->heap[0];
    int r = advance(c);
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
        sift_down(m, 0);
    }
    return 0;
}

static int start(MergerObject *m)
{
    m->started = 1;
    for (int i = 0; i < m->ncur; i++) {
        int r = next_block(&m->cursors[i]);
        if (r < 0) {
            return -1;
        }
        if (r == 1) {
            m->heap[m->nheap++] = &m->cursors[i];
        }
    }
    for (int i = m->nheap / 2 - 1; i >= 0; i--) {
        sift_down(m, i);
    }
    return 0;
}

static void vers_clear(MergerObject *m)
{
    for (Py_ssize_t i = 0; i < m->nvers; i++) {
        Py_DECREF(m->vers[i]);
    }
    m->nvers = 0;
}

static int vers_push(MergerObject *m, PyObject *row)
{
    if (m->nvers == m->cap) {
        Py_ssize_t cap = m->cap ? 2 * m->cap : 16;
        PyObject **v = PyMem_Realloc(m->vers, (size_t)cap * sizeof(PyObject *));
        if (v == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        m->vers = v;
        m->cap = cap;
    }
    Py_INCREF(row);
    m->vers[m->nvers++] = row;
    return 0;
}

static PyObject *vers_list(MergerObject *m)
{
    PyObject *list = PyList_New(m->nvers);
    if (list == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < m->nvers; i++) {
        Py_INCREF(m->vers[i]);
        PyList_SET_ITEM(list, i, m->vers[i]);
    }
    return list;
}

/* Gather every version of the top key into m->vers (the key object stays alive through
 * the first version's reference). */
static int gather(MergerObject *m)
{
    Cursor *top = m->heap[0];
    vers_clear(m);
    if (vers_push(m, top->row) < 0) {
        return -1;
    }
    PyObject *keyobj = PyTuple_GET_ITEM(m->vers[0], 0);
    const char *key = PyBytes_AS_STRING(keyobj);
    Py_ssize_t klen = PyBytes_GET_SIZE(keyobj);
    if (pop_advance(m) < 0) {
        return -1;
    }
    while (m->nheap) {
        top = m->heap[0];
        if (top->klen != klen || memcmp(top->key, key, (size_t)klen) != 0) {
            break;
        }
        if (vers_push(m, top->row) < 0 || pop_advance(m) < 0) {
            return -1;
        }
    }
    return 0;
}

static int kind_of(PyObject *row)
{
    return (int)PyLong_AsLong(PyTuple_GET_ITEM(row, 2));
}

static uint64_t seq_of(PyObject *row)
{
    return PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(row, 1));
}

/* expire_ts <= tick; -1 on error */
static int expired(PyObject *expire, long long tick)
{
    int overflow = 0;
    long long e = PyLong_AsLongLongAndOverflow(expire, &overflow);
    if (e == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_SetString(MergeInputError, "row expire_ts is not an integer");
        return -1;
    }
    if (overflow) {
        return overflow < 0;
    }
    return e <= tick;
}

/* One key of MODE_RETAIN: versions in m->vers, newest first. */
static int retain_key(MergerObject *m, PyObject *out)
{
    /* one version per seq: the newest source wins a tie */
    Py_ssize_t n = 1;
    int has_merge = kind_of(m->vers[0]) == KIND_MERGE;
    if (m->nvers > 1) {
        uint64_t last = seq_of(m->vers[0]);
        for (Py_ssize_t i = 1; i < m->nvers; i++) {
            uint64_t s = seq_of(m->vers[i]);
            if (s == last) {
                Py_DECREF(m->vers[i]);
                m->versions_dropped++;
                continue;
            }
            last = s;
            has_merge |= kind_of(m->vers[i]) == KIND_MERGE;
            m->vers[n++] = m->vers[i];
        }
        m->nvers = n;
    }
    if (has_merge && m->fold != NULL) {
        PyObject *versions = vers_list(m);
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
        for (Py_ssize_t i = 0; i < k; i++) {
            if (PyList_Append(out, PyList_GET_ITEM(kept, i)) < 0) {
                Py_DECREF(kept);
                return -1;
            }
        }
        m->rows_out += k;
        Py_DECREF(kept);
        return 0;
    }
    Py_ssize_t start = PyList_GET_SIZE(out);
    Py_ssize_t consumed = 0;
    for (Py_ssize_t i = 0; i < m->nvers; i++) {
        PyObject *row = m->vers[i];
        consumed++;
        int kind = kind_of(row);
        uint64_t seq = seq_of(row);
        PyObject *expire = PyTuple_GET_ITEM(row, 4);
        int appended = 0;
        if (expire != Py_None) {
            int ex = expired(expire, m->tick);
            if (ex < 0) {
                return -1;
            }
            if (ex) {
                if (kind == KIND_MERGE) {
                    m->expired_merges_dropped++;
                    continue;
                }
                PyObject *tomb = PyTuple_New(6);
                if (tomb == NULL) {
                    return -1;
                }
                PyObject *items[6] = {
                    PyTuple_GET_ITEM(row, 0), PyTuple_GET_ITEM(row, 1), NULL,
                    NULL, Py_None, PyTuple_GET_ITEM(row, 5),
                };
                items[2] = PyLong_FromLong(KIND_TOMBSTONE);
                items[3] = PyBytes_FromStringAndSize(NULL, 0);
                if (items[2] == NULL || items[3] == NULL) {
                    Py_XDECREF(items[2]);
                    Py_XDECREF(items[3]);
                    Py_DECREF(tomb);
                    return -1;
                }
                for (int j = 0; j < 6; j++) {
                    if (j != 2 && j != 3) {
                        Py_INCREF(items[j]);
                    }
                    PyTuple_SET_ITEM(tomb, j, items[j]);
                }
                m->expired_to_tombstone++;
                kind = KIND_TOMBSTONE;
                int rc = PyList_Append(out, tomb);
                Py_DECREF(tomb);
                if (rc < 0) {
                    return -1;
                }
                appended = 1;
            }
        }
        if (!appended && PyList_Append(out, row) < 0) {
            return -1;
        }
        if (!(seq > m->min_seq || kind == KIND_MERGE)) {
            break;
        }
    }
    m->versions_dropped += m->nvers - consumed;
    if (m->bottom) {
        Py_ssize_t end = PyList_GET_SIZE(out);
        Py_ssize_t keep = end;
        while (keep > start && kind_of(PyList_GET_ITEM(out, keep - 1)) == KIND_TOMBSTONE) {
            keep--;
        }
        if (keep < end) {
            m->tombstones_dropped += end - keep;
            if (PyList_SetSlice(out, keep, end, NULL) < 0) {
                return -1;
            }
        }
    }
    m->rows_out += PyList_GET_SIZE(out) - start;
    return 0;
}

/* One key of MODE_RESOLVE. */
static int resolve_key(MergerObject *m, PyObject *out)
{
    Cursor *top = m->heap[0];
    int kind = top->kind;
    if (kind == KIND_MERGE) {
        if (gather(m) < 0) {
            return -1;
        }
        m->rows_in += m->nvers;
        PyObject *key = PyTuple_GET_ITEM(m->vers[0], 0);
        PyObject *versions = vers_list(m);
        if (versions == NULL) {
            return -1;
        }
        PyObject *value = m->fold != NULL
            ? PyObject_CallFunctionObjArgs(m->fold, key, versions, NULL)
            : (PyErr_SetString(PyExc_TypeError, "merge operands need a fold"), NULL);
        Py_DECREF(versions);
        if (value == NULL) {
            return -1;
        }
        int rc = 0;
        if (value != Py_None) {
            PyObject *pair = PyTuple_Pack(2, key, value);
            rc = pair == NULL ? -1 : PyList_Append(out, pair);
            Py_XDECREF(pair);
            if (rc == 0) {
                m->rows_out++;
            }
        }
        Py_DECREF(value);
        return rc;
    }
    /* value or tombstone: the newest version decides, the rest is skipped */
    PyObject *row = top->row;
    Py_INCREF(row);
    PyObject *keyobj = PyTuple_GET_ITEM(row, 0);
    const char *key = PyBytes_AS_STRING(keyobj);
    Py_ssize_t klen = PyBytes_GET_SIZE(keyobj);
    int rc = 0;
    if (kind == KIND_VALUE) {
        PyObject *pair = PyTuple_Pack(2, keyobj, PyTuple_GET_ITEM(row, 3));
        rc = pair == NULL ? -1 : PyList_Append(out, pair);
        Py_XDECREF(pair);
        m->rows_out++;
    }
    if (rc == 0) {
        rc = pop_advance(m);
        m->rows_in++;
    }
    while (rc == 0 && m->nheap) {
        top = m->heap[0];
        if (top->klen != klen || memcmp(top->key, key, (size_t)klen) != 0) {
            break;
        }
        rc = pop_advance(m);
        m->rows_in++;
    }
    Py_DECREF(row);
    return rc;
}

static PyObject *merger_next(MergerObject *m)
{
    if (m->finished) {
        return NULL;
    }
    if (!m->started && start(m) < 0) {
        m->finished = 1;
        return NULL;
    }
    if (m->nheap == 0) {
        m->finished = 1;
        return NULL;
    }
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        return NULL;
    }
    int rc = 0;
    while (rc == 0 && m->nheap && PyList_GET_SIZE(out) < m->batch) {
        switch (m->mode) {
        case MODE_ROWS:
            rc = PyList_Append(out, m->heap[0]->row);
            if (rc == 0) {
                m->rows_in++;
                m->rows_out++;
                rc = pop_advance(m);
            }
            break;
        case MODE_RESOLVE:
            rc = resolve_key(m, out);
            break;
        default:
            rc = gather(m);
            if (rc == 0) {
                m->rows_in += m->nvers;
                rc = retain_key(m, out);
            }
            vers_clear(m);
            break;
        }
    }
    vers_clear(m);
    if (rc < 0) {
        m->finished = 1;
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

static void merger_release(MergerObject *m)
{
    vers_clear(m);
    if (m->cursors != NULL) {
        for (int i = 0; i < m->ncur; i++) {
            Py_CLEAR(m->cursors[i].iter);
            Py_CLEAR(m->cursors[i].block);
        }
    }
}

static void merger_dealloc(MergerObject *m)
{
    PyObject_GC_UnTrack(m);
    merger_release(m);
    PyMem_Free(m->cursors);
    PyMem_Free(m->heap);
    PyMem_Free(m->vers);
    Py_CLEAR(m->fold);
    Py_TYPE(m)->tp_free((PyObject *)m);
}

static int merger_traverse(MergerObject *m, visitproc visit, void *arg)
{
    Py_VISIT(m->fold);
    if (m->cursors != NULL) {
        for (int i = 0; i < m->ncur; i++) {
            Py_VISIT(m->cursors[i].iter);
            Py_VISIT(m->cursors[i].block);
        }
    }
    for (Py_ssize_t i = 0; i < m->nvers; i++) {
        Py_VISIT(m->vers[i]);
    }
    return 0;
}

static int merger_clear(MergerObject *m)
{
    merger_release(m);
    m->nheap = 0;
    m->finished = 1;
    Py_CLEAR(m->fold);
    return 0;
}

static PyObject *merger_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"sources", "mode", "fold", "min_seq", "bottom", "clock_tick",
                             "batch", NULL};
    PyObject *sources, *fold = Py_None, *min_seq_obj = NULL;
    int mode, bottom = 0;
    long long tick = 0;
    Py_ssize_t batch = 4096;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "Oi|$OOpLn", kwlist, &sources, &mode, &fold,
                                     &min_seq_obj, &bottom, &tick, &batch)) {
        return NULL;
    }
    if (mode < MODE_ROWS || mode > MODE_RETAIN) {
        PyErr_Format(PyExc_ValueError, "unknown merge mode %d", mode);
        return NULL;
    }
    if (batch < 1) {
        PyErr_SetString(PyExc_ValueError, "batch must be positive");
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
    MergerObject *m = (MergerObject *)type->tp_alloc(type, 0);
    if (m == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    m->mode = mode;
    m->batch = batch;
    m->min_seq = min_seq;
    m->bottom = bottom;
    m->tick = tick;
    if (fold != Py_None) {
        Py_INCREF(fold);
        m->fold = fold;
    }
    m->cursors = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Cursor));
    m->heap = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Cursor *));
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

static PyObject *merger_get_stats(MergerObject *m, void *c)
{
    return Py_BuildValue("(LLLLLL)", m->rows_in, m->rows_out, m->versions_dropped,
                         m->tombstones_dropped, m->expired_to_tombstone,
                         m->expired_merges_dropped);
}

static PyGetSetDef merger_getset[] = {
    {"stats", (getter)merger_get_stats, NULL,
     "(rows_in, rows_out, versions_dropped, tombstones_dropped, expired_to_tombstone, "
     "expired_merges_dropped) so far; a fold's own work is not in it", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(merger_doc,
"Merger(sources, mode, *, fold=None, min_seq=0, bottom=False, clock_tick=0, batch=4096)\n\n"
"Iterator of lists: the k-way merge of `sources` (iterables of row lists, newest first).\n"
"mode 0: merged rows; 1: visible (key, value) pairs; 2: rows kept by 0.17's compaction\n"
"retention (min_seq, bottom, clock_tick). Each list holds about `batch` items and, in\n"
"modes 1 and 2, ends at a key boundary. See the module docstring for `fold`.");

static PyTypeObject MergerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "slatelib._merge.Merger",
    .tp_basicsize = sizeof(MergerObject),
    .tp_dealloc = (destructor)merger_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = merger_doc,
    .tp_traverse = (traverseproc)merger_traverse,
    .tp_clear = (inquiry)merger_clear,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)merger_next,
    .tp_getset = merger_getset,
    .tp_new = merger_new,
};

static struct PyModuleDef merge_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "slatelib._merge",
    .m_doc = "Native k-way merge with retention / resolution; slatelib.format.native loads it.",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__merge(void)
{
    if (PyType_Ready(&MergerType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&merge_module);
    if (m == NULL) {
        return NULL;
    }
    MergeInputError = PyErr_NewException("slatelib._merge.MergeInputError", PyExc_ValueError,
                                         NULL);
    if (MergeInputError == NULL || PyModule_AddObjectRef(m, "MergeInputError",
                                                         MergeInputError) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&MergerType);
    if (PyModule_AddObject(m, "Merger", (PyObject *)&MergerType) < 0
        || PyModule_AddIntConstant(m, "MODE_ROWS", MODE_ROWS) < 0
        || PyModule_AddIntConstant(m, "MODE_RESOLVE", MODE_RESOLVE) < 0
        || PyModule_AddIntConstant(m, "MODE_RETAIN", MODE_RETAIN) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
