/*
 * The common parts of slatelib's C extensions (_speedups.c, csrc/pipe.c, _manifest.c,
 * _sstwrite.c): byte loads and stores, the one growth buffer, and the one CRC-32.
 * Design: docs/rfcs/0020-house-second-step.md ("C with common parts").
 *
 * References: the loads are struct.unpack_from("<Q" / ">Q" ...) as the format modules
 * (slatelib/format/) use them; sl_crc32 is zlib.crc32 (slatelib/format/checksum.py).
 * Tests: every native differential test (tests/unit/format/test_native*.py, test_sst_native.py,
 * test_manifest_native.py, test_compactions_codec_native.py) goes through these helpers,
 * and `make test-sanitize` runs them under AddressSanitizer and UndefinedBehaviorSanitizer.
 *
 * Each extension links its own copy of csrc/common.c (built with -fvisibility=hidden, so
 * nothing here is exported from the .so). C99.
 */
#ifndef SLATELIB_CSRC_COMMON_H
#define SLATELIB_CSRC_COMMON_H

#ifndef PY_SSIZE_T_CLEAN
#define PY_SSIZE_T_CLEAN
#endif
#include <Python.h>

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Fault injection, for the proof that `make test-sanitize` bites: built with
 * -DSL_FAULT_BOUNDS_SLACK=N, check_blocks (csrc/pipe.c) accepts block bounds up to N bytes
 * past the end of its data, so its CRC reads past the buffer. Every real build has 0. */
#ifndef SL_FAULT_BOUNDS_SLACK
#define SL_FAULT_BOUNDS_SLACK 0
#endif

/* ------------------------------------------------------------------ loads and stores */

static inline unsigned load_le16(const unsigned char *p)
{
    return (unsigned)p[0] | ((unsigned)p[1] << 8);
}

static inline uint32_t load_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

static inline uint64_t load_le64(const unsigned char *p)
{
    return (uint64_t)p[0] | ((uint64_t)p[1] << 8) | ((uint64_t)p[2] << 16) |
           ((uint64_t)p[3] << 24) | ((uint64_t)p[4] << 32) | ((uint64_t)p[5] << 40) |
           ((uint64_t)p[6] << 48) | ((uint64_t)p[7] << 56);
}

static inline unsigned load_be16(const unsigned char *p)
{
    return ((unsigned)p[0] << 8) | (unsigned)p[1];
}

static inline uint32_t load_be32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) |
           (uint32_t)p[3];
}

static inline uint64_t load_be64(const unsigned char *p)
{
    return ((uint64_t)p[0] << 56) | ((uint64_t)p[1] << 48) | ((uint64_t)p[2] << 40) |
           ((uint64_t)p[3] << 32) | ((uint64_t)p[4] << 24) | ((uint64_t)p[5] << 16) |
           ((uint64_t)p[6] << 8) | (uint64_t)p[7];
}

static inline void store_le(unsigned char *p, uint64_t v, int width)
{
    for (int i = 0; i < width; i++) {
        p[i] = (unsigned char)(v >> (8 * i));
    }
}

static inline void store_le16(unsigned char *p, unsigned v) { store_le(p, v, 2); }
static inline void store_le32(unsigned char *p, uint32_t v) { store_le(p, v, 4); }
static inline void store_le64(unsigned char *p, uint64_t v) { store_le(p, v, 8); }

static inline void store_be(unsigned char *p, uint64_t v, int width)
{
    for (int i = width - 1; i >= 0; i--) {
        p[i] = (unsigned char)(v & 0xFF);
        v >>= 8;
    }
}

static inline void store_be16(unsigned char *p, unsigned v) { store_be(p, v, 2); }
static inline void store_be32(unsigned char *p, uint32_t v) { store_be(p, v, 4); }
static inline void store_be64(unsigned char *p, uint64_t v) { store_be(p, v, 8); }

/* ------------------------------------------------------------------ the growth buffer */

/* Memory for sl_grow: PyMem (needs the GIL; MemoryError set on failure) or PyMem_Raw (safe
 * without the GIL; no exception set). */
enum { SL_MEM = 0, SL_RAW = 1 };

/* The one growth policy: the capacity (in elements) after room for `need` was asked of a
 * buffer of capacity `cap` (doubled from 64, or exactly `need` near the limit), or 0 when
 * `need` elements of `elem` bytes would pass PY_SSIZE_T_MAX bytes. */
size_t sl_grown_cap(size_t cap, size_t need, size_t elem);

/* Room for `need` elements of `elem` bytes in *buf (capacity *cap elements, grown by
 * sl_grown_cap). 0, or -1: out of memory (MemoryError set unless SL_RAW). */
int sl_grow_slow(void **buf, size_t *cap, size_t need, size_t elem, int mem);
/* (inline: the per-row callers almost always have room, and pay only this compare) */
static inline int sl_grow(void **buf, size_t *cap, size_t need, size_t elem, int mem)
{
    return need <= *cap ? 0 : sl_grow_slow(buf, cap, need, elem, mem);
}

/* A growable byte buffer (PyMem). */
typedef struct {
    unsigned char *p;
    size_t len, cap;
} SlBuf;

/* Append src[0:n]. 0, or -1 with MemoryError. */
int sl_buf_put(SlBuf *b, const void *src, size_t n);
void sl_buf_free(SlBuf *b);

/* ------------------------------------------------------------------ keys */

/* Byte-wise comparison of two keys (shorter first on a tie), as Python compares bytes: most
 * keys differ in their first 8 bytes, so those are one big-endian compare, no call. */
static inline int sl_key_cmp(const unsigned char *a, size_t alen, const unsigned char *b,
                             size_t blen)
{
    if (alen >= 8 && blen >= 8) {
        uint64_t x = load_be64(a), y = load_be64(b);
        if (x != y) {
            return x < y ? -1 : 1;
        }
    }
    size_t n = alen < blen ? alen : blen;
    int r = n ? memcmp(a, b, n) : 0;
    if (r) {
        return r;
    }
    return alen < blen ? -1 : (alen > blen ? 1 : 0);
}

/* memcpy for the short copies made per row (keys, key suffixes): up to 32 bytes as two
 * overlapping loads and stores, without a call into libc; longer ones are memcpy. All
 * loads come before the stores, so n <= 32 tolerates overlap as memmove would (callers do
 * not rely on it). */
static inline void sl_copy(unsigned char *d, const unsigned char *s, size_t n)
{
    if (n >= 16 && n <= 32) {
        uint64_t a0, a1, b0, b1;
        memcpy(&a0, s, 8);
        memcpy(&a1, s + 8, 8);
        memcpy(&b0, s + n - 16, 8);
        memcpy(&b1, s + n - 8, 8);
        memcpy(d, &a0, 8);
        memcpy(d + 8, &a1, 8);
        memcpy(d + n - 16, &b0, 8);
        memcpy(d + n - 8, &b1, 8);
    } else if (n >= 8 && n < 16) {
        uint64_t a, b;
        memcpy(&a, s, 8);
        memcpy(&b, s + n - 8, 8);
        memcpy(d, &a, 8);
        memcpy(d + n - 8, &b, 8);
    } else if (n < 8) {
        for (size_t i = 0; i < n; i++) {
            d[i] = s[i];
        }
    } else {
        memcpy(d, s, n);
    }
}

/* a == b, with the same first-8-bytes shortcut. */
static inline int sl_key_eq(const unsigned char *a, size_t alen, const unsigned char *b,
                            size_t blen)
{
    if (alen != blen) {
        return 0;
    }
    if (alen >= 8 && load_le64(a) != load_le64(b)) {
        return 0;
    }
    return alen == 0 || memcmp(a, b, alen) == 0;
}

/* ------------------------------------------------------------------ CRC-32 */

/* Once, at module init (with the GIL): the table, and zlib's own crc32 when the libz the
 * interpreter's zlib module loaded is found. */
void sl_crc32_init(void);
/* zlib.crc32(p[0:n]): folded with PCLMULQDQ where the CPU has it (n >= 64), else zlib's crc32
 * when found, else the table (the same function). GIL-free. */
uint32_t sl_crc32(const unsigned char *p, size_t n);
/* The built-in table-driven CRC-32 (slicing by 8), whatever sl_crc32 uses. */
uint32_t sl_crc32_table(const unsigned char *p, size_t n);
/* 1 when sl_crc32 calls zlib's crc32 (for inputs the folding path does not take). */
int sl_crc32_uses_zlib(void);
/* The folding CRC-32 (PCLMULQDQ) where the CPU has it, for n >= 64; else the table. */
uint32_t sl_crc32_clmul(const unsigned char *p, size_t n);
/* 1 when the CPU has PCLMULQDQ and sl_crc32 folds inputs of 64 bytes or more with it. */
int sl_crc32_uses_clmul(void);

/* ------------------------------------------------------------------ borrowed bytes */

/* The bytes of a buffer-protocol object; exact bytes avoid the buffer machinery. */
typedef struct {
    const unsigned char *ptr;
    Py_ssize_t len;
    Py_buffer view;
    int has_view;
} ByteSpan;

/* 0, or -1 with TypeError naming `what`. Release with span_release. */
int span_get(PyObject *obj, ByteSpan *span, const char *what);
void span_release(ByteSpan *span);

/* ------------------------------------------------------------------ framed-block sink */

/* Where a block writer may place finished, uncompressed blocks framed in place (the block,
 * then its CRC-32 big-endian, format §7.1), straight into the output SST's buffer instead of
 * handing each out as a new bytes object that is then copied (docs/rfcs/0030-core-throughput.md).
 * Owned by _sstwrite's SstBlocks, which keeps `base` and `cap` current (its buffer moves
 * when it grows) and hands it out in a capsule named SL_SINK_CAPSULE; `len` is where the
 * next block goes (after the bytes SstBlocks has accounted for and the blocks placed but not
 * yet added). A writer places a block only when it fits (len + n <= cap). */
typedef struct {
    unsigned char *base;
    size_t len, cap;
} SlSink;

#define SL_SINK_CAPSULE "slatelib._sstwrite.sink"

#endif /* SLATELIB_CSRC_COMMON_H */
