/*
 * The one FlatBuffers builder of slatelib's C extensions: a port of the `flatbuffers` Python
 * Builder as slatelib.format.flatbuf drives it (back-to-front writing, Prep alignment,
 * vtable deduplication keyed by vtable content, Finish with minalign). The manifest and
 * compactions-file encoders (_manifest.c) and the SST index and stats encoders
 * (_sstwrite.c) build with it, so their bytes are what the Python Builder writes.
 *
 * References: slatelib/format/flatbuf.py (new_builder, finish, add_offset_vector) and the
 * flatbuffers package's Builder; slatelib/format/sst_index.py (encode_sst_index_with_builder)
 * and sst_stats.py (encode_sst_stats_with_builder). Tests: tests/unit/format/
 * test_manifest_native.py, test_compactions_codec_native.py and test_sst_native.py diff the
 * native bytes against the reference. Design: docs/rfcs/0010-manifest-codec.md and
 * docs/rfcs/0020-house-second-step.md.
 *
 * The hot steps (Prep, Place, the slots) are static inline here; the rest is csrc/fbbuild.c.
 * Errors: -1 with an exception (MemoryError, or ValueError past 2 GiB / on offset
 * arithmetic errors, as the Python Builder raises them).
 */
#ifndef SLATELIB_CSRC_FBBUILD_H
#define SLATELIB_CSRC_FBBUILD_H

#include "common.h"

typedef struct {
    unsigned char *buf;
    int64_t cap, head;
    int minalign;
    int64_t object_end;
    int nfields;
    int64_t vt[32];
    /* vtable dedup: open addressing over the offsets of written vtables */
    int64_t *vts;
    int64_t vts_cap, vts_n;
} Builder;

/* Builder.Offset(): bytes written so far */
#define OFFSET(bd) ((bd)->cap - (bd)->head)

/* Builder(cap). 0, or -1 with MemoryError. */
int bd_init(Builder *bd, int64_t cap);
void bd_free(Builder *bd);
/* Room for `needed` more bytes in front of the head (the buffer grows at its front). */
int bd_grow(Builder *bd, int64_t needed);
/* Builder.EndObject / WriteVtable: the object's offset, or -1. */
int64_t end_object(Builder *bd);
/* CreateByteVector (nul=0) / CreateString (nul=1) of p[0:n]: the vector's offset, or -1. */
int64_t create_bytes(Builder *bd, const char *p, int64_t n, int nul);
/* create_bytes of a bytes-like object / of a str (UTF-8, TypeError otherwise). */
int64_t add_bytes_obj(Builder *bd, PyObject *v);
int64_t add_string_obj(Builder *bd, PyObject *v);
/* flatbuf.add_offset_vector: a vector of already-created tables or strings. */
int64_t add_offset_vector(Builder *bd, const int64_t *offs, int64_t n);
/* Finish(root), returned as bytes: prefix[0:prefix_len] then the finished buffer. */
PyObject *bd_finish(Builder *bd, int64_t root, const unsigned char *prefix, size_t prefix_len);

/* Builder.Prep */
static inline int bd_prep(Builder *bd, int size, int64_t additional)
{
    if (size > bd->minalign)
        bd->minalign = size;
    int64_t align = (-(OFFSET(bd) + additional)) & (size - 1);
    int64_t needed = align + size + additional;
    if (bd->head < needed && bd_grow(bd, needed) < 0)
        return -1;
    if (align > 0) {
        bd->head -= align;
        memset(bd->buf + bd->head, 0, (size_t)align);
    }
    return 0;
}

static inline void place(Builder *bd, uint64_t v, int width)
{
    bd->head -= width;
    store_le(bd->buf + bd->head, v, width);
}

static inline int prepend(Builder *bd, uint64_t v, int width)
{
    if (bd_prep(bd, width, 0) < 0)
        return -1;
    place(bd, v, width);
    return 0;
}

/* Builder.PrependUOffsetTRelative */
static inline int prepend_uoffset(Builder *bd, int64_t off)
{
    if (bd_prep(bd, 4, 0) < 0)
        return -1;
    if (off > OFFSET(bd)) {
        PyErr_SetString(PyExc_ValueError, "flatbuffers: Offset arithmetic error.");
        return -1;
    }
    place(bd, (uint64_t)(OFFSET(bd) - off + 4), 4);
    return 0;
}

static inline void start_object(Builder *bd, int n)
{
    bd->nfields = n;
    memset(bd->vt, 0, sizeof(bd->vt[0]) * (size_t)n);
    bd->object_end = OFFSET(bd);
}

static inline void slot(Builder *bd, int i) { bd->vt[i] = OFFSET(bd); }

/* Prepend<Scalar>Slot with a default (has_default=0: default None, always written). */
static inline int scalar_slot(Builder *bd, int s, uint64_t v, int width, int has_default,
                              uint64_t dflt)
{
    if (has_default && v == dflt)
        return 0;
    if (prepend(bd, v, width) < 0)
        return -1;
    slot(bd, s);
    return 0;
}

static inline int offset_slot(Builder *bd, int s, int64_t off)
{
    if (off == 0)
        return 0;
    if (prepend_uoffset(bd, off) < 0)
        return -1;
    slot(bd, s);
    return 0;
}

/* StartVector(elem, n, align) */
static inline int start_vector(Builder *bd, int elem, int64_t n, int align)
{
    if (bd_prep(bd, 4, elem * n) < 0 || bd_prep(bd, align, elem * n) < 0)
        return -1;
    return 0;
}

static inline int64_t end_vector(Builder *bd, int64_t n)
{
    place(bd, (uint64_t)n, 4);
    return OFFSET(bd);
}

#endif /* SLATELIB_CSRC_FBBUILD_H */
