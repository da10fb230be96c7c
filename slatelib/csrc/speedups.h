/*
 * What slatelib._speedups' two translation units share: _speedups.c defines the block
 * writer (BlockWriterV2) and the range-stats accumulator, and csrc/pipe.c's sinks feed
 * them (Pipe.fill adds rows to a BlockWriterV2, Pipe.range_stats sums into a RangeAcc).
 * References: slatelib.format.block.BlockWriterPy (the writer) and
 * slatelib.core.rescale_check.RangeStats.of (range stats); tests:
 * tests/unit/format/test_native.py, tests/unit/format/test_native_pipe.py,
 * tests/unit/core/test_rescale_check.py; design: docs/rfcs/0015-native-pipeline.md.
 */
#ifndef SLATELIB_CSRC_SPEEDUPS_H
#define SLATELIB_CSRC_SPEEDUPS_H

#include "common.h"

/* ------------------------------------------------------------------ block writer */

/* A key kept by the writer: a growable C buffer, so adding a row creates no object. */
typedef struct {
    unsigned char *p;
    size_t len, cap;
    int set;
} KeyBuf;

/* Fixed-length prefix extractors ("fixed:N") of the SST's prefix bloom filters (format
 * §7.9): per extractor, the SipHash of each key's first N bytes (keys shorter than N have
 * no prefix), skipping a prefix equal to the one hashed just before. */
#define MAX_PREFIX_EXTRACTORS 8
typedef struct {
    size_t n;          /* prefix length */
    KeyBuf last;       /* the prefix hashed last (unset before the first) */
    uint64_t *hashes;
    size_t num, cap;
} PrefixHashes;

typedef struct {
    PyObject_HEAD
    Py_ssize_t block_size;
    int compacted;
    int want_hashes;
    int busy; /* guards against re-entrant calls (e.g. from a finalizer run by the GC) */
    /* the open block */
    unsigned char *data;
    size_t data_len, data_cap;
    uint16_t *restarts;
    size_t num_restarts, restarts_cap;
    Py_ssize_t block_rows;
    uint64_t block_puts, block_deletes, block_merges;
    KeyBuf block_first_key; /* unset while the block is empty */
    uint64_t block_first_seq;
    KeyBuf prev_block_last; /* last key of the previous finished block, or unset */
    uint64_t closed_bytes;  /* raw bytes of every block closed so far */
    /* the whole SST */
    uint64_t rows, puts, deletes, merges, raw_key_size, raw_val_size;
    PyObject *first_key;    /* NULL before the first row */
    KeyBuf last_key;        /* unset before the first row */
    uint64_t first_seq, last_seq;
    uint64_t *hashes;
    size_t num_hashes, hashes_cap;
    PrefixHashes prefixes[MAX_PREFIX_EXTRACTORS];
    size_t num_prefixes;
    PyObject *blocks; /* finished (raw, index_key, puts, deletes, merges) tuples */
    /* set_sink(): uncompressed blocks are framed straight into an SstBlocks' buffer (raw is
     * then the placed length); sink_off: one block did not fit, so the rest of this batch
     * goes out as bytes (placed blocks must precede them) until take_blocks() */
    PyObject *sink_owner;
    SlSink *sink;
    int sink_off;
} BlockWriterObject;

extern PyTypeObject BlockWriterType;

/* Adds one row given as raw fields (see _speedups.c). 0, or -1 with an exception; a
 * rejected row leaves the writer as it was. */
int bw_add_raw(BlockWriterObject *self, PyObject *key_obj, const unsigned char *k, size_t klen,
               uint64_t seq, int kind, const unsigned char *v, size_t vlen, int has_exp,
               int64_t exp, int has_cre, int64_t cre);
/* Adds one Python row (a row tuple or a Row). 0, or -1 with an exception. */
int bw_add_row(BlockWriterObject *self, PyObject *row);
/* Marks the writer busy (RuntimeError if it already is); the caller clears self->busy. */
int bw_enter(BlockWriterObject *self);

/* ------------------------------------------------------------------ range stats */

/* Add one row to the sums: keys, key + value bytes and the digest mod 2^128 (lo, hi). */
typedef struct {
    uint64_t keys;
    uint64_t nbytes;
    uint64_t lo;
    uint64_t hi;
} RangeAcc;

/* The GIL-free core: one row of raw bytes (klen < 2^32, checked by callers). */
void acc_raw(RangeAcc *acc, const unsigned char *k, size_t klen, const unsigned char *v,
             size_t vlen);
/* (keys, nbytes, digest) of an accumulator, as range_stats returns it. */
PyObject *acc_result(const RangeAcc *a);

#endif /* SLATELIB_CSRC_SPEEDUPS_H */
