/*
 * slatelib._manifest: native manifest codec (format §5, §5.7), see
 * docs/rfcs/0010-manifest-codec.md.
 *
 * The pure-Python code in slatelib/format/{manifest_codec,compactions_codec,manifest_parts,
 * sst_info,shared_tables,flatbuf}.py is the reference. This module:
 *
 *   - encode_v2(manifest, view_problem) -> bytes: the whole version-2 manifest file, byte for
 *     byte what manifest_codec.encode_manifest writes. It builds with csrc/fbbuild.h (the
 *     port of the `flatbuffers` Python Builder the codec uses: back-to-front writing, Prep
 *     alignment, vtable deduplication keyed by vtable content, Finish with minalign; shared
 *     with _sstwrite.c) in the codec's canonical creation order.
 *   - read_handles / read_views / read_runs / read_ulids: the big vectors of a manifest
 *     (ssts, l0, compacted, and the sst_ids of an external database), decoded into the core dataclasses with the bounds checks of
 *     slatelib.format.flatbuf (every check that makes the reference reject a buffer makes
 *     this code reject it too).
 *   - encode_compactions / read_compacted: the compactions file (format §6), with the same
 *     builder and SST entry code (see "compactions file" below).
 *
 * Error convention: anything invalid (a malformed buffer, a value out of range, an object of
 * an unexpected type) raises ValueError, TypeError or OverflowError; the Python wrapper
 * (slatelib/format/manifest_native.py) then reruns the reference implementation, which
 * raises the documented error (CorruptObjectError with the path, InvalidArgumentError).
 *
 * Objects are created without running the dataclasses' __init__: the classes are frozen
 * dataclasses with __slots__, and configure() records the offsets of their slots (it checks
 * that each field is a plain object slot), so a field is set as CPython's own member
 * descriptor would set it.
 *
 * Tests: tests/unit/format/test_manifest_native.py and test_compactions_codec_native.py
 * (differential, on generated, official and mangled manifests). Loads and the builder's
 * growth come from csrc/common.h (docs/rfcs/0020-house-second-step.md).
 *
 * C99, no third-party libraries. Single-phase init; the configured classes are kept in
 * static variables (set once by configure()).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <stdint.h>
#include <string.h>

#include "csrc/common.h"
#include "csrc/fbbuild.h"

/* 3.13 added a with_exceptions argument to _PyLong_AsByteArray (1: raise as before). */
#if PY_VERSION_HEX >= 0x030D0000
#define SL_LONG_AS_BYTES(v, buf, n, little, sgn) \
    _PyLong_AsByteArray((v), (buf), (n), (little), (sgn), 1)
#else
#define SL_LONG_AS_BYTES(v, buf, n, little, sgn) \
    _PyLong_AsByteArray((v), (buf), (n), (little), (sgn))
#endif

/* ------------------------------------------------------------------ configured types */

typedef struct {
    PyTypeObject *tp;
    int nfields;
    Py_ssize_t off[12];
} SlotClass;

enum { INFO_FIRST, INFO_LAST, INFO_INDEX_OFF, INFO_INDEX_LEN, INFO_FILTER_OFF, INFO_FILTER_LEN,
       INFO_COMPRESSION, INFO_SST_TYPE, INFO_STATS_OFF, INFO_STATS_LEN, INFO_FILTER_FORMAT,
       INFO_NFIELDS };
static const char *INFO_NAMES[] = {"first_entry", "last_entry", "index_offset", "index_len",
                                   "filter_offset", "filter_len", "compression", "sst_type",
                                   "stats_offset", "stats_len", "filter_format"};
enum { H_ID, H_INFO, H_FV };
static const char *HANDLE_NAMES[] = {"id", "info", "format_version"};
enum { V_ID, V_SST, V_RANGE };
static const char *VIEW_NAMES[] = {"id", "sst_id", "visible_range"};
enum { R_ID, R_VIEWS };
static const char *RUN_NAMES[] = {"id", "views"};

static SlotClass INFO, HANDLE, VIEW, RUN;
static PyObject *COMPRESSION = NULL, *SST_TYPE = NULL, *FILTER_FORMAT = NULL; /* tuples */
static int configured = 0;

static int slot_class(SlotClass *sc, PyObject *cls, const char **names, int n)
{
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "configure: expected a class");
        return -1;
    }
    PyTypeObject *tp = (PyTypeObject *)cls;
    for (int i = 0; i < n; i++) {
        PyObject *d = PyDict_GetItemString(tp->tp_dict, names[i]);
        if (d == NULL || Py_TYPE(d) != &PyMemberDescr_Type) {
            PyErr_Format(PyExc_TypeError, "configure: %s.%s is not a slot", tp->tp_name, names[i]);
            return -1;
        }
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        if (m->type != T_OBJECT_EX || (m->flags & READONLY)) {
            PyErr_Format(PyExc_TypeError, "configure: %s.%s is not an object slot", tp->tp_name,
                         names[i]);
            return -1;
        }
        sc->off[i] = m->offset;
    }
    Py_INCREF(cls);
    Py_XSETREF(sc->tp, tp);
    sc->nfields = n;
    return 0;
}

static PyObject *configure(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *info, *handle, *view, *run, *comp, *sst_type, *ff;
    if (!PyArg_ParseTuple(args, "OOOOO!O!O!:configure", &info, &handle, &view, &run,
                          &PyTuple_Type, &comp, &PyTuple_Type, &sst_type, &PyTuple_Type, &ff))
        return NULL;
    if (slot_class(&INFO, info, INFO_NAMES, INFO_NFIELDS) < 0 ||
        slot_class(&HANDLE, handle, HANDLE_NAMES, 3) < 0 ||
        slot_class(&VIEW, view, VIEW_NAMES, 3) < 0 || slot_class(&RUN, run, RUN_NAMES, 2) < 0)
        return NULL;
    Py_INCREF(comp);
    Py_XSETREF(COMPRESSION, comp);
    Py_INCREF(sst_type);
    Py_XSETREF(SST_TYPE, sst_type);
    Py_INCREF(ff);
    Py_XSETREF(FILTER_FORMAT, ff);
    configured = 1;
    Py_RETURN_NONE;
}

static int check_configured(void)
{
    if (!configured) {
        PyErr_SetString(PyExc_RuntimeError, "slatelib._manifest: configure() was not called");
        return -1;
    }
    return 0;
}

/* A new instance with every slot NULL; fields are set with set_slot (steals). */
static inline PyObject *new_instance(SlotClass *sc)
{
    return sc->tp->tp_alloc(sc->tp, 0);
}

/* A new instance the cyclic GC does not track. Only for SsTableInfo, SstHandle and SstView
 * instances whose fields are bytes, ints, None, enum members and (for a handle) an untracked
 * SsTableInfo: frozen objects that hold no container cannot be part of a reference cycle, so
 * tracking them only makes every collection walk a large manifest again (CPython untracks
 * tuples of atoms for the same reason). Without this, decoding 100k SSTs spends most of its
 * time in young and old collections. */
static inline PyObject *new_atomic_instance(SlotClass *sc)
{
    PyObject *o = sc->tp->tp_alloc(sc->tp, 0);
    if (o != NULL && PyObject_GC_IsTracked(o))
        PyObject_GC_UnTrack(o);
    return o;
}

static inline void set_slot(PyObject *obj, SlotClass *sc, int i, PyObject *value)
{
    PyObject **p = (PyObject **)((char *)obj + sc->off[i]);
    PyObject *old = *p;
    *p = value;
    Py_XDECREF(old);
}

/* A field of obj (new reference): the slot when obj is exactly of the class, else getattr. */
static PyObject *get_field(PyObject *obj, SlotClass *sc, const char **names, int i)
{
    if (Py_TYPE(obj) == sc->tp) {
        PyObject *v = *(PyObject **)((char *)obj + sc->off[i]);
        if (v == NULL) {
            PyErr_Format(PyExc_AttributeError, "%s has no value for %s", sc->tp->tp_name,
                         names[i]);
            return NULL;
        }
        Py_INCREF(v);
        return v;
    }
    return PyObject_GetAttrString(obj, names[i]);
}

/* ===================================================================== decoding */

/* loads: csrc/common.h */

typedef struct {
    const unsigned char *d;
    int64_t start, end;
} Buf;

typedef struct {
    int64_t pos, vt, vt_len, obj_len;
} Tbl;

#define FAIL(msg) do { PyErr_SetString(PyExc_ValueError, msg); return -1; } while (0)

static inline int check(const Buf *b, int64_t pos, int64_t size)
{
    if (pos < b->start || size < 0 || pos + size > b->end)
        FAIL("out of bounds");
    return 0;
}

/* flatbuf.Buffer.table_at */
static int table_at(const Buf *b, int64_t pos, Tbl *t)
{
    if (check(b, pos, 4) < 0)
        return -1;
    int32_t so = (int32_t)load_le32(b->d + pos);
    int64_t vt = pos - (int64_t)so;
    if (check(b, vt, 4) < 0)
        return -1;
    int64_t vt_len = load_le16(b->d + vt), obj_len = load_le16(b->d + vt + 2);
    if (vt_len < 4 || (vt_len & 1))
        FAIL("bad vtable length");
    if (check(b, vt, vt_len) < 0)
        return -1;
    if (obj_len < 4)
        FAIL("bad table size");
    if (check(b, pos, obj_len) < 0)
        return -1;
    t->pos = pos;
    t->vt = vt;
    t->vt_len = vt_len;
    t->obj_len = obj_len;
    return 0;
}

/* flatbuf.Table.field_pos: 0 when absent, -1 on error. */
static inline int64_t field_pos(const Buf *b, const Tbl *t, int slot, int64_t size)
{
    int64_t entry = 4 + 2 * slot;
    if (entry >= t->vt_len)
        return 0;
    int64_t rel = load_le16(b->d + t->vt + entry);
    if (rel == 0)
        return 0;
    if (rel < 4 || rel + size > t->obj_len) {
        PyErr_SetString(PyExc_ValueError, "field outside its table");
        return -1;
    }
    return t->pos + rel;
}

static inline int rd_u64(const Buf *b, const Tbl *t, int slot, uint64_t *out)
{
    int64_t p = field_pos(b, t, slot, 8);
    if (p < 0)
        return -1;
    *out = p ? load_le64(b->d + p) : 0;
    return 0;
}

static inline int rd_i8(const Buf *b, const Tbl *t, int slot, int *out)
{
    int64_t p = field_pos(b, t, slot, 1);
    if (p < 0)
        return -1;
    *out = p ? (int)(signed char)b->d[p] : 0;
    return 0;
}

/* flatbuf.Table._target: 0 when absent. */
static inline int64_t target(const Buf *b, const Tbl *t, int slot)
{
    int64_t p = field_pos(b, t, slot, 4);
    if (p <= 0)
        return p;
    int64_t tg = p + (int64_t)load_le32(b->d + p);
    if (check(b, tg, 4) < 0)
        return -1;
    return tg;
}

/* Sub-table: 1 present, 0 absent, -1 error. */
static inline int sub_table(const Buf *b, const Tbl *t, int slot, Tbl *out)
{
    int64_t tg = target(b, t, slot);
    if (tg <= 0)
        return (int)tg;
    if (table_at(b, tg, out) < 0)
        return -1;
    return 1;
}

/* Vector: 1 present (start, n), 0 absent, -1 error. */
static inline int vector(const Buf *b, const Tbl *t, int slot, int64_t elem, int64_t *start,
                         int64_t *n)
{
    int64_t tg = target(b, t, slot);
    if (tg <= 0)
        return (int)tg;
    int64_t cnt = load_le32(b->d + tg);
    if (check(b, tg + 4, cnt * elem) < 0)
        return -1;
    *start = tg + 4;
    *n = cnt;
    return 1;
}

static PyObject *u128_from(uint64_t high, uint64_t low)
{
    if (high == 0)
        return PyLong_FromUnsignedLongLong(low);
    unsigned char le[16];
    for (int i = 0; i < 8; i++) {
        le[i] = (unsigned char)(low >> (8 * i));
        le[8 + i] = (unsigned char)(high >> (8 * i));
    }
    return _PyLong_FromByteArray(le, 16, 1, 0);
}

/* Ulid table {high (0), low (1)} -> (high, low). */
static int read_u128(const Buf *b, const Tbl *t, uint64_t *high, uint64_t *low)
{
    if (rd_u64(b, t, 0, high) < 0 || rd_u64(b, t, 1, low) < 0)
        return -1;
    return 0;
}

static int req_ulid(const Buf *b, const Tbl *t, int slot, uint64_t *high, uint64_t *low)
{
    Tbl u;
    int r = sub_table(b, t, slot, &u);
    if (r < 0)
        return -1;
    if (r == 0)
        FAIL("required Ulid missing");
    return read_u128(b, &u, high, low);
}

/* bytes_ of a [ubyte] slot: Py_None when absent (new ref), NULL on error. */
static PyObject *read_bytes(const Buf *b, const Tbl *t, int slot)
{
    int64_t start = 0, n = 0;
    int r = vector(b, t, slot, 1, &start, &n);
    if (r < 0)
        return NULL;
    if (r == 0)
        Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)b->d + start, (Py_ssize_t)n);
}

static PyObject *enum_member(PyObject *tuple, int value)
{
    if (value < 0 || value >= PyTuple_GET_SIZE(tuple)) {
        PyErr_SetString(PyExc_ValueError, "unknown enum value");
        return NULL;
    }
    PyObject *m = PyTuple_GET_ITEM(tuple, value);
    Py_INCREF(m);
    return m;
}

/* sst_info.read_sst_info */
static PyObject *read_info(const Buf *b, const Tbl *t)
{
    int comp, type, ff;
    uint64_t v[6];
    static const int slots[6] = {1, 2, 3, 4, 8, 9};
    static const int fields[6] = {INFO_INDEX_OFF, INFO_INDEX_LEN, INFO_FILTER_OFF,
                                  INFO_FILTER_LEN, INFO_STATS_OFF, INFO_STATS_LEN};
    if (rd_i8(b, t, 5, &comp) < 0 || rd_i8(b, t, 6, &type) < 0 || rd_i8(b, t, 10, &ff) < 0)
        return NULL;
    for (int i = 0; i < 6; i++)
        if (rd_u64(b, t, slots[i], &v[i]) < 0)
            return NULL;
    PyObject *first = read_bytes(b, t, 0);
    if (first == NULL)
        return NULL;
    PyObject *last = read_bytes(b, t, 7);
    if (last == NULL) {
        Py_DECREF(first);
        return NULL;
    }
    PyObject *o = new_atomic_instance(&INFO);
    if (o == NULL) {
        Py_DECREF(first);
        Py_DECREF(last);
        return NULL;
    }
    set_slot(o, &INFO, INFO_FIRST, first);
    set_slot(o, &INFO, INFO_LAST, last);
    PyObject *e;
    if ((e = enum_member(COMPRESSION, comp)) == NULL)
        goto fail;
    set_slot(o, &INFO, INFO_COMPRESSION, e);
    if ((e = enum_member(SST_TYPE, type)) == NULL)
        goto fail;
    set_slot(o, &INFO, INFO_SST_TYPE, e);
    if ((e = enum_member(FILTER_FORMAT, ff)) == NULL)
        goto fail;
    set_slot(o, &INFO, INFO_FILTER_FORMAT, e);
    for (int i = 0; i < 6; i++) {
        PyObject *x = PyLong_FromUnsignedLongLong(v[i]);
        if (x == NULL)
            goto fail;
        set_slot(o, &INFO, fields[i], x);
    }
    return o;
fail:
    Py_DECREF(o);
    return NULL;
}

static int parse_buf(PyObject *data, Py_ssize_t start, Py_buffer *view, Buf *b)
{
    if (PyObject_GetBuffer(data, view, PyBUF_SIMPLE) < 0)
        return -1;
    if (start < 0 || start > view->len) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "bad start");
        return -1;
    }
    b->d = (const unsigned char *)view->buf;
    b->start = start;
    b->end = view->len;
    return 0;
}

/* The i-th table of a vector of tables starting at `start`. */
static inline int vec_table(const Buf *b, int64_t start, int64_t i, Tbl *t)
{
    int64_t at = start + 4 * i;
    return table_at(b, at + (int64_t)load_le32(b->d + at), t);
}

/* The fields an SST entry of a manifest (CompactedSsTableV2) and of a compactions file
 * (CompactedSsTable) share, as manifest_parts.read_handle_v2 and read_compacted read them:
 * id (slot 0, required Ulid), info (slot 1, required SsTableInfo) and the optional u16
 * format_version (slot fv_slot: 2 in CompactedSsTableV2, 3 in CompactedSsTable). On success
 * *id, *info and *fv are new references (*fv is None when absent). */
static int read_sst_entry(const Buf *b, const Tbl *t, int fv_slot, PyObject **id,
                          PyObject **info, PyObject **fv)
{
    Tbl it;
    uint64_t hi, lo;
    if (req_ulid(b, t, 0, &hi, &lo) < 0)
        return -1;
    int r = sub_table(b, t, 1, &it);
    if (r < 0)
        return -1;
    if (r == 0)
        FAIL("required info missing");
    int64_t fp = field_pos(b, t, fv_slot, 2);
    if (fp < 0)
        return -1;
    if ((*info = read_info(b, &it)) == NULL)
        return -1;
    if ((*id = u128_from(hi, lo)) == NULL) {
        Py_CLEAR(*info);
        return -1;
    }
    if (fp) {
        *fv = PyLong_FromUnsignedLong(load_le16(b->d + fp));
        if (*fv == NULL) {
            Py_CLEAR(*info);
            Py_CLEAR(*id);
            return -1;
        }
    } else {
        *fv = Py_None;
        Py_INCREF(*fv);
    }
    return 0;
}

/* read_handles(data, start, vec_start, n) -> (tuple[SstHandle], dict[id, SstHandle]) */
static PyObject *read_handles(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *data;
    Py_ssize_t start, vstart, n;
    if (!PyArg_ParseTuple(args, "Onnn:read_handles", &data, &start, &vstart, &n))
        return NULL;
    if (check_configured() < 0)
        return NULL;
    Py_buffer view;
    Buf b;
    if (parse_buf(data, start, &view, &b) < 0)
        return NULL;
    PyObject *out = NULL, *known = NULL, *result = NULL;
    if (check(&b, vstart, (int64_t)n * 4) < 0)
        goto done;
    out = PyTuple_New(n);
    known = PyDict_New();
    if (out == NULL || known == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        Tbl t;
        PyObject *id, *info, *fv;
        if (vec_table(&b, vstart, i, &t) < 0 || read_sst_entry(&b, &t, 2, &id, &info, &fv) < 0)
            goto done;
        PyObject *h = new_atomic_instance(&HANDLE);
        if (h == NULL) {
            Py_DECREF(id);
            Py_DECREF(info);
            Py_DECREF(fv);
            goto done;
        }
        PyTuple_SET_ITEM(out, i, h);
        set_slot(h, &HANDLE, H_INFO, info);
        set_slot(h, &HANDLE, H_ID, id);
        set_slot(h, &HANDLE, H_FV, fv);
        if (PyDict_SetItem(known, id, h) < 0)
            goto done;
    }
    result = PyTuple_Pack(2, out, known);
done:
    Py_XDECREF(out);
    Py_XDECREF(known);
    PyBuffer_Release(&view);
    return result;
}

/* The physical-range part of manifest_parts.view_problem for a handle: 0 valid, -1 not. */
static int handle_valid(PyObject *h)
{
    PyObject *info = get_field(h, &HANDLE, HANDLE_NAMES, H_INFO);
    if (info == NULL)
        return -1;
    PyObject *first = get_field(info, &INFO, INFO_NAMES, INFO_FIRST);
    PyObject *last = first ? get_field(info, &INFO, INFO_NAMES, INFO_LAST) : NULL;
    Py_DECREF(info);
    if (last == NULL) {
        Py_XDECREF(first);
        return -1;
    }
    int ok = 0;
    if (first == Py_None) {
        PyErr_SetString(PyExc_ValueError, "SST without first_entry");
        ok = -1;
    } else if (last != Py_None) {
        if (!PyBytes_Check(first) || !PyBytes_Check(last)) {
            PyErr_SetString(PyExc_TypeError, "first_entry/last_entry are not bytes");
            ok = -1;
        } else {
            Py_ssize_t lf = PyBytes_GET_SIZE(first), ll = PyBytes_GET_SIZE(last);
            int c = memcmp(PyBytes_AS_STRING(first), PyBytes_AS_STRING(last), lf < ll ? lf : ll);
            if (c > 0 || (c == 0 && lf > ll)) {
                PyErr_SetString(PyExc_ValueError, "first_entry after last_entry");
                ok = -1;
            }
        }
    }
    Py_DECREF(first);
    Py_DECREF(last);
    return ok;
}

/* One view. Views with a visible range go through view_cb(view_id, sst_id, range_pos), the
 * reference decoder (it checks the range and the view as read_view does). */
static PyObject *read_one_view(const Buf *b, const Tbl *t, PyObject *known, PyObject *view_cb)
{
    uint64_t shi, slo, vhi, vlo;
    if (req_ulid(b, t, 1, &shi, &slo) < 0 || req_ulid(b, t, 0, &vhi, &vlo) < 0)
        return NULL;
    int64_t rng = target(b, t, 2);
    if (rng < 0)
        return NULL;
    PyObject *sid = u128_from(shi, slo);
    if (sid == NULL)
        return NULL;
    PyObject *vid;
    if (vhi == shi && vlo == slo) {
        vid = sid;
        Py_INCREF(vid);
    } else if ((vid = u128_from(vhi, vlo)) == NULL) {
        Py_DECREF(sid);
        return NULL;
    }
    if (rng) {
        PyObject *r = PyObject_CallFunction(view_cb, "NNL", vid, sid, (long long)rng);
        return r;
    }
    PyObject *h = PyDict_GetItemWithError(known, sid);
    if (h == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "view references an unknown SST");
        goto fail;
    }
    if (handle_valid(h) < 0)
        goto fail;
    PyObject *v = new_atomic_instance(&VIEW);
    if (v == NULL)
        goto fail;
    set_slot(v, &VIEW, V_ID, vid);
    set_slot(v, &VIEW, V_SST, sid);
    Py_INCREF(Py_None);
    set_slot(v, &VIEW, V_RANGE, Py_None);
    return v;
fail:
    Py_DECREF(sid);
    Py_DECREF(vid);
    return NULL;
}

static PyObject *views_of(const Buf *b, int64_t vstart, int64_t n, PyObject *known,
                          PyObject *view_cb)
{
    if (check(b, vstart, n * 4) < 0)
        return NULL;
    PyObject *out = PyTuple_New((Py_ssize_t)n);
    if (out == NULL)
        return NULL;
    for (int64_t i = 0; i < n; i++) {
        Tbl t;
        if (vec_table(b, vstart, i, &t) < 0)
            goto fail;
        PyObject *v = read_one_view(b, &t, known, view_cb);
        if (v == NULL)
            goto fail;
        PyTuple_SET_ITEM(out, (Py_ssize_t)i, v);
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* read_views(data, start, vec_start, n, known, view_cb) -> tuple[SstView] */
static PyObject *read_views(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *data, *known, *cb;
    Py_ssize_t start, vstart, n;
    if (!PyArg_ParseTuple(args, "OnnnO!O:read_views", &data, &start, &vstart, &n, &PyDict_Type,
                          &known, &cb))
        return NULL;
    if (check_configured() < 0)
        return NULL;
    Py_buffer view;
    Buf b;
    if (parse_buf(data, start, &view, &b) < 0)
        return NULL;
    PyObject *out = views_of(&b, vstart, n, known, cb);
    PyBuffer_Release(&view);
    return out;
}

/* read_runs(data, start, vec_start, n, known, view_cb) -> tuple[SortedRun] */
static PyObject *read_runs(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *data, *known, *cb;
    Py_ssize_t start, vstart, n;
    if (!PyArg_ParseTuple(args, "OnnnO!O:read_runs", &data, &start, &vstart, &n, &PyDict_Type,
                          &known, &cb))
        return NULL;
    if (check_configured() < 0)
        return NULL;
    Py_buffer view;
    Buf b;
    if (parse_buf(data, start, &view, &b) < 0)
        return NULL;
    PyObject *out = NULL;
    if (check(&b, vstart, (int64_t)n * 4) < 0)
        goto done;
    out = PyTuple_New(n);
    if (out == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        Tbl t;
        int64_t s = 0, cnt = 0;
        if (vec_table(&b, vstart, i, &t) < 0)
            goto fail;
        int64_t p = field_pos(&b, &t, 0, 4);
        if (p < 0)
            goto fail;
        int r = vector(&b, &t, 1, 4, &s, &cnt);
        if (r < 0)
            goto fail;
        if (r == 0) {
            PyErr_SetString(PyExc_ValueError, "required ssts missing");
            goto fail;
        }
        PyObject *views = views_of(&b, s, cnt, known, cb);
        if (views == NULL)
            goto fail;
        PyObject *run = new_instance(&RUN);
        if (run == NULL) {
            Py_DECREF(views);
            goto fail;
        }
        PyTuple_SET_ITEM(out, i, run);
        set_slot(run, &RUN, R_VIEWS, views);
        PyObject *id = PyLong_FromUnsignedLong(p ? load_le32(b.d + p) : 0);
        if (id == NULL)
            goto fail;
        set_slot(run, &RUN, R_ID, id);
    }
    goto done;
fail:
    Py_CLEAR(out);
done:
    PyBuffer_Release(&view);
    return out;
}

/* read_ulids(data, start, vec_start, n) -> tuple[int]: a vector of Ulid tables (the
 * sst_ids of an external database, which list every SST a clone inherited). */
static PyObject *read_ulids(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *data;
    Py_ssize_t start, vstart, n;
    if (!PyArg_ParseTuple(args, "Onnn:read_ulids", &data, &start, &vstart, &n))
        return NULL;
    Py_buffer view;
    Buf b;
    if (parse_buf(data, start, &view, &b) < 0)
        return NULL;
    PyObject *out = NULL;
    if (check(&b, vstart, (int64_t)n * 4) < 0)
        goto done;
    out = PyTuple_New(n);
    if (out == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        Tbl t;
        uint64_t hi, lo;
        if (vec_table(&b, vstart, i, &t) < 0 || read_u128(&b, &t, &hi, &lo) < 0)
            goto fail;
        PyObject *id = u128_from(hi, lo);
        if (id == NULL)
            goto fail;
        PyTuple_SET_ITEM(out, i, id);
    }
    goto done;
fail:
    Py_CLEAR(out);
done:
    PyBuffer_Release(&view);
    return out;
}

/* ===================================================================== encoding */

/* The builder: csrc/fbbuild.h, shared with _sstwrite.c. */

/* ---- Python values -> C, with the reference's range checks (failure -> fallback) */

static int as_u64(PyObject *v, uint64_t *out)
{
    if (!PyLong_Check(v)) {
        PyErr_SetString(PyExc_TypeError, "expected int");
        return -1;
    }
    unsigned long long x = PyLong_AsUnsignedLongLong(v);
    if (x == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    *out = x;
    return 0;
}

static int as_uint(PyObject *v, int bits, uint64_t *out)
{
    if (as_u64(v, out) < 0)
        return -1;
    if (bits < 64 && (*out >> bits) != 0) {
        PyErr_SetString(PyExc_OverflowError, "value out of range");
        return -1;
    }
    return 0;
}

static int as_u128(PyObject *v, uint64_t *high, uint64_t *low)
{
    if (!PyLong_Check(v)) {
        PyErr_SetString(PyExc_TypeError, "expected int");
        return -1;
    }
    unsigned char le[16];
    if (SL_LONG_AS_BYTES((PyLongObject *)v, le, 16, 1, 0) < 0)
        return -1;
    *low = load_le64(le);
    *high = load_le64(le + 8);
    return 0;
}

static int attr_u(PyObject *obj, const char *name, int bits, uint64_t *out)
{
    PyObject *v = PyObject_GetAttrString(obj, name);
    if (v == NULL)
        return -1;
    int r = as_uint(v, bits, out);
    Py_DECREF(v);
    return r;
}

static int64_t add_u128(Builder *bd, uint64_t high, uint64_t low)
{
    start_object(bd, 2);
    if (scalar_slot(bd, 1, low, 8, 1, 0) < 0 || scalar_slot(bd, 0, high, 8, 1, 0) < 0)
        return -1;
    return end_object(bd);
}

static int64_t add_ulid_obj(Builder *bd, PyObject *v)
{
    uint64_t hi, lo;
    if (as_u128(v, &hi, &lo) < 0)
        return -1;
    return add_u128(bd, hi, lo);
}

static int64_t add_uuid_obj(Builder *bd, PyObject *u)
{
    PyObject *v = PyObject_GetAttrString(u, "int");
    if (v == NULL)
        return -1;
    int64_t r = add_ulid_obj(bd, v);
    Py_DECREF(v);
    return r;
}

/* sst_info.add_sst_info */
static int64_t add_info(Builder *bd, PyObject *info)
{
    static const int order[6] = {INFO_STATS_LEN, INFO_STATS_OFF, INFO_FILTER_LEN,
                                 INFO_FILTER_OFF, INFO_INDEX_LEN, INFO_INDEX_OFF};
    static const int slots[6] = {9, 8, 4, 3, 2, 1};
    static const int enum_f[3] = {INFO_FILTER_FORMAT, INFO_SST_TYPE, INFO_COMPRESSION};
    static const int enum_s[3] = {10, 6, 5};
    uint64_t vals[6], ev[3];
    for (int i = 0; i < 6; i++) {
        PyObject *v = get_field(info, &INFO, INFO_NAMES, order[i]);
        if (v == NULL)
            return -1;
        int r = as_uint(v, 64, &vals[i]);
        Py_DECREF(v);
        if (r < 0)
            return -1;
    }
    for (int i = 0; i < 3; i++) {
        PyObject *v = get_field(info, &INFO, INFO_NAMES, enum_f[i]);
        if (v == NULL)
            return -1;
        PyObject *tuple = i == 0 ? FILTER_FORMAT : i == 1 ? SST_TYPE : COMPRESSION;
        int r = as_u64(v, &ev[i]);
        Py_DECREF(v);
        if (r < 0)
            return -1;
        if (ev[i] >= (uint64_t)PyTuple_GET_SIZE(tuple)) {
            PyErr_SetString(PyExc_ValueError, "invalid enum value");
            return -1;
        }
    }
    int64_t first = 0, last = 0;
    PyObject *f = get_field(info, &INFO, INFO_NAMES, INFO_FIRST);
    if (f == NULL)
        return -1;
    if (f != Py_None)
        first = add_bytes_obj(bd, f);
    Py_DECREF(f);
    if (first < 0)
        return -1;
    PyObject *l = get_field(info, &INFO, INFO_NAMES, INFO_LAST);
    if (l == NULL)
        return -1;
    if (l != Py_None)
        last = add_bytes_obj(bd, l);
    Py_DECREF(l);
    if (last < 0)
        return -1;
    start_object(bd, 11);
    for (int i = 0; i < 6; i++)
        if (scalar_slot(bd, slots[i], vals[i], 8, 1, 0) < 0)
            return -1;
    if (offset_slot(bd, 7, last) < 0 || offset_slot(bd, 0, first) < 0)
        return -1;
    for (int i = 0; i < 3; i++)
        if (scalar_slot(bd, enum_s[i], ev[i] & 0xFF, 1, 1, 0) < 0)
            return -1;
    return end_object(bd);
}

/* manifest_parts.add_handle_v2 */
static int64_t add_handle(Builder *bd, PyObject *h)
{
    PyObject *id = get_field(h, &HANDLE, HANDLE_NAMES, H_ID);
    if (id == NULL)
        return -1;
    int64_t sid = add_ulid_obj(bd, id);
    Py_DECREF(id);
    if (sid < 0)
        return -1;
    PyObject *info = get_field(h, &HANDLE, HANDLE_NAMES, H_INFO);
    if (info == NULL)
        return -1;
    int64_t inf = add_info(bd, info);
    Py_DECREF(info);
    if (inf < 0)
        return -1;
    PyObject *fv = get_field(h, &HANDLE, HANDLE_NAMES, H_FV);
    if (fv == NULL)
        return -1;
    uint64_t v = 0;
    int has = fv != Py_None;
    int r = has ? as_uint(fv, 16, &v) : 0;
    Py_DECREF(fv);
    if (r < 0)
        return -1;
    start_object(bd, 3);
    if (offset_slot(bd, 1, inf) < 0 || offset_slot(bd, 0, sid) < 0)
        return -1;
    if (has && scalar_slot(bd, 2, v, 2, 0, 0) < 0)
        return -1;
    return end_object(bd);
}

/* Sequences are walked with PySequence_Fast (tuples and lists as the reference accepts). */
typedef int64_t (*add_fn)(Builder *, PyObject *, void *);

static int64_t add_vector_of(Builder *bd, PyObject *seq, add_fn fn, void *ctx)
{
    PyObject *fast = PySequence_Fast(seq, "expected a sequence");
    if (fast == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    int64_t *offs = PyMem_Malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    int64_t r = -1;
    if (offs == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        offs[i] = fn(bd, PySequence_Fast_GET_ITEM(fast, i), ctx);
        if (offs[i] < 0)
            goto done;
    }
    r = add_offset_vector(bd, offs, n);
done:
    PyMem_Free(offs);
    Py_DECREF(fast);
    return r;
}

static int64_t add_handle_cb(Builder *bd, PyObject *h, void *Py_UNUSED(ctx)) { return add_handle(bd, h); }

/* shared_tables.add_bound */
static int64_t add_bound(Builder *bd, PyObject *bound)
{
    PyObject *kind = PyObject_GetAttrString(bound, "kind");
    if (kind == NULL)
        return -1;
    uint64_t k;
    int r = as_u64(kind, &k);
    Py_DECREF(kind);
    if (r < 0)
        return -1;
    PyObject *key = PyObject_GetAttrString(bound, "key");
    if (key == NULL)
        return -1;
    int64_t koff = 0;
    if (k == 1) {
        if (key != Py_None) {
            Py_DECREF(key);
            PyErr_SetString(PyExc_ValueError, "an unbounded bound has no key");
            return -1;
        }
    } else if ((k == 2 || k == 3) && key != Py_None) {
        koff = add_bytes_obj(bd, key);
    } else {
        Py_DECREF(key);
        PyErr_SetString(PyExc_ValueError, "cannot encode bound");
        return -1;
    }
    Py_DECREF(key);
    if (koff < 0)
        return -1;
    start_object(bd, 2);
    if (offset_slot(bd, 0, koff) < 0 || scalar_slot(bd, 1, k, 1, 1, 0) < 0)
        return -1;
    return end_object(bd);
}

/* shared_tables.add_range (non-emptiness is checked by the view_problem callback) */
static int64_t add_range(Builder *bd, PyObject *rng)
{
    PyObject *s = PyObject_GetAttrString(rng, "start");
    if (s == NULL)
        return -1;
    int64_t so = add_bound(bd, s);
    Py_DECREF(s);
    if (so < 0)
        return -1;
    PyObject *e = PyObject_GetAttrString(rng, "end");
    if (e == NULL)
        return -1;
    int64_t eo = add_bound(bd, e);
    Py_DECREF(e);
    if (eo < 0)
        return -1;
    start_object(bd, 2);
    if (offset_slot(bd, 1, eo) < 0 || offset_slot(bd, 0, so) < 0)
        return -1;
    return end_object(bd);
}

typedef struct {
    PyObject *known;      /* Mapping id -> handle (manifest.sst_map) */
    PyObject *problem_cb; /* view_problem(view, known) -> str | None */
} ViewCtx;

/* manifest_parts.add_view, after _check_views' view_problem check */
static int64_t add_view(Builder *bd, PyObject *v, void *vctx)
{
    ViewCtx *ctx = vctx;
    PyObject *sid = get_field(v, &VIEW, VIEW_NAMES, V_SST);
    if (sid == NULL)
        return -1;
    PyObject *rng = get_field(v, &VIEW, VIEW_NAMES, V_RANGE);
    if (rng == NULL) {
        Py_DECREF(sid);
        return -1;
    }
    int64_t r = -1, so, ro = 0;
    if (rng == Py_None && Py_TYPE(v) == VIEW.tp && PyDict_CheckExact(ctx->known)) {
        PyObject *h = PyDict_GetItemWithError(ctx->known, sid);
        if (h == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "view references an unknown SST");
            goto done;
        }
        if (handle_valid(h) < 0)
            goto done;
    } else {
        PyObject *p = PyObject_CallFunctionObjArgs(ctx->problem_cb, v, ctx->known, NULL);
        if (p == NULL)
            goto done;
        int bad = p != Py_None;
        Py_DECREF(p);
        if (bad) {
            PyErr_SetString(PyExc_ValueError, "invalid view");
            goto done;
        }
    }
    if ((so = add_ulid_obj(bd, sid)) < 0)
        goto done;
    if (rng != Py_None && (ro = add_range(bd, rng)) < 0)
        goto done;
    PyObject *vid = get_field(v, &VIEW, VIEW_NAMES, V_ID);
    if (vid == NULL)
        goto done;
    int64_t vo = add_ulid_obj(bd, vid);
    Py_DECREF(vid);
    if (vo < 0)
        goto done;
    start_object(bd, 3);
    if (offset_slot(bd, 2, ro) < 0 || offset_slot(bd, 1, so) < 0 || offset_slot(bd, 0, vo) < 0)
        goto done;
    r = end_object(bd);
done:
    Py_DECREF(sid);
    Py_DECREF(rng);
    return r;
}

static int64_t add_run(Builder *bd, PyObject *run, void *ctx)
{
    PyObject *views = get_field(run, &RUN, RUN_NAMES, R_VIEWS);
    if (views == NULL)
        return -1;
    int64_t vo = add_vector_of(bd, views, add_view, ctx);
    Py_DECREF(views);
    if (vo < 0)
        return -1;
    PyObject *id = get_field(run, &RUN, RUN_NAMES, R_ID);
    if (id == NULL)
        return -1;
    uint64_t rid;
    int r = as_uint(id, 32, &rid);
    Py_DECREF(id);
    if (r < 0)
        return -1;
    start_object(bd, 2);
    if (offset_slot(bd, 1, vo) < 0 || scalar_slot(bd, 0, rid, 4, 1, 0) < 0)
        return -1;
    return end_object(bd);
}

/* manifest_codec._add_tree: (l0 vector, last id or 0, runs vector) */
static int add_tree(Builder *bd, PyObject *l0, PyObject *last, PyObject *runs, ViewCtx *ctx,
                    int64_t out[3])
{
    if ((out[0] = add_vector_of(bd, l0, add_view, ctx)) < 0)
        return -1;
    out[1] = 0;
    if (last != Py_None && (out[1] = add_ulid_obj(bd, last)) < 0)
        return -1;
    if ((out[2] = add_vector_of(bd, runs, add_run, ctx)) < 0)
        return -1;
    return 0;
}

static int64_t add_segment(Builder *bd, PyObject *s, void *ctx)
{
    int64_t r = -1, tree[3], prefix;
    PyObject *p = PyObject_GetAttrString(s, "prefix");
    PyObject *l0 = PyObject_GetAttrString(s, "l0");
    PyObject *last = PyObject_GetAttrString(s, "last_compacted_l0_sst_view_id");
    PyObject *runs = PyObject_GetAttrString(s, "compacted");
    if (p == NULL || l0 == NULL || last == NULL || runs == NULL)
        goto done;
    if ((prefix = add_bytes_obj(bd, p)) < 0 || add_tree(bd, l0, last, runs, ctx, tree) < 0)
        goto done;
    start_object(bd, 4);
    if (offset_slot(bd, 3, tree[2]) < 0 || offset_slot(bd, 2, tree[0]) < 0 ||
        offset_slot(bd, 1, tree[1]) < 0 || offset_slot(bd, 0, prefix) < 0)
        goto done;
    r = end_object(bd);
done:
    Py_XDECREF(p);
    Py_XDECREF(l0);
    Py_XDECREF(last);
    Py_XDECREF(runs);
    return r;
}

/* manifest_parts.add_checkpoint */
static int64_t add_checkpoint(Builder *bd, PyObject *c, void *Py_UNUSED(ctx))
{
    int64_t r = -1, cid, name = 0, meta = 0;
    uint64_t expire = 0, create, mid, we = 0;
    PyObject *exp = PyObject_GetAttrString(c, "expire_time_s");
    PyObject *id = PyObject_GetAttrString(c, "id");
    PyObject *nm = PyObject_GetAttrString(c, "name");
    PyObject *wep = PyObject_GetAttrString(c, "writer_epoch");
    if (exp == NULL || id == NULL || nm == NULL || wep == NULL)
        goto done;
    if (exp != Py_None) {
        if (as_u64(exp, &expire) < 0)
            goto done;
        if (expire == 0 || expire > 0xFFFFFFFFULL) {
            PyErr_SetString(PyExc_ValueError, "checkpoint expire time out of range");
            goto done;
        }
    }
    if (attr_u(c, "create_time_s", 32, &create) < 0 || attr_u(c, "manifest_id", 64, &mid) < 0)
        goto done;
    if ((cid = add_uuid_obj(bd, id)) < 0)
        goto done;
    if (nm != Py_None && (name = add_string_obj(bd, nm)) < 0)
        goto done;
    if (wep != Py_None) {
        if (as_u64(wep, &we) < 0)
            goto done;
        start_object(bd, 1);
        if (scalar_slot(bd, 0, we, 8, 1, 0) < 0 || (meta = end_object(bd)) < 0)
            goto done;
    }
    start_object(bd, 7);
    if (scalar_slot(bd, 1, mid, 8, 1, 0) < 0 || offset_slot(bd, 6, name) < 0 ||
        offset_slot(bd, 5, meta) < 0 || scalar_slot(bd, 3, create, 4, 1, 0) < 0 ||
        scalar_slot(bd, 2, expire, 4, 1, 0) < 0 || offset_slot(bd, 0, cid) < 0 ||
        scalar_slot(bd, 4, meta ? 1 : 0, 1, 1, 0) < 0)
        goto done;
    r = end_object(bd);
done:
    Py_XDECREF(exp);
    Py_XDECREF(id);
    Py_XDECREF(nm);
    Py_XDECREF(wep);
    return r;
}

static int64_t add_ulid_cb(Builder *bd, PyObject *v, void *Py_UNUSED(ctx)) { return add_ulid_obj(bd, v); }

/* manifest_parts.add_external_dbs (one entry) */
static int64_t add_external(Builder *bd, PyObject *db, void *Py_UNUSED(ctx))
{
    int64_t r = -1, path, src, fin = 0, ids;
    PyObject *p = PyObject_GetAttrString(db, "path");
    PyObject *s = PyObject_GetAttrString(db, "source_checkpoint_id");
    PyObject *f = PyObject_GetAttrString(db, "final_checkpoint_id");
    PyObject *i = PyObject_GetAttrString(db, "sst_ids");
    if (p == NULL || s == NULL || f == NULL || i == NULL)
        goto done;
    if ((path = add_string_obj(bd, p)) < 0 || (src = add_uuid_obj(bd, s)) < 0)
        goto done;
    if (f != Py_None && (fin = add_uuid_obj(bd, f)) < 0)
        goto done;
    if ((ids = add_vector_of(bd, i, add_ulid_cb, NULL)) < 0)
        goto done;
    start_object(bd, 4);
    if (offset_slot(bd, 3, ids) < 0 || offset_slot(bd, 2, fin) < 0 ||
        offset_slot(bd, 1, src) < 0 || offset_slot(bd, 0, path) < 0)
        goto done;
    r = end_object(bd);
done:
    Py_XDECREF(p);
    Py_XDECREF(s);
    Py_XDECREF(f);
    Py_XDECREF(i);
    return r;
}

static const char *SCALARS[] = {"writer_epoch", "compactor_epoch", "replay_after_wal_id",
                                "wal_id_last_seen", "last_l0_seq", "recent_snapshot_min_seq",
                                "manifest_id_field"};

/* ============================================================ tree snapshot (reuse)
 *
 * Most manifest updates leave the SST list and the tree alone (a checkpoint, a reader's
 * checkpoint refresh, a writer's epoch or WAL position). The encoder writes ssts, l0, the
 * last compacted view id and the sorted runs first, so the bytes of that section, at the end
 * of the buffer, depend on nothing else: after encoding them we keep the builder's state
 * (the bytes, minalign, the vtable table) with the very tuples they came from. The next
 * encode of a manifest holding the *same* tuple objects (frozen, so unchanged) resumes from
 * that state, and a decode of a buffer whose end is byte-identical to that section, with
 * the root pointing at the same places, returns those tuples. Only canonical trees are kept
 * (exact types, no visible ranges: what the decoder itself would build from the bytes),
 * and only large ones. One snapshot, replaced as a whole while holding the GIL. */

typedef struct {
    PyObject *ssts, *l0, *runs, *last, *known;
    unsigned char *tail;
    int64_t tail_len;
    int minalign;
    int64_t *vts;
    int64_t vts_cap, vts_n;
    int64_t off[3];  /* end-relative offsets of the ssts, l0 and runs vectors */
    int64_t last_off; /* of the last compacted Ulid table, 0 when absent */
} Snap;

static Snap SNAP;
#define SNAP_MIN_SSTS 1024

static void snap_release(Snap *sn)
{
    Py_XDECREF(sn->ssts);
    Py_XDECREF(sn->l0);
    Py_XDECREF(sn->runs);
    Py_XDECREF(sn->last);
    Py_XDECREF(sn->known);
    PyMem_Free(sn->tail);
    PyMem_Free(sn->vts);
}

static int is_member(PyObject *tuple, PyObject *v)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tuple); i++)
        if (PyTuple_GET_ITEM(tuple, i) == v)
            return 1;
    return 0;
}

#define SLOTV(obj, sc, i) (*(PyObject **)((char *)(obj) + (sc).off[i]))

static int canonical_views(PyObject *views)
{
    if (!PyTuple_CheckExact(views))
        return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(views); i++) {
        PyObject *v = PyTuple_GET_ITEM(views, i);
        if (Py_TYPE(v) != VIEW.tp)
            return 0;
        PyObject *id = SLOTV(v, VIEW, V_ID), *sid = SLOTV(v, VIEW, V_SST);
        if (id == NULL || sid == NULL || !PyLong_CheckExact(id) || !PyLong_CheckExact(sid) ||
            SLOTV(v, VIEW, V_RANGE) != Py_None)
            return 0;
    }
    return 1;
}

/* Whether decoding the encoded tree gives back exactly these objects' types and values. */
static int canonical_tree(PyObject *ssts, PyObject *l0, PyObject *last, PyObject *runs)
{
    static const int ints[6] = {INFO_INDEX_OFF, INFO_INDEX_LEN, INFO_FILTER_OFF,
                                INFO_FILTER_LEN, INFO_STATS_OFF, INFO_STATS_LEN};
    if (!PyTuple_CheckExact(ssts) || !PyTuple_CheckExact(runs) || !canonical_views(l0))
        return 0;
    if (last != Py_None && !PyLong_CheckExact(last))
        return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(ssts); i++) {
        PyObject *h = PyTuple_GET_ITEM(ssts, i);
        if (Py_TYPE(h) != HANDLE.tp)
            return 0;
        PyObject *id = SLOTV(h, HANDLE, H_ID), *info = SLOTV(h, HANDLE, H_INFO),
                 *fv = SLOTV(h, HANDLE, H_FV);
        if (id == NULL || !PyLong_CheckExact(id) || info == NULL || Py_TYPE(info) != INFO.tp ||
            fv == NULL || (fv != Py_None && !PyLong_CheckExact(fv)))
            return 0;
        PyObject *f = SLOTV(info, INFO, INFO_FIRST), *l = SLOTV(info, INFO, INFO_LAST);
        if (f == NULL || l == NULL || (f != Py_None && !PyBytes_CheckExact(f)) ||
            (l != Py_None && !PyBytes_CheckExact(l)))
            return 0;
        for (int k = 0; k < 6; k++) {
            PyObject *x = SLOTV(info, INFO, ints[k]);
            if (x == NULL || !PyLong_CheckExact(x))
                return 0;
        }
        PyObject *c = SLOTV(info, INFO, INFO_COMPRESSION), *t = SLOTV(info, INFO, INFO_SST_TYPE),
                 *ff = SLOTV(info, INFO, INFO_FILTER_FORMAT);
        if (c == NULL || t == NULL || ff == NULL || !is_member(COMPRESSION, c) ||
            !is_member(SST_TYPE, t) || !is_member(FILTER_FORMAT, ff))
            return 0;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(runs); i++) {
        PyObject *r = PyTuple_GET_ITEM(runs, i);
        if (Py_TYPE(r) != RUN.tp)
            return 0;
        PyObject *id = SLOTV(r, RUN, R_ID), *views = SLOTV(r, RUN, R_VIEWS);
        if (id == NULL || !PyLong_CheckExact(id) || views == NULL || !canonical_views(views))
            return 0;
    }
    return 1;
}

/* Keep the builder's state after the tree section (best effort: no error on failure). */
static void snap_save(const Builder *bd, PyObject *ssts, PyObject *l0, PyObject *last,
                      PyObject *runs, PyObject *known, const int64_t off[3], int64_t last_off)
{
    if (PyTuple_GET_SIZE(ssts) < SNAP_MIN_SSTS || !PyDict_CheckExact(known) ||
        !canonical_tree(ssts, l0, last, runs))
        return;
    Snap sn;
    memset(&sn, 0, sizeof(sn));
    sn.tail_len = OFFSET(bd);
    sn.tail = PyMem_Malloc((size_t)sn.tail_len);
    sn.vts = PyMem_Malloc(sizeof(int64_t) * (size_t)bd->vts_cap);
    if (sn.tail == NULL || sn.vts == NULL) {
        PyMem_Free(sn.tail);
        PyMem_Free(sn.vts);
        return;
    }
    memcpy(sn.tail, bd->buf + bd->head, (size_t)sn.tail_len);
    memcpy(sn.vts, bd->vts, sizeof(int64_t) * (size_t)bd->vts_cap);
    sn.vts_cap = bd->vts_cap;
    sn.vts_n = bd->vts_n;
    sn.minalign = bd->minalign;
    memcpy(sn.off, off, sizeof(sn.off));
    sn.last_off = last_off;
    Py_INCREF(ssts);
    Py_INCREF(l0);
    Py_INCREF(last);
    Py_INCREF(runs);
    Py_INCREF(known);
    sn.ssts = ssts;
    sn.l0 = l0;
    sn.last = last;
    sn.runs = runs;
    sn.known = known;
    Snap old = SNAP;
    SNAP = sn; /* swapped before any object is released (releasing may run Python code) */
    snap_release(&old);
}

/* Resume a builder from the snapshot when the manifest holds its very tuples: 1 yes,
 * 0 no, -1 error. */
static int snap_restore(Builder *bd, PyObject *ssts, PyObject *l0, PyObject *last,
                        PyObject *runs, int64_t off[3], int64_t *last_off)
{
    if (SNAP.tail == NULL || SNAP.ssts != ssts || SNAP.l0 != l0 || SNAP.runs != runs)
        return 0;
    if (SNAP.last != last) {
        if (last == Py_None || SNAP.last == Py_None || !PyLong_CheckExact(last))
            return 0;
        int eq = PyObject_RichCompareBool(SNAP.last, last, Py_EQ);
        if (eq <= 0)
            return eq;
    }
    if (bd->cap < SNAP.tail_len + 1024) {
        unsigned char *nb = PyMem_Malloc((size_t)(SNAP.tail_len * 2 + 1024));
        if (nb == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        PyMem_Free(bd->buf);
        bd->buf = nb;
        bd->cap = SNAP.tail_len * 2 + 1024;
    }
    int64_t *vts = PyMem_Malloc(sizeof(int64_t) * (size_t)SNAP.vts_cap);
    if (vts == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(vts, SNAP.vts, sizeof(int64_t) * (size_t)SNAP.vts_cap);
    PyMem_Free(bd->vts);
    bd->vts = vts;
    bd->vts_cap = SNAP.vts_cap;
    bd->vts_n = SNAP.vts_n;
    bd->head = bd->cap - SNAP.tail_len;
    memcpy(bd->buf + bd->head, SNAP.tail, (size_t)SNAP.tail_len);
    bd->minalign = SNAP.minalign;
    memcpy(off, SNAP.off, sizeof(SNAP.off));
    *last_off = SNAP.last_off;
    return 1;
}

/* reuse_tree(data, ssts_pos, l0_pos, runs_pos, last_pos) -> (ssts, l0, compacted, last,
 * known) or None: the snapshot's objects when ``data`` ends with its bytes and the root
 * points at them (positions are absolute in ``data``; last_pos 0 when absent). */
static PyObject *reuse_tree(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *data;
    Py_ssize_t pos[3], last_pos;
    if (!PyArg_ParseTuple(args, "Onnnn:reuse_tree", &data, &pos[0], &pos[1], &pos[2],
                          &last_pos))
        return NULL;
    if (SNAP.tail == NULL)
        Py_RETURN_NONE;
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    int64_t len = view.len;
    int ok = SNAP.tail_len + 2 <= len;
    for (int i = 0; ok && i < 3; i++)
        ok = len - pos[i] == SNAP.off[i];
    if (ok)
        ok = last_pos == 0 ? SNAP.last_off == 0
                           : (SNAP.last_off != 0 && len - last_pos == SNAP.last_off);
    if (ok)
        ok = memcmp((const unsigned char *)view.buf + len - SNAP.tail_len, SNAP.tail,
                    (size_t)SNAP.tail_len) == 0;
    PyBuffer_Release(&view);
    if (!ok)
        Py_RETURN_NONE;
    return PyTuple_Pack(5, SNAP.ssts, SNAP.l0, SNAP.runs, SNAP.last, SNAP.known);
}

static PyObject *forget_tree(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(unused))
{
    Snap old = SNAP;
    memset(&SNAP, 0, sizeof(SNAP));
    snap_release(&old);
    Py_RETURN_NONE;
}

/* ============================================================ untracking planning objects
 *
 * untrack_frozen(objects, types) -> int: untrack from the cyclic GC every object of the list
 * `objects` whose exact type is in the tuple `types`, and, through tp_traverse, every object
 * they reach (up to UNTRACK_DEPTH levels) whose exact type is also in `types`; returns how
 * many it untracked. For the caller's frozen slot dataclasses built in bulk (compaction
 * planning makes five per input view): an object whose fields were set once, to objects
 * that existed before it, cannot be part of a reference cycle, so tracking it only makes
 * collections walk it (the same argument as new_atomic_instance above). Reference counting
 * frees them as usual. Objects of other types (the type objects tp_traverse visits, enum
 * members, strings) are left alone. */

#define UNTRACK_DEPTH 4

typedef struct {
    PyObject *types;
    int depth;
    Py_ssize_t count;
} UntrackCtx;

static int untrack_visit(PyObject *o, void *arg)
{
    UntrackCtx *c = (UntrackCtx *)arg;
    PyTypeObject *tp = Py_TYPE(o);
    int allowed = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(c->types); i++) {
        if ((PyObject *)tp == PyTuple_GET_ITEM(c->types, i)) {
            allowed = 1;
            break;
        }
    }
    if (!allowed || !PyObject_IS_GC(o) || !PyObject_GC_IsTracked(o))
        return 0;
    PyObject_GC_UnTrack(o);
    c->count++;
    if (c->depth < UNTRACK_DEPTH && tp->tp_traverse != NULL) {
        c->depth++;
        tp->tp_traverse(o, untrack_visit, c);
        c->depth--;
    }
    return 0;
}

static PyObject *untrack_frozen(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *objects, *types;
    if (!PyArg_ParseTuple(args, "O!O!:untrack_frozen", &PyList_Type, &objects,
                          &PyTuple_Type, &types))
        return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(types); i++) {
        if (!PyType_Check(PyTuple_GET_ITEM(types, i))) {
            PyErr_SetString(PyExc_TypeError, "untrack_frozen: types must hold classes");
            return NULL;
        }
    }
    UntrackCtx c = {types, 0, 0};
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(objects); i++)
        untrack_visit(PyList_GET_ITEM(objects, i), &c);
    return PyLong_FromSsize_t(c.count);
}

/* ============================================================ object names
 *
 * ulid_names(head, tail, ids) -> list[str]: head + the 26-character Crockford base32 form
 * of each ULID of `ids` (ints in [0, 2**128)) + tail; `ids.ulid_to_str` formats one name
 * per SST in Python, which is a good part of planning a compaction of a large database.
 * head and tail must be ASCII; an id out of range raises OverflowError (the caller then
 * formats in Python, which raises its own error). */

static const char CROCKFORD_DIGITS[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

static unsigned ulid_digit(uint64_t hi, uint64_t lo, int pos)
{
    uint64_t v;
    if (pos >= 64)
        v = hi >> (pos - 64);
    else if (pos == 0)
        v = lo;
    else
        v = (lo >> pos) | (hi << (64 - pos));
    return (unsigned)(v & 31);
}

static PyObject *ulid_names(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *head, *tail, *ids;
    if (!PyArg_ParseTuple(args, "UUO!:ulid_names", &head, &tail, &PyList_Type, &ids))
        return NULL;
    if (!PyUnicode_IS_ASCII(head) || !PyUnicode_IS_ASCII(tail)) {
        PyErr_SetString(PyExc_ValueError, "ulid_names: head and tail must be ASCII");
        return NULL;
    }
    Py_ssize_t hl = PyUnicode_GET_LENGTH(head), tl = PyUnicode_GET_LENGTH(tail);
    const Py_UCS1 *hd = PyUnicode_1BYTE_DATA(head), *td = PyUnicode_1BYTE_DATA(tail);
    Py_ssize_t n = PyList_GET_SIZE(ids);
    PyObject *out = PyList_New(n);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyList_GET_ITEM(ids, i);
        unsigned char be[16];
        if (!PyLong_Check(v)) {
            PyErr_SetString(PyExc_TypeError, "ulid_names: ids must be ints");
            Py_DECREF(out);
            return NULL;
        }
        if (SL_LONG_AS_BYTES((PyLongObject *)v, be, 16, 0, 0) < 0) {
            Py_DECREF(out);
            return NULL;
        }
        uint64_t hi = 0, lo = 0;
        for (int k = 0; k < 8; k++) {
            hi = (hi << 8) | be[k];
            lo = (lo << 8) | be[8 + k];
        }
        PyObject *s = PyUnicode_New(hl + 26 + tl, 127);
        if (s == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        Py_UCS1 *d = PyUnicode_1BYTE_DATA(s);
        memcpy(d, hd, (size_t)hl);
        for (int k = 0; k < 26; k++)
            d[hl + k] = (Py_UCS1)CROCKFORD_DIGITS[ulid_digit(hi, lo, 125 - 5 * k)];
        memcpy(d + hl + 26, td, (size_t)tl);
        PyList_SET_ITEM(out, i, s);
    }
    return out;
}

/* ============================================================ compaction input views
 *
 * identity_input_views(views, paths, sst_map, l0_ids) -> list: for compaction planning
 * (input_views, through slatelib/format/seam.py), the InputView of each view that is a
 * plain identity view: exactly an SstView with no visible range whose SST is in sst_map as
 * exactly an SstHandle with exactly an SsTableInfo holding bytes (or None) keys and int
 * offsets. Such an entry is
 *     InputView(view, TaskView(view, handle, path),
 *               BytesRange(Bound(INCLUDED, first_entry or b""),
 *                          Bound(INCLUDED, last_entry) or UNBOUNDED when it is None),
 *               index_offset + index_len, view.id in l0_ids)
 * (compaction_source.view_range_and_size's identity case). Every other entry is None: the
 * caller builds it, or raises its error, in Python. The objects are created untracked by
 * the cyclic GC: each is frozen and holds only older objects (see untrack_frozen above).
 * configure_planning(InputView, TaskView, BytesRange, Bound, INCLUDED, UNBOUNDED) first:
 * core classes only (slatelib/core/compaction_inputs.py, slatelib/core/ranges.py), passed
 * once at import by slatelib/format/manifest_native.py, as configure() is for the
 * manifest's classes. */

static SlotClass P_IV, P_TV, P_RANGE, P_BOUND;
static PyObject *P_INCLUDED = NULL, *P_UNBOUNDED = NULL, *P_EMPTY = NULL;
static int planning_configured = 0;
static const char *IV_NAMES[] = {"view", "task_view", "effective", "size", "l0"};
static const char *TV_NAMES[] = {"view", "handle", "path"};
static const char *RANGE_NAMES[] = {"start", "end"};
static const char *BOUND_NAMES[] = {"kind", "key"};

static PyObject *configure_planning(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *iv, *tv, *rng, *bound, *included, *unbounded;
    if (!PyArg_ParseTuple(args, "OOOOOO:configure_planning", &iv, &tv, &rng, &bound,
                          &included, &unbounded))
        return NULL;
    if (slot_class(&P_IV, iv, IV_NAMES, 5) < 0 || slot_class(&P_TV, tv, TV_NAMES, 3) < 0 ||
        slot_class(&P_RANGE, rng, RANGE_NAMES, 2) < 0 ||
        slot_class(&P_BOUND, bound, BOUND_NAMES, 2) < 0)
        return NULL;
    if (P_EMPTY == NULL && (P_EMPTY = PyBytes_FromStringAndSize("", 0)) == NULL)
        return NULL;
    Py_INCREF(included);
    Py_XSETREF(P_INCLUDED, included);
    Py_INCREF(unbounded);
    Py_XSETREF(P_UNBOUNDED, unbounded);
    planning_configured = 1;
    Py_RETURN_NONE;
}

/* Borrowed; NULL when the slot is unset. */
static inline PyObject *slot_of(PyObject *obj, SlotClass *sc, int i)
{
    return *(PyObject **)((char *)obj + sc->off[i]);
}

/* A new untracked instance of sc with its fields (new references taken here). */
static PyObject *build_untracked(SlotClass *sc, PyObject **fields)
{
    PyObject *o = new_atomic_instance(sc);
    if (o == NULL)
        return NULL;
    for (int i = 0; i < sc->nfields; i++) {
        Py_INCREF(fields[i]);
        set_slot(o, sc, i, fields[i]);
    }
    return o;
}

static PyObject *identity_input_view(PyObject *view, PyObject *path, PyObject *sst_map,
                                     PyObject *l0_ids)
{
    /* Returns a new InputView, Py_None (new reference) when not a plain identity view, or
     * NULL with an exception. */
    if (Py_TYPE(view) != VIEW.tp || slot_of(view, &VIEW, V_RANGE) != Py_None)
        Py_RETURN_NONE;
    PyObject *vid = slot_of(view, &VIEW, V_ID), *sid = slot_of(view, &VIEW, V_SST);
    if (vid == NULL || sid == NULL)
        Py_RETURN_NONE;
    PyObject *handle = PyDict_GetItemWithError(sst_map, sid);
    if (handle == NULL) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    if (Py_TYPE(handle) != HANDLE.tp)
        Py_RETURN_NONE;
    PyObject *info = slot_of(handle, &HANDLE, H_INFO);
    if (info == NULL || Py_TYPE(info) != INFO.tp)
        Py_RETURN_NONE;
    PyObject *first = slot_of(info, &INFO, INFO_FIRST), *last = slot_of(info, &INFO, INFO_LAST);
    PyObject *ioff = slot_of(info, &INFO, INFO_INDEX_OFF);
    PyObject *ilen = slot_of(info, &INFO, INFO_INDEX_LEN);
    if (first == NULL || last == NULL || ioff == NULL || ilen == NULL ||
        !(first == Py_None || PyBytes_CheckExact(first)) ||
        !(last == Py_None || PyBytes_CheckExact(last)) || !PyLong_CheckExact(ioff) ||
        !PyLong_CheckExact(ilen))
        Py_RETURN_NONE;
    int is_l0 = PySet_Contains(l0_ids, vid);
    if (is_l0 < 0)
        return NULL;
    PyObject *start_key = (first == Py_None || PyBytes_GET_SIZE(first) == 0) ? P_EMPTY : first;
    PyObject *f[5];
    PyObject *start = NULL, *end = NULL, *eff = NULL, *tv = NULL, *size = NULL, *iv = NULL;
    f[0] = P_INCLUDED;
    f[1] = start_key;
    if ((start = build_untracked(&P_BOUND, f)) == NULL)
        goto done;
    if (last == Py_None) {
        end = P_UNBOUNDED;
        Py_INCREF(end);
    } else {
        f[1] = last;
        if ((end = build_untracked(&P_BOUND, f)) == NULL)
            goto done;
    }
    f[0] = start;
    f[1] = end;
    if ((eff = build_untracked(&P_RANGE, f)) == NULL)
        goto done;
    f[0] = view;
    f[1] = handle;
    f[2] = path;
    if ((tv = build_untracked(&P_TV, f)) == NULL)
        goto done;
    if ((size = PyNumber_Add(ioff, ilen)) == NULL)
        goto done;
    f[0] = view;
    f[1] = tv;
    f[2] = eff;
    f[3] = size;
    f[4] = is_l0 ? Py_True : Py_False;
    iv = build_untracked(&P_IV, f);
done:
    Py_XDECREF(start);
    Py_XDECREF(end);
    Py_XDECREF(eff);
    Py_XDECREF(tv);
    Py_XDECREF(size);
    return iv;
}

static PyObject *identity_input_views(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *views, *paths, *sst_map, *l0_ids;
    if (!PyArg_ParseTuple(args, "O!O!O!O!:identity_input_views", &PyList_Type, &views,
                          &PyList_Type, &paths, &PyDict_Type, &sst_map, &PySet_Type, &l0_ids))
        return NULL;
    if (check_configured() < 0)
        return NULL;
    if (!planning_configured) {
        PyErr_SetString(PyExc_RuntimeError, "identity_input_views: configure_planning() first");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(views);
    if (PyList_GET_SIZE(paths) != n) {
        PyErr_SetString(PyExc_ValueError, "identity_input_views: one path per view");
        return NULL;
    }
    PyObject *out = PyList_New(n);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *iv = identity_input_view(PyList_GET_ITEM(views, i), PyList_GET_ITEM(paths, i),
                                           sst_map, l0_ids);
        if (iv == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, iv);
    }
    return out;
}

/* encode_v2(manifest, view_problem, size_hint) -> bytes (version prefix included) */
static PyObject *encode_v2(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *m, *problem_cb;
    Py_ssize_t hint;
    if (!PyArg_ParseTuple(args, "OOn:encode_v2", &m, &problem_cb, &hint))
        return NULL;
    if (check_configured() < 0)
        return NULL;
    uint64_t sc[7];
    for (int i = 0; i < 7; i++)
        if (attr_u(m, SCALARS[i], 64, &sc[i]) < 0)
            return NULL;
    PyObject *clock_o = PyObject_GetAttrString(m, "last_l0_clock_tick");
    if (clock_o == NULL)
        return NULL;
    if (!PyLong_Check(clock_o)) {
        Py_DECREF(clock_o);
        PyErr_SetString(PyExc_TypeError, "last_l0_clock_tick is not an int");
        return NULL;
    }
    long long clock = PyLong_AsLongLong(clock_o);
    Py_DECREF(clock_o);
    if (clock == -1 && PyErr_Occurred())
        return NULL;

    enum { F_SSTS, F_L0, F_LAST, F_RUNS, F_SEGS, F_EXTR, F_CPS, F_EXT, F_TRACK, F_DESTR, F_INIT,
           F_MAP, NF };
    static const char *names[NF] = {"ssts", "l0", "last_compacted_l0_sst_view_id", "compacted",
                                    "segments", "segment_extractor_name", "checkpoints",
                                    "external_dbs", "sequence_tracker", "destroyed_at_s",
                                    "initialized", "sst_map"};
    PyObject *f[NF] = {NULL};
    PyObject *result = NULL;
    Builder bd;
    int have_bd = 0;
    /* sst_map last: it is not needed (nor built) when the tree is resumed */
    for (int i = 0; i < F_MAP; i++)
        if ((f[i] = PyObject_GetAttrString(m, names[i])) == NULL)
            goto done;
    uint64_t destroyed = 0;
    if (f[F_DESTR] != Py_None && as_u64(f[F_DESTR], &destroyed) < 0)
        goto done;
    int initialized = PyObject_IsTrue(f[F_INIT]);
    if (initialized < 0)
        goto done;
    if (bd_init(&bd, hint > 1024 ? hint : 1024) < 0)
        goto done;
    have_bd = 1;
    int64_t ssts, tree[3], segs = 0, extr = 0, cps, ext = 0, track = 0, off[3];
    int reused = snap_restore(&bd, f[F_SSTS], f[F_L0], f[F_LAST], f[F_RUNS], off, &tree[1]);
    if (reused < 0)
        goto done;
    if (reused) { /* the same ssts tuple: its map is the one kept with it */
        Py_INCREF(SNAP.known);
        f[F_MAP] = SNAP.known;
    } else if ((f[F_MAP] = PyObject_GetAttrString(m, names[F_MAP])) == NULL) {
        goto done;
    }
    ViewCtx ctx = {f[F_MAP], problem_cb};
    if (reused) {
        ssts = off[0];
        tree[0] = off[1];
        tree[2] = off[2];
    } else {
        if ((ssts = add_vector_of(&bd, f[F_SSTS], add_handle_cb, NULL)) < 0)
            goto done;
        if (add_tree(&bd, f[F_L0], f[F_LAST], f[F_RUNS], &ctx, tree) < 0)
            goto done;
        off[0] = ssts;
        off[1] = tree[0];
        off[2] = tree[2];
        snap_save(&bd, f[F_SSTS], f[F_L0], f[F_LAST], f[F_RUNS], f[F_MAP], off, tree[1]);
    }
    if (f[F_SEGS] != Py_None && (segs = add_vector_of(&bd, f[F_SEGS], add_segment, &ctx)) < 0)
        goto done;
    if (f[F_EXTR] != Py_None && (extr = add_string_obj(&bd, f[F_EXTR])) < 0)
        goto done;
    if ((cps = add_vector_of(&bd, f[F_CPS], add_checkpoint, NULL)) < 0)
        goto done;
    int ext_true = PyObject_IsTrue(f[F_EXT]);
    if (ext_true < 0)
        goto done;
    if (ext_true && (ext = add_vector_of(&bd, f[F_EXT], add_external, NULL)) < 0)
        goto done;
    if (f[F_TRACK] != Py_None && (track = add_bytes_obj(&bd, f[F_TRACK])) < 0)
        goto done;
    start_object(&bd, 19);
    if (f[F_DESTR] != Py_None && scalar_slot(&bd, 18, destroyed, 8, 0, 0) < 0)
        goto done;
    /* _add_scalars(clock_slot=11, seq_slot=13) */
    if (scalar_slot(&bd, 14, sc[5], 8, 1, 0) < 0 || scalar_slot(&bd, 13, sc[4], 8, 1, 0) < 0 ||
        scalar_slot(&bd, 11, (uint64_t)clock, 8, 1, 0) < 0 ||
        scalar_slot(&bd, 6, sc[3], 8, 1, 0) < 0 || scalar_slot(&bd, 5, sc[2], 8, 1, 0) < 0 ||
        scalar_slot(&bd, 4, sc[1], 8, 1, 0) < 0 || scalar_slot(&bd, 3, sc[0], 8, 1, 0) < 0 ||
        scalar_slot(&bd, 0, sc[6], 8, 1, 0) < 0)
        goto done;
    if (offset_slot(&bd, 17, extr) < 0 || offset_slot(&bd, 16, segs) < 0 ||
        offset_slot(&bd, 15, track) < 0 || offset_slot(&bd, 12, cps) < 0 ||
        offset_slot(&bd, 10, tree[2]) < 0 || offset_slot(&bd, 9, tree[0]) < 0 ||
        offset_slot(&bd, 8, ssts) < 0 || offset_slot(&bd, 7, tree[1]) < 0 ||
        offset_slot(&bd, 1, ext) < 0 || scalar_slot(&bd, 2, initialized ? 1 : 0, 1, 1, 0) < 0)
        goto done;
    int64_t root = end_object(&bd);
    if (root < 0)
        goto done;
    static const unsigned char prefix[2] = {0, 2}; /* MANIFEST_FORMAT_VERSION, big-endian u16 */
    result = bd_finish(&bd, root, prefix, 2);
done:
    if (have_bd)
        bd_free(&bd);
    for (int i = 0; i < NF; i++)
        Py_XDECREF(f[i]);
    return result;
}

/* ============================================================ compactions file (format §6)
 *
 * The compactions file (slatelib/format/compactions_codec.py is the reference) lists the
 * recent compactions; what makes it large is their output SSTs (CompactedSsTable, the same
 * SsTableInfo and Ulid tables as a manifest's SST entries) and their L0 view ids. It is
 * rewritten at every compaction state change and every worker heartbeat.
 *
 *   - encode_compactions(compactions, size_hint) -> bytes: the whole file (version prefix
 *     included), byte for byte what encode_compactions_py writes, with the builder, the
 *     SsTableInfo/Ulid/range encoders and the vector code of the manifest encoder above.
 *   - read_compacted(data, start, vec_start, n, range_cb) -> tuple[CompactedSsTable]: an
 *     output-SST vector, with read_sst_entry (shared with read_handles); a visible range
 *     is decoded by the reference through range_cb(pos). L0 view id vectors are read with
 *     read_ulids. The rest of the file (a few small tables per compaction) is walked by
 *     the reference code.
 *
 * configure_compactions(CompactedSsTable, TieredCompactionSpec, DrainSegmentSpec, statuses)
 * first (statuses: the CompactionStatus members indexed by value). */

enum { C_ID, C_INFO, C_RANGE, C_FV };
static const char *CSST_NAMES[] = {"id", "info", "visible_range", "format_version"};
static SlotClass CSST;
static PyObject *SPEC_TIERED_CLS = NULL, *SPEC_DRAIN_CLS = NULL, *STATUSES = NULL;
static int compactions_configured = 0;

static PyObject *configure_compactions(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *csst, *tiered, *drain, *statuses;
    if (!PyArg_ParseTuple(args, "OO!O!O!:configure_compactions", &csst, &PyType_Type, &tiered,
                          &PyType_Type, &drain, &PyTuple_Type, &statuses))
        return NULL;
    if (slot_class(&CSST, csst, CSST_NAMES, 4) < 0)
        return NULL;
    Py_INCREF(tiered);
    Py_XSETREF(SPEC_TIERED_CLS, tiered);
    Py_INCREF(drain);
    Py_XSETREF(SPEC_DRAIN_CLS, drain);
    Py_INCREF(statuses);
    Py_XSETREF(STATUSES, statuses);
    compactions_configured = 1;
    Py_RETURN_NONE;
}

static int check_compactions_configured(void)
{
    if (check_configured() < 0)
        return -1;
    if (!compactions_configured) {
        PyErr_SetString(PyExc_RuntimeError,
                        "slatelib._manifest: configure_compactions() was not called");
        return -1;
    }
    return 0;
}

/* read_compacted(data, start, vec_start, n, range_cb) -> tuple[CompactedSsTable]:
 * compactions_codec._read_outputs (manifest_parts.read_compacted for each entry). */
static PyObject *read_compacted(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *data, *range_cb;
    Py_ssize_t start, vstart, n;
    if (!PyArg_ParseTuple(args, "OnnnO:read_compacted", &data, &start, &vstart, &n, &range_cb))
        return NULL;
    if (check_compactions_configured() < 0)
        return NULL;
    Py_buffer view;
    Buf b;
    if (parse_buf(data, start, &view, &b) < 0)
        return NULL;
    PyObject *out = NULL;
    if (check(&b, vstart, (int64_t)n * 4) < 0)
        goto done;
    if ((out = PyTuple_New(n)) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        Tbl t;
        PyObject *id, *info, *fv, *rng;
        if (vec_table(&b, vstart, i, &t) < 0)
            goto fail;
        int64_t rpos = target(&b, &t, 2);
        if (rpos < 0 || read_sst_entry(&b, &t, 3, &id, &info, &fv) < 0)
            goto fail;
        if (rpos) {
            rng = PyObject_CallFunction(range_cb, "L", (long long)rpos);
        } else {
            rng = Py_None;
            Py_INCREF(rng);
        }
        /* Without a range the entry holds only atoms and an untracked info: untracked
         * (see new_atomic_instance); a range is an ordinary tracked object. */
        PyObject *o = rng == NULL ? NULL : rpos ? new_instance(&CSST) : new_atomic_instance(&CSST);
        if (o == NULL) {
            Py_DECREF(id);
            Py_DECREF(info);
            Py_DECREF(fv);
            Py_XDECREF(rng);
            goto fail;
        }
        set_slot(o, &CSST, C_ID, id);
        set_slot(o, &CSST, C_INFO, info);
        set_slot(o, &CSST, C_RANGE, rng);
        set_slot(o, &CSST, C_FV, fv);
        PyTuple_SET_ITEM(out, i, o);
    }
    goto done;
fail:
    Py_CLEAR(out);
done:
    PyBuffer_Release(&view);
    return out;
}

/* shared_tables.range_non_empty, for ranges whose bound kinds are ints and keys exactly
 * bytes: 1 non-empty, 0 empty, -1 error (anything else is refused: the reference decides). */
static int range_non_empty_obj(PyObject *rng)
{
    PyObject *bd[2] = {NULL, NULL}, *key[2] = {NULL, NULL};
    uint64_t kind[2];
    int r = -1;
    static const char *ends[2] = {"start", "end"};
    for (int i = 0; i < 2; i++) {
        if ((bd[i] = PyObject_GetAttrString(rng, ends[i])) == NULL)
            goto done;
        PyObject *k = PyObject_GetAttrString(bd[i], "kind");
        if (k == NULL)
            goto done;
        int bad = as_u64(k, &kind[i]);
        Py_DECREF(k);
        if (bad < 0 || (key[i] = PyObject_GetAttrString(bd[i], "key")) == NULL)
            goto done;
    }
    if (kind[0] == 1 || kind[1] == 1) { /* BoundKind.UNBOUNDED */
        r = 1;
        goto done;
    }
    if (!PyBytes_CheckExact(key[0]) || !PyBytes_CheckExact(key[1])) {
        PyErr_SetString(PyExc_TypeError, "range keys are not bytes");
        goto done;
    }
    Py_ssize_t ls = PyBytes_GET_SIZE(key[0]), le = PyBytes_GET_SIZE(key[1]);
    int c = memcmp(PyBytes_AS_STRING(key[0]), PyBytes_AS_STRING(key[1]), ls < le ? ls : le);
    if (c == 0)
        c = ls < le ? -1 : ls > le ? 1 : 0;
    r = (kind[0] == 2 && kind[1] == 2) ? c <= 0 : c < 0; /* both INCLUDED: start <= end */
done:
    for (int i = 0; i < 2; i++) {
        Py_XDECREF(bd[i]);
        Py_XDECREF(key[i]);
    }
    return r;
}

/* shared_tables.add_range with its emptiness check */
static int64_t add_checked_range(Builder *bd, PyObject *rng)
{
    int ne = range_non_empty_obj(rng);
    if (ne < 0)
        return -1;
    if (!ne) {
        PyErr_SetString(PyExc_ValueError, "empty key range");
        return -1;
    }
    return add_range(bd, rng);
}

/* manifest_parts.add_compacted(b, s.id, s.info, s.visible_range, s.format_version) */
static int64_t add_compacted(Builder *bd, PyObject *s, void *Py_UNUSED(unused))
{
    PyObject *f[4] = {NULL, NULL, NULL, NULL};
    int64_t r = -1, sid, inf, rng = 0;
    uint64_t fv = 0;
    for (int i = 0; i < 4; i++)
        if ((f[i] = get_field(s, &CSST, CSST_NAMES, i)) == NULL)
            goto done;
    if ((sid = add_ulid_obj(bd, f[C_ID])) < 0 || (inf = add_info(bd, f[C_INFO])) < 0)
        goto done;
    if (f[C_RANGE] != Py_None && (rng = add_checked_range(bd, f[C_RANGE])) < 0)
        goto done;
    if (f[C_FV] != Py_None && as_uint(f[C_FV], 16, &fv) < 0)
        goto done;
    start_object(bd, 4);
    if (offset_slot(bd, 2, rng) < 0 || offset_slot(bd, 1, inf) < 0 || offset_slot(bd, 0, sid) < 0)
        goto done;
    if (f[C_FV] != Py_None && scalar_slot(bd, 3, fv, 2, 0, 0) < 0) /* default None: written */
        goto done;
    r = end_object(bd);
done:
    for (int i = 0; i < 4; i++)
        Py_XDECREF(f[i]);
    return r;
}

/* getattr(obj, name), and whether it is truthy: 1/0 with *out a new reference, -1 error. */
static int attr_truthy(PyObject *obj, const char *name, PyObject **out)
{
    if ((*out = PyObject_GetAttrString(obj, name)) == NULL)
        return -1;
    int t = PyObject_IsTrue(*out);
    if (t < 0)
        Py_CLEAR(*out);
    return t;
}

/* flatbuf.add_u32_vector of a sequence of ints; *min_out gets the smallest (0 when empty). */
static int64_t add_u32_vector(Builder *bd, PyObject *seq, uint64_t *min_out)
{
    PyObject *fast = PySequence_Fast(seq, "expected a sequence");
    if (fast == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    uint64_t *vals = PyMem_Malloc(sizeof(uint64_t) * (size_t)(n ? n : 1));
    int64_t r = -1;
    if (vals == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    *min_out = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (as_uint(PySequence_Fast_GET_ITEM(fast, i), 32, &vals[i]) < 0)
            goto done;
        if (i == 0 || vals[i] < *min_out)
            *min_out = vals[i];
    }
    if (bd == NULL) { /* only the minimum */
        r = 0;
        goto done;
    }
    if (start_vector(bd, 4, n, 4) < 0)
        goto done;
    for (Py_ssize_t i = n - 1; i >= 0; i--)
        if (prepend(bd, vals[i], 4) < 0)
            goto done;
    r = end_vector(bd, n);
done:
    PyMem_Free(vals);
    Py_DECREF(fast);
    return r;
}

/* compactions_codec._add_spec: the spec table; *type gets SPEC_TIERED (1) or SPEC_DRAIN (2). */
static int64_t add_spec(Builder *bd, PyObject *spec, uint64_t version, int *type)
{
    PyObject *legacy_o = NULL, *views_o = NULL, *runs_o = NULL, *seg_o = NULL;
    int64_t r = -1, legacy = 0, views = 0, runs = 0, seg = 0;
    uint64_t dest = 0, min_run = 0;
    int tiered = PyObject_IsInstance(spec, SPEC_TIERED_CLS);
    if (tiered < 0)
        return -1;
    if (!tiered) {
        int drain = PyObject_IsInstance(spec, SPEC_DRAIN_CLS);
        if (drain < 0)
            return -1;
        if (!drain) {
            PyErr_SetString(PyExc_ValueError, "unknown compaction spec");
            return -1;
        }
    }
    *type = tiered ? 1 : 2;
    int runs_true = attr_truthy(spec, "sorted_runs", &runs_o);
    if (runs_true < 0)
        goto done;
    if (tiered) {
        if (attr_u(spec, "destination", 32, &dest) < 0)
            goto done;
        if (version < 2) { /* destination must be min(sorted_runs, default=0) */
            if (runs_true && add_u32_vector(NULL, runs_o, &min_run) < 0)
                goto done;
            if (dest != min_run) {
                PyErr_SetString(PyExc_ValueError, "version 1 cannot store this destination");
                goto done;
            }
        }
        int t = attr_truthy(spec, "ssts", &legacy_o);
        if (t < 0 || (t && (legacy = add_vector_of(bd, legacy_o, add_ulid_cb, NULL)) < 0))
            goto done;
    }
    int t = attr_truthy(spec, "l0_view_ids", &views_o);
    if (t < 0 || (t && (views = add_vector_of(bd, views_o, add_ulid_cb, NULL)) < 0))
        goto done;
    if (runs_true && (runs = add_u32_vector(bd, runs_o, &min_run)) < 0)
        goto done;
    if ((seg_o = PyObject_GetAttrString(spec, "segment")) == NULL)
        goto done;
    if (seg_o != Py_None && (seg = add_bytes_obj(bd, seg_o)) < 0)
        goto done;
    if (!tiered) {
        if (seg_o == Py_None) { /* required: the reference cannot write it either */
            PyErr_SetString(PyExc_ValueError, "drain segment spec without a segment");
            goto done;
        }
        start_object(bd, 3);
        if (offset_slot(bd, 2, runs) < 0 || offset_slot(bd, 1, views) < 0 ||
            offset_slot(bd, 0, seg) < 0)
            goto done;
    } else {
        start_object(bd, 5);
        if ((version >= 2 && scalar_slot(bd, 4, dest, 4, 1, 0) < 0) ||
            offset_slot(bd, 3, seg) < 0 || offset_slot(bd, 2, views) < 0 ||
            offset_slot(bd, 1, runs) < 0 || offset_slot(bd, 0, legacy) < 0)
            goto done;
    }
    r = end_object(bd);
done:
    Py_XDECREF(legacy_o);
    Py_XDECREF(views_o);
    Py_XDECREF(runs_o);
    Py_XDECREF(seg_o);
    return r;
}

/* The output-SST vector of a compaction or subcompaction. */
static int64_t add_outputs(Builder *bd, PyObject *ssts)
{
    return add_vector_of(bd, ssts, add_compacted, NULL);
}

/* compactions_codec._add_ctx: one Subcompaction */
static int64_t add_subcompaction(Builder *bd, PyObject *s, void *Py_UNUSED(unused))
{
    PyObject *rng_o = NULL, *outs_o = NULL;
    int64_t r = -1, rng, outs = 0;
    if ((rng_o = PyObject_GetAttrString(s, "range")) == NULL ||
        (rng = add_checked_range(bd, rng_o)) < 0)
        goto done;
    int t = attr_truthy(s, "output_ssts", &outs_o);
    if (t < 0 || (t && (outs = add_outputs(bd, outs_o)) < 0))
        goto done;
    start_object(bd, 2);
    if (offset_slot(bd, 1, outs) < 0 || offset_slot(bd, 0, rng) < 0)
        goto done;
    r = end_object(bd);
done:
    Py_XDECREF(rng_o);
    Py_XDECREF(outs_o);
    return r;
}

/* compactions_codec._add_ctx */
static int64_t add_ctx(Builder *bd, PyObject *ctx)
{
    PyObject *subs_o = NULL;
    int64_t r = -1, subs = 0;
    uint64_t retention;
    int t = attr_truthy(ctx, "subcompactions", &subs_o);
    if (t < 0 || (t && (subs = add_vector_of(bd, subs_o, add_subcompaction, NULL)) < 0))
        goto done;
    if (attr_u(ctx, "retention_min_seq", 64, &retention) < 0)
        goto done;
    start_object(bd, 2);
    if (scalar_slot(bd, 1, retention, 8, 1, 0) < 0 || offset_slot(bd, 0, subs) < 0)
        goto done;
    r = end_object(bd);
done:
    Py_XDECREF(subs_o);
    return r;
}

/* compactions_codec._add_compaction (ctx: the file's format version) */
static int64_t add_compaction(Builder *bd, PyObject *c, void *vctx)
{
    uint64_t version = *(uint64_t *)vctx, status;
    PyObject *st = NULL, *id = NULL, *spec_o = NULL, *worker_o = NULL, *ctx_o = NULL,
             *outs_o = NULL;
    int64_t r = -1, cid, spec, worker = 0, ctx = 0, outs;
    int spec_type = 0;
    if ((st = PyObject_GetAttrString(c, "status")) == NULL)
        goto done;
    /* `status in CompactionStatus`: a member, or an int (bool) equal to one */
    if (!is_member(STATUSES, st) && !PyLong_CheckExact(st) && !PyBool_Check(st)) {
        PyErr_SetString(PyExc_TypeError, "unexpected compaction status type");
        goto done;
    }
    if (as_u64(st, &status) < 0)
        goto done;
    if (status >= (uint64_t)PyTuple_GET_SIZE(STATUSES)) {
        PyErr_SetString(PyExc_ValueError, "invalid compaction status");
        goto done;
    }
    if ((id = PyObject_GetAttrString(c, "id")) == NULL || (cid = add_ulid_obj(bd, id)) < 0)
        goto done;
    if ((spec_o = PyObject_GetAttrString(c, "spec")) == NULL ||
        (spec = add_spec(bd, spec_o, version, &spec_type)) < 0)
        goto done;
    if ((worker_o = PyObject_GetAttrString(c, "worker")) == NULL)
        goto done;
    if (worker_o != Py_None) {
        PyObject *wid_o = PyObject_GetAttrString(worker_o, "worker_id");
        if (wid_o == NULL)
            goto done;
        int64_t wid = add_string_obj(bd, wid_o);
        Py_DECREF(wid_o);
        uint64_t hb;
        if (wid < 0 || attr_u(worker_o, "last_heartbeat_ms", 64, &hb) < 0)
            goto done;
        start_object(bd, 2);
        if (scalar_slot(bd, 1, hb, 8, 1, 0) < 0 || offset_slot(bd, 0, wid) < 0 ||
            (worker = end_object(bd)) < 0)
            goto done;
    }
    if ((ctx_o = PyObject_GetAttrString(c, "ctx")) == NULL)
        goto done;
    if (ctx_o != Py_None && (ctx = add_ctx(bd, ctx_o)) < 0)
        goto done;
    if ((outs_o = PyObject_GetAttrString(c, "output_ssts")) == NULL ||
        (outs = add_outputs(bd, outs_o)) < 0)
        goto done;
    start_object(bd, 8);
    if (offset_slot(bd, 7, ctx) < 0 || offset_slot(bd, 5, worker) < 0 ||
        offset_slot(bd, 4, outs) < 0 || offset_slot(bd, 2, spec) < 0 ||
        offset_slot(bd, 0, cid) < 0 || scalar_slot(bd, 6, ctx ? 1 : 0, 1, 1, 0) < 0 ||
        scalar_slot(bd, 3, status, 1, 1, 0) < 0 ||
        scalar_slot(bd, 1, (uint64_t)spec_type, 1, 1, 0) < 0)
        goto done;
    r = end_object(bd);
done:
    Py_XDECREF(st);
    Py_XDECREF(id);
    Py_XDECREF(spec_o);
    Py_XDECREF(worker_o);
    Py_XDECREF(ctx_o);
    Py_XDECREF(outs_o);
    return r;
}

/* encode_compactions(compactions, size_hint) -> bytes (version prefix included) */
static PyObject *encode_compactions(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *c, *items = NULL, *result = NULL;
    Py_ssize_t hint;
    uint64_t version, epoch;
    if (!PyArg_ParseTuple(args, "On:encode_compactions", &c, &hint))
        return NULL;
    if (check_compactions_configured() < 0)
        return NULL;
    if (attr_u(c, "format_version", 16, &version) < 0)
        return NULL;
    if (version != 1 && version != 2) {
        PyErr_SetString(PyExc_ValueError, "unsupported compactions format version");
        return NULL;
    }
    if (attr_u(c, "compactor_epoch", 64, &epoch) < 0)
        return NULL;
    if ((items = PyObject_GetAttrString(c, "recent_compactions")) == NULL)
        return NULL;
    Builder bd;
    if (bd_init(&bd, hint > 1024 ? hint : 1024) < 0) {
        Py_DECREF(items);
        return NULL;
    }
    int64_t vec = add_vector_of(&bd, items, add_compaction, &version);
    if (vec < 0)
        goto done;
    start_object(&bd, 2);
    if (scalar_slot(&bd, 0, epoch, 8, 1, 0) < 0 || offset_slot(&bd, 1, vec) < 0)
        goto done;
    unsigned char prefix[2] = {0, (unsigned char)version}; /* big-endian u16 */
    result = bd_finish(&bd, end_object(&bd), prefix, 2);
done:
    bd_free(&bd);
    Py_DECREF(items);
    return result;
}

/* ===================================================================== module */

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(SsTableInfo, SstHandle, SstView, SortedRun, compressions, sst_types, "
     "filter_formats): the classes to build and the enum members by value."},
    {"read_handles", read_handles, METH_VARARGS,
     "read_handles(data, start, vec_start, n) -> (tuple of SstHandle, dict id -> handle)"},
    {"read_views", read_views, METH_VARARGS,
     "read_views(data, start, vec_start, n, known, view_cb) -> tuple of SstView"},
    {"read_runs", read_runs, METH_VARARGS,
     "read_runs(data, start, vec_start, n, known, view_cb) -> tuple of SortedRun"},
    {"read_ulids", read_ulids, METH_VARARGS,
     "read_ulids(data, start, vec_start, n) -> tuple of int (a vector of Ulid tables)"},
    {"reuse_tree", reuse_tree, METH_VARARGS,
     "reuse_tree(data, ssts_pos, l0_pos, runs_pos, last_pos) -> (ssts, l0, compacted, last, "
     "sst_map) of the last encoded tree when data ends with it, else None"},
    {"forget_tree", forget_tree, METH_NOARGS, "forget_tree(): drop the kept tree"},
    {"ulid_names", ulid_names, METH_VARARGS,
     "ulid_names(head, tail, ids) -> list of head + Crockford ULID text + tail"},
    {"configure_planning", configure_planning, METH_VARARGS,
     "configure_planning(InputView, TaskView, BytesRange, Bound, INCLUDED, UNBOUNDED)"},
    {"identity_input_views", identity_input_views, METH_VARARGS,
     "identity_input_views(views, paths, sst_map, l0_ids) -> list of InputView or None"},
    {"untrack_frozen", untrack_frozen, METH_VARARGS,
     "untrack_frozen(objects, types) -> int: untrack objects of exactly these (frozen, "
     "acyclic) classes from the cyclic GC, and those of them they reach"},
    {"encode_v2", encode_v2, METH_VARARGS,
     "encode_v2(manifest, view_problem, size_hint) -> bytes of a version-2 manifest file"},
    {"configure_compactions", configure_compactions, METH_VARARGS,
     "configure_compactions(CompactedSsTable, TieredCompactionSpec, DrainSegmentSpec, "
     "statuses): the compactions-file classes and the CompactionStatus members by value."},
    {"read_compacted", read_compacted, METH_VARARGS,
     "read_compacted(data, start, vec_start, n, range_cb) -> tuple of CompactedSsTable"},
    {"encode_compactions", encode_compactions, METH_VARARGS,
     "encode_compactions(compactions, size_hint) -> bytes of a compactions file"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT,
    .m_name = "slatelib._manifest",
    .m_doc = "Native manifest codec (see slatelib/format/manifest_native.py).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__manifest(void) { return PyModule_Create(&moduledef); }
