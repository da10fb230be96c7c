/*
 * The block entry parser of slatelib._speedups, shared by _speedups.c (decode_block:
 * Python rows) and csrc/pipe.c (check_blocks: entries recorded with the GIL released).
 * Format §7.5-7.6. Reference: slatelib/format/block.py (decode_data_block and the v1
 * decoder); tests: tests/unit/format/test_native.py (differential and fuzzed blocks),
 * tests/unit/format/test_native_pipe.py; design: docs/rfcs/0015-native-pipeline.md.
 * Pure C, header-only (static inline: the parser is the hot loop of both callers).
 */
#ifndef SLATELIB_CSRC_BLOCK_H
#define SLATELIB_CSRC_BLOCK_H

#include "common.h"

#define FLAG_TOMBSTONE 0x01u
#define FLAG_HAS_EXPIRE_TS 0x02u
#define FLAG_HAS_CREATE_TS 0x04u
#define FLAG_MERGE_OPERAND 0x08u
#define KNOWN_FLAGS 0x0Fu
#define KIND_VALUE 0
#define KIND_TOMBSTONE 1
#define KIND_MERGE 2

/* i64 as stored: two's complement, big-endian. */
static inline int64_t u64_to_i64(uint64_t u)
{
    if (u <= (uint64_t)INT64_MAX) {
        return (int64_t)u;
    }
    return -(int64_t)(~u) - 1;
}

/* A varint of at most 6 bytes (the Python decoder's limit), read inside [pos, end). */
static inline int read_varint(const unsigned char *p, size_t end, size_t *pos, uint64_t *out)
{
    size_t i = *pos;
    uint64_t result = 0;
    for (int shift = 0; shift <= 35; shift += 7) {
        if (i >= end) {
            return -1;
        }
        unsigned b = p[i++];
        result |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) {
            *pos = i;
            *out = result;
            return 0;
        }
    }
    return -2; /* varint too long */
}

/* Kind of a row from its flags, or -1 for flags 0.17 rejects (format §7.6). */
static inline int kind_of_flags(unsigned flags)
{
    if (flags & ~KNOWN_FLAGS) {
        return -1;
    }
    if (flags & FLAG_TOMBSTONE) {
        return (flags & FLAG_MERGE_OPERAND) ? -1 : KIND_TOMBSTONE;
    }
    return (flags & FLAG_MERGE_OPERAND) ? KIND_MERGE : KIND_VALUE;
}

/* ------------------------------------------------------------------ the block entry parser */

/*
 * The one parser of v1 / v2 block entries (format §7.5-7.6): decode_block (Python rows) and
 * csrc/pipe.c's check_blocks (entries recorded without Python objects, GIL released) both
 * walk a block with it, so what is rejected, and with which message, exists once. Pure C:
 * no Python calls, safe without the GIL. Every read is bounds-checked against `end` (where
 * the v2 restart array / the v1 offset array begins).
 *
 * An entry's key is base[0:shared] + p[kstart:kstart + unshared], where `base` is the key
 * of the previous entry (v2) or of the block's first entry (v1): the caller holds the key
 * bytes and replaces its base with the entry's key when `sets_base` is set.
 */
typedef struct {
    size_t shared, kstart, unshared; /* the key, as above */
    size_t vstart, vlen;             /* the value p[vstart:vstart + vlen]; vlen 0: tombstone */
    uint64_t seq, exp, cre;          /* exp / cre: raw big-endian u64 (see u64_to_i64) */
    int kind, has_exp, has_cre;      /* v1: a tombstone's expire_ts is dropped (format §7.5) */
    int sets_base;                   /* this entry's key is the base of the next entries */
} BlockEntry;

typedef struct {
    const unsigned char *p;
    size_t end;      /* entries lie in p[0:end] */
    size_t pos;      /* v2: offset of the next entry */
    size_t i, count; /* v1: index of the next entry, number of entries */
    size_t base_len; /* length of the current base key */
    int version;
    const char *err; /* why the block is malformed (after a -1) */
} BlockIter;

/* Start on the block payload p[0:n] of format `version` (1 or 2). 0, or -1 (it->err). */
static inline int block_iter_init(BlockIter *it, int version, const unsigned char *p, size_t n)
{
    const char *bad = version == 2 ? "bad restart trailer" : "bad offset trailer";
    it->p = p;
    it->pos = it->i = it->base_len = 0;
    it->version = version;
    it->err = NULL;
    if (n < 2) {
        it->err = bad;
        return -1;
    }
    size_t k = load_be16(p + n - 2); /* v2: restart points; v1: entries */
    if (2 + 2 * k > n) {
        it->err = bad;
        return -1;
    }
    it->end = n - 2 - 2 * k;
    it->count = k;
    if (version == 2 && k == 0 && it->end > 0) {
        it->err = bad;
        return -1;
    }
    return 0;
}

#define ITER_FAIL(msg) \
    do {               \
        it->err = (msg); \
        return -1;     \
    } while (0)

/* The next entry into *e. 1: an entry, 0: the block ended, -1: malformed (it->err). */
static inline int block_iter_next(BlockIter *it, BlockEntry *e)
{
    const unsigned char *p = it->p;
    const size_t end = it->end;
    const char *past;
    size_t pos;
    uint64_t shared, unshared, vlen = 0;
    if (it->version == 2) {
        past = "row runs past the end of the block";
        pos = it->pos;
        if (pos >= end) {
            return 0;
        }
        int rc = read_varint(p, end, &pos, &shared);
        if (rc == 0) {
            rc = read_varint(p, end, &pos, &unshared);
        }
        if (rc == 0) {
            rc = read_varint(p, end, &pos, &vlen);
        }
        if (rc != 0) {
            ITER_FAIL(rc == -2 ? "varint too long" : past);
        }
        if (shared > it->base_len) {
            ITER_FAIL("shared prefix longer than previous key");
        }
        if (unshared > end - pos) {
            ITER_FAIL(past);
        }
        e->kstart = pos;
        pos += (size_t)unshared;
        if (vlen > end - pos) {
            ITER_FAIL(past);
        }
        e->vstart = pos;
        pos += (size_t)vlen;
    } else {
        past = "row runs past the offset array";
        if (it->i >= it->count) {
            return 0;
        }
        pos = load_be16(p + end + 2 * it->i);
        if (pos > end || end - pos < 4) {
            ITER_FAIL(past);
        }
        shared = load_be16(p + pos);
        unshared = load_be16(p + pos + 2);
        pos += 4;
        if (it->i == 0) {
            shared = 0; /* the reference takes it from an empty first key */
        } else if (shared > it->base_len) {
            ITER_FAIL("prefix longer than the block's first key");
        }
        if (unshared > end - pos) {
            ITER_FAIL(past);
        }
        e->kstart = pos;
        pos += (size_t)unshared;
    }
    if (end - pos < 9) {
        ITER_FAIL(past);
    }
    e->seq = load_be64(p + pos);
    unsigned flags = p[pos + 8];
    pos += 9;
    e->has_exp = (flags & FLAG_HAS_EXPIRE_TS) != 0;
    e->has_cre = (flags & FLAG_HAS_CREATE_TS) != 0;
    e->exp = e->cre = 0;
    if (e->has_exp) {
        if (end - pos < 8) {
            ITER_FAIL(past);
        }
        e->exp = load_be64(p + pos);
        pos += 8;
    }
    if (e->has_cre) {
        if (end - pos < 8) {
            ITER_FAIL(past);
        }
        e->cre = load_be64(p + pos);
        pos += 8;
    }
    int kind = kind_of_flags(flags);
    if (kind < 0) {
        ITER_FAIL("invalid row flags");
    }
    if (it->version == 2) {
        it->pos = pos;
        e->sets_base = 1;
    } else {
        e->vstart = 0;
        if (kind != KIND_TOMBSTONE) {
            if (end - pos < 4) {
                ITER_FAIL(past);
            }
            vlen = load_be32(p + pos);
            pos += 4;
            if (vlen > end - pos) {
                ITER_FAIL("value runs past the end of the block");
            }
            e->vstart = pos;
        } else {
            e->has_exp = 0; /* v1 drops a tombstone's expire_ts on read (format §7.5) */
        }
        e->sets_base = it->i == 0;
        it->i++;
    }
    e->kind = kind;
    e->shared = (size_t)shared;
    e->unshared = (size_t)unshared;
    e->vlen = kind == KIND_TOMBSTONE ? 0 : (size_t)vlen;
    if (e->sets_base) {
        it->base_len = (size_t)(shared + unshared);
    }
    return 1;
}

#undef ITER_FAIL

#endif /* SLATELIB_CSRC_BLOCK_H */
