/*
 * slatelib._speedups: native versions of the SST codec's hot paths (format §7.4-7.9), and
 * of a rescale's range stats (range_stats). decode_blocks checks and decodes a run of stored
 * blocks in one call (the scan path); its reference is sst.decode_data_block per block.
 *
 * The pure-Python code in slatelib/format/{bloom,block,sst}.py is the reference: every
 * function here returns exactly what its `*_py` counterpart returns and rejects exactly what
 * it rejects (tests/unit/format/test_native.py checks this differentially and by fuzzing).
 * range_stats returns exactly what slatelib.core.rescale_check.RangeStats.of computes
 * (tests/unit/core/test_rescale_check.py).
 *
 * Error convention: malformed input (a corrupt block, a bad row, an out-of-range argument)
 * raises ValueError; the Python wrappers turn it into CorruptObjectError or
 * InvalidArgumentError. TypeError is raised for arguments of the wrong type.
 *
 * The native decode -> merge -> sink pipeline (check_blocks, Pipe) is its own translation
 * unit, csrc/pipe.c (declared in csrc/pipe.h); it feeds this file's block writer through
 * csrc/speedups.h. Block entries are parsed and validated in one place, csrc/block.h's
 * block_iter_next, for decode_block and check_blocks alike. Loads, growth buffers and the
 * CRC-32 are csrc/common.h's (design: docs/rfcs/0020-house-second-step.md).
 *
 * C99, no third-party libraries. Single-phase module init (no module state: the mutable
 * globals are csrc/common.c's CRC table and csrc/pipe.c's error classes, set once at init).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "csrc/block.h"
#include "csrc/common.h"
#include "csrc/pipe.h"
#include "csrc/speedups.h"

#define RESTART_INTERVAL 16
#define U16_MAX 0xFFFFu




/* ------------------------------------------------------------------ SipHash-1-3 */

#define ROTL64(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                          \
    do {                                                                                  \
        v0 += v1;                                                                         \
        v1 = ROTL64(v1, 13);                                                              \
        v1 ^= v0;                                                                         \
        v0 = ROTL64(v0, 32);                                                              \
        v2 += v3;                                                                         \
        v3 = ROTL64(v3, 16);                                                              \
        v3 ^= v2;                                                                         \
        v0 += v3;                                                                         \
        v3 = ROTL64(v3, 21);                                                              \
        v3 ^= v0;                                                                         \
        v2 += v1;                                                                         \
        v1 = ROTL64(v1, 17);                                                              \
        v1 ^= v2;                                                                         \
        v2 = ROTL64(v2, 32);                                                              \
    } while (0)

/* SipHash-1-3 with key (0, 0), format §7.9 (the hash of 0.17.0's bloom filters). */
static uint64_t siphash13_raw(const unsigned char *p, size_t n)
{
    uint64_t v0 = 0x736F6D6570736575ULL;
    uint64_t v1 = 0x646F72616E646F6DULL;
    uint64_t v2 = 0x6C7967656E657261ULL;
    uint64_t v3 = 0x7465646279746573ULL;
    const unsigned char *end = p + (n & ~(size_t)7);
    for (; p != end; p += 8) {
        uint64_t m = load_le64(p);
        v3 ^= m;
        SIPROUND;
        v0 ^= m;
    }
    uint64_t b = (uint64_t)n << 56;
    switch (n & 7) {
    case 7: b |= (uint64_t)p[6] << 48; /* fall through */
    case 6: b |= (uint64_t)p[5] << 40; /* fall through */
    case 5: b |= (uint64_t)p[4] << 32; /* fall through */
    case 4: b |= (uint64_t)p[3] << 24; /* fall through */
    case 3: b |= (uint64_t)p[2] << 16; /* fall through */
    case 2: b |= (uint64_t)p[1] << 8;  /* fall through */
    case 1: b |= (uint64_t)p[0];       /* fall through */
    default: break;
    }
    v3 ^= b;
    SIPROUND;
    v0 ^= b;
    v2 ^= 0xFF;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

PyDoc_STRVAR(siphash13_doc,
"siphash13(data, /) -> int\n\nSipHash-1-3 with key (0, 0) of a bytes-like object.");

static PyObject *py_siphash13(PyObject *self, PyObject *arg)
{
    (void)self;
    ByteSpan s;
    if (span_get(arg, &s, "data") < 0) {
        return NULL;
    }
    uint64_t h = siphash13_raw(s.ptr, (size_t)s.len);
    span_release(&s);
    return PyLong_FromUnsignedLongLong(h);
}

PyDoc_STRVAR(siphash13_many_doc,
"siphash13_many(keys, /) -> bytes\n\n"
"SipHash-1-3 of every key of a list or tuple, as an array of native-endian u64\n"
"(read it with array('Q').frombytes or memoryview.cast('Q')).");

static PyObject *py_siphash13_many(PyObject *self, PyObject *arg)
{
    (void)self;
    PyObject *seq = PySequence_Fast(arg, "keys must be a sequence of bytes-like objects");
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > PY_SSIZE_T_MAX / 8) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * 8);
    if (out == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    unsigned char *dst = (unsigned char *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i >= PySequence_Fast_GET_SIZE(seq)) {
            PyErr_SetString(PyExc_RuntimeError, "keys changed size during iteration");
            goto fail;
        }
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        Py_INCREF(item);
        ByteSpan s;
        if (span_get(item, &s, "key") < 0) {
            Py_DECREF(item);
            goto fail;
        }
        uint64_t h = siphash13_raw(s.ptr, (size_t)s.len);
        span_release(&s);
        Py_DECREF(item);
        memcpy(dst + 8 * i, &h, 8);
    }
    Py_DECREF(seq);
    return out;
fail:
    Py_DECREF(seq);
    Py_DECREF(out);
    return NULL;
}

/* ------------------------------------------------------------------ rescale range stats */

/* BLAKE2b (RFC 7693), unkeyed, 16-byte digest: exactly hashlib.blake2b(digest_size=16), the
 * per-row hash of slatelib.core.rescale_check.row_digest. Streaming over a row's three
 * pieces (4-byte LE key length, key, value) without copying them into one buffer. */

static const uint64_t B2_IV[8] = {
    0x6A09E667F3BCC908ULL, 0xBB67AE8584CAA73BULL, 0x3C6EF372FE94F82BULL,
    0xA54FF53A5F1D36F1ULL, 0x510E527FADE682D1ULL, 0x9B05688C2B3E6C1FULL,
    0x1F83D9ABFB41BD6BULL, 0x5BE0CD19137E2179ULL,
};

static const unsigned char B2_SIGMA[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
};

#define ROTR64(x, b) (uint64_t)(((x) >> (b)) | ((x) << (64 - (b))))
#define B2_G(a, b, c, d, x, y)                                                            \
    do {                                                                                  \
        a = a + b + (x);                                                                  \
        d = ROTR64(d ^ a, 32);                                                            \
        c = c + d;                                                                        \
        b = ROTR64(b ^ c, 24);                                                            \
        a = a + b + (y);                                                                  \
        d = ROTR64(d ^ a, 16);                                                            \
        c = c + d;                                                                        \
        b = ROTR64(b ^ c, 63);                                                            \
    } while (0)

typedef struct {
    uint64_t h[8];
    uint64_t t;              /* bytes compressed so far (rows are far below 2^64 bytes) */
    size_t buflen;
    unsigned char buf[128];
} Blake2b;

static void b2_compress(Blake2b *s, const unsigned char *block, int last)
{
    uint64_t m[16];
    for (int i = 0; i < 16; i++) {
        m[i] = load_le64(block + 8 * i);
    }
    uint64_t v0 = s->h[0], v1 = s->h[1], v2 = s->h[2], v3 = s->h[3];
    uint64_t v4 = s->h[4], v5 = s->h[5], v6 = s->h[6], v7 = s->h[7];
    uint64_t v8 = B2_IV[0], v9 = B2_IV[1], v10 = B2_IV[2], v11 = B2_IV[3];
    uint64_t v12 = B2_IV[4] ^ s->t, v13 = B2_IV[5];
    uint64_t v14 = last ? ~B2_IV[6] : B2_IV[6], v15 = B2_IV[7];
    /* unrolled: the message schedule becomes constant indexes (about 20% faster) */
#define B2_ROUND(r)                                                                       \
    do {                                                                                  \
        B2_G(v0, v4, v8, v12, m[B2_SIGMA[r][0]], m[B2_SIGMA[r][1]]);                      \
        B2_G(v1, v5, v9, v13, m[B2_SIGMA[r][2]], m[B2_SIGMA[r][3]]);                      \
        B2_G(v2, v6, v10, v14, m[B2_SIGMA[r][4]], m[B2_SIGMA[r][5]]);                     \
        B2_G(v3, v7, v11, v15, m[B2_SIGMA[r][6]], m[B2_SIGMA[r][7]]);                     \
        B2_G(v0, v5, v10, v15, m[B2_SIGMA[r][8]], m[B2_SIGMA[r][9]]);                     \
        B2_G(v1, v6, v11, v12, m[B2_SIGMA[r][10]], m[B2_SIGMA[r][11]]);                   \
        B2_G(v2, v7, v8, v13, m[B2_SIGMA[r][12]], m[B2_SIGMA[r][13]]);                    \
        B2_G(v3, v4, v9, v14, m[B2_SIGMA[r][14]], m[B2_SIGMA[r][15]]);                    \
    } while (0)
    B2_ROUND(0);
    B2_ROUND(1);
    B2_ROUND(2);
    B2_ROUND(3);
    B2_ROUND(4);
    B2_ROUND(5);
    B2_ROUND(6);
    B2_ROUND(7);
    B2_ROUND(8);
    B2_ROUND(9);
    B2_ROUND(10);
    B2_ROUND(11);
#undef B2_ROUND
    s->h[0] ^= v0 ^ v8;
    s->h[1] ^= v1 ^ v9;
    s->h[2] ^= v2 ^ v10;
    s->h[3] ^= v3 ^ v11;
    s->h[4] ^= v4 ^ v12;
    s->h[5] ^= v5 ^ v13;
    s->h[6] ^= v6 ^ v14;
    s->h[7] ^= v7 ^ v15;
}

static void b2_init16(Blake2b *s)
{
    memcpy(s->h, B2_IV, sizeof s->h);
    s->h[0] ^= 0x01010000ULL ^ 16u; /* fanout 1, depth 1, no key, 16-byte digest */
    s->t = 0;
    s->buflen = 0;
}

/* The last block (full or not) is compressed by b2_final, so a full buffer waits here
 * until more input arrives. */
static void b2_update(Blake2b *s, const unsigned char *in, size_t n)
{
    if (n == 0) {
        return;
    }
    size_t fill = 128 - s->buflen;
    if (n > fill) {
        memcpy(s->buf + s->buflen, in, fill);
        s->t += 128;
        b2_compress(s, s->buf, 0);
        s->buflen = 0;
        in += fill;
        n -= fill;
        while (n > 128) {
            s->t += 128;
            b2_compress(s, in, 0);
            in += 128;
            n -= 128;
        }
    }
    memcpy(s->buf + s->buflen, in, n);
    s->buflen += n;
}

/* The 16-byte digest as a little-endian 128-bit integer: h[0] low, h[1] high. */
static void b2_final16(Blake2b *s, uint64_t *lo, uint64_t *hi)
{
    s->t += s->buflen;
    memset(s->buf + s->buflen, 0, 128 - s->buflen);
    b2_compress(s, s->buf, 1);
    *lo = s->h[0];
    *hi = s->h[1];
}


/* The GIL-free core: one row of raw bytes (klen < 2^32, checked by callers). */
void acc_raw(RangeAcc *acc, const unsigned char *k, size_t klen, const unsigned char *v,
             size_t vlen)
{
    unsigned char len4[4] = {(unsigned char)(klen & 0xFF), (unsigned char)((klen >> 8) & 0xFF),
                             (unsigned char)((klen >> 16) & 0xFF),
                             (unsigned char)((klen >> 24) & 0xFF)};
    Blake2b s;
    b2_init16(&s);
    b2_update(&s, len4, 4);
    b2_update(&s, k, klen);
    b2_update(&s, v, vlen);
    uint64_t lo, hi;
    b2_final16(&s, &lo, &hi);
    acc->keys += 1;
    acc->nbytes += (uint64_t)klen + (uint64_t)vlen;
    acc->lo += lo;
    acc->hi += hi + (acc->lo < lo);
}

static int acc_row(RangeAcc *acc, PyObject *key, PyObject *value)
{
    ByteSpan k, v;
    if (span_get(key, &k, "key") < 0) {
        return -1;
    }
    if (span_get(value, &v, "value") < 0) {
        span_release(&k);
        return -1;
    }
    if ((uint64_t)k.len > 0xFFFFFFFFu) {
        span_release(&k);
        span_release(&v);
        PyErr_SetString(PyExc_ValueError, "key longer than 2^32 - 1 bytes");
        return -1;
    }
    acc_raw(acc, k.ptr, (size_t)k.len, v.ptr, (size_t)v.len);
    span_release(&k);
    span_release(&v);
    return 0;
}

static int acc_item(RangeAcc *acc, PyObject *item)
{
    if (PyTuple_Check(item) && PyTuple_GET_SIZE(item) == 2) {
        return acc_row(acc, PyTuple_GET_ITEM(item, 0), PyTuple_GET_ITEM(item, 1));
    }
    /* anything else that unpacks into two items, as `for k, v in rows` accepts */
    PyObject *t = PySequence_Tuple(item);
    if (t == NULL) {
        return -1;
    }
    int rc;
    if (PyTuple_GET_SIZE(t) != 2) {
        PyErr_Format(PyExc_ValueError, "rows must be (key, value) pairs, not %zd items",
                     PyTuple_GET_SIZE(t));
        rc = -1;
    }
    else {
        rc = acc_row(acc, PyTuple_GET_ITEM(t, 0), PyTuple_GET_ITEM(t, 1));
    }
    Py_DECREF(t);
    return rc;
}


PyDoc_STRVAR(range_stats_doc,
"range_stats(rows, /) -> (keys, nbytes, digest)\n\n"
"Over an iterable of (key, value) bytes-like pairs: the number of rows, the sum of\n"
"len(key) + len(value), and the sum mod 2**128 of each row's BLAKE2b-128 of\n"
"len(key) as 4 little-endian bytes + key + value, read as a little-endian integer;\n"
"identical to slatelib.core.rescale_check.RangeStats.of.");

static PyObject *py_range_stats(PyObject *self, PyObject *arg)
{
    (void)self;
    PyObject *it = PyObject_GetIter(arg);
    if (it == NULL) {
        return NULL;
    }
    RangeAcc acc = {0, 0, 0, 0};
    PyObject *item;
    while ((item = PyIter_Next(it)) != NULL) {
        int rc = acc_item(&acc, item);
        Py_DECREF(item);
        if (rc < 0) {
            Py_DECREF(it);
            return NULL;
        }
    }
    Py_DECREF(it);
    if (PyErr_Occurred()) {
        return NULL;
    }
    return acc_result(&acc);
}

/* (keys, nbytes, digest) of an accumulator, as range_stats returns it. */
PyObject *acc_result(const RangeAcc *a)
{
    RangeAcc acc = *a;
    PyObject *hi = PyLong_FromUnsignedLongLong(acc.hi);
    PyObject *lo = PyLong_FromUnsignedLongLong(acc.lo);
    PyObject *shift = PyLong_FromLong(64);
    PyObject *high = (hi && shift) ? PyNumber_Lshift(hi, shift) : NULL;
    PyObject *digest = (high && lo) ? PyNumber_Or(high, lo) : NULL;
    Py_XDECREF(hi);
    Py_XDECREF(lo);
    Py_XDECREF(shift);
    Py_XDECREF(high);
    if (digest == NULL) {
        return NULL;
    }
    return Py_BuildValue("(KKN)", (unsigned long long)acc.keys,
                         (unsigned long long)acc.nbytes, digest);
}

/* ------------------------------------------------------------------ bloom filters */

/* floor(f32(bits_per_key) * f32(0.69)) clamped to [0, 0xFFFF], exactly as num_probes_for:
 * Python converts the int to a double, then to f32 (two roundings); the product of two
 * f32 values is exact in double and rounded once to f32, as an f32 multiply would. */
static unsigned num_probes_for(long long bits_per_key)
{
    volatile float bpk = (float)(double)bits_per_key;
    volatile float f069 = 0.69f;
    volatile float prod = (float)((double)bpk * (double)f069);
    double fl = floor((double)prod);
    if (!(fl > 0.0)) {
        return 0;
    }
    if (fl >= (double)U16_MAX) {
        return U16_MAX;
    }
    return (unsigned)fl;
}

static void bloom_fill(unsigned char *bits, uint64_t nbits, unsigned num_probes,
                       const unsigned char *hashes, size_t n)
{
    if (nbits == 0) {
        return;
    }
    if (nbits <= UINT32_MAX) {
        uint32_t nb = (uint32_t)nbits;
        for (size_t k = 0; k < n; k++) {
            uint64_t h;
            memcpy(&h, hashes + 8 * k, 8);
            uint64_t x = (uint32_t)h % nb;
            uint64_t d = (uint32_t)(h >> 32) % nb;
            for (unsigned i = 0; i < num_probes; i++) {
                d += i; /* d < nb and i <= 0xFFFF: no overflow */
                if (d >= nb) {
                    d %= nb;
                }
                bits[x >> 3] |= (unsigned char)(1u << (x & 7));
                x += d; /* both < nb: the sum is < 2 nb */
                if (x >= nb) {
                    x -= nb;
                }
            }
        }
        return;
    }
    for (size_t k = 0; k < n; k++) {
        uint64_t h;
        memcpy(&h, hashes + 8 * k, 8);
        uint64_t x = (h & 0xFFFFFFFFu) % nbits;
        uint64_t d = (h >> 32) % nbits;
        for (unsigned i = 0; i < num_probes; i++) {
            d = (d + i) % nbits; /* nbits < 2^64 / 2: no overflow */
            bits[x >> 3] |= (unsigned char)(1u << (x & 7));
            x += d;
            if (x >= nbits) {
                x -= nbits;
            }
        }
    }
}

/* u16 BE num_probes + bit array for `n` native-endian u64 hashes (build_bloom_from_hashes). */
static PyObject *bloom_build_raw(const unsigned char *hashes, size_t n, long long bits_per_key)
{
    if (bits_per_key < 0) {
        PyErr_SetString(PyExc_ValueError, "bits_per_key must not be negative");
        return NULL;
    }
    uint64_t bpk = (uint64_t)bits_per_key;
    if (bpk != 0 && (uint64_t)n > (UINT64_MAX - 7) / bpk) {
        return PyErr_NoMemory();
    }
    uint64_t nbytes = ((uint64_t)n * bpk + 7) / 8;
    if (nbytes > (uint64_t)(PY_SSIZE_T_MAX - 2) || nbytes > UINT64_MAX / 16) {
        return PyErr_NoMemory();
    }
    unsigned num_probes = num_probes_for(bits_per_key);
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)nbytes + 2);
    if (out == NULL) {
        return NULL;
    }
    unsigned char *dst = (unsigned char *)PyBytes_AS_STRING(out);
    store_be16(dst, num_probes);
    memset(dst + 2, 0, (size_t)nbytes);
    if (n > 4096) {
        Py_BEGIN_ALLOW_THREADS
        bloom_fill(dst + 2, nbytes * 8, num_probes, hashes, n);
        Py_END_ALLOW_THREADS
    } else {
        bloom_fill(dst + 2, nbytes * 8, num_probes, hashes, n);
    }
    return out;
}

PyDoc_STRVAR(bloom_build_doc,
"bloom_build(hashes, bits_per_key, /) -> bytes\n\n"
"Bloom filter data (u16 BE num_probes + bit array) for a buffer of native-endian u64\n"
"hashes (bytes from siphash13_many, array('Q'), ...); identical to\n"
"build_bloom_from_hashes.");

static PyObject *py_bloom_build(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer view;
    long long bits_per_key;
    if (!PyArg_ParseTuple(args, "y*L:bloom_build", &view, &bits_per_key)) {
        return NULL;
    }
    if (view.len % 8 != 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "hashes buffer length is not a multiple of 8");
        return NULL;
    }
    PyObject *out = bloom_build_raw((const unsigned char *)view.buf, (size_t)view.len / 8,
                                    bits_per_key);
    PyBuffer_Release(&view);
    return out;
}

PyDoc_STRVAR(bloom_check_doc,
"bloom_check(bits, num_probes, h, /) -> bool\n\n"
"Whether a filter's bit array may contain hash h (BloomFilter.might_contain_hash).");

static PyObject *py_bloom_check(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer view;
    long long num_probes;
    PyObject *h_obj;
    if (!PyArg_ParseTuple(args, "y*LO!:bloom_check", &view, &num_probes, &PyLong_Type,
                          &h_obj)) {
        return NULL;
    }
    uint64_t h = PyLong_AsUnsignedLongLong(h_obj);
    if (h == (uint64_t)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "h must be an unsigned 64-bit hash");
        return NULL;
    }
    uint64_t nbytes = (uint64_t)view.len;
    int result = 1;
    if (nbytes == 0 || nbytes > UINT64_MAX / 16) {
        result = 0;
    } else {
        const unsigned char *bits = (const unsigned char *)view.buf;
        uint64_t nbits = nbytes * 8;
        uint64_t x = (h & 0xFFFFFFFFu) % nbits;
        uint64_t d = (h >> 32) % nbits;
        uint64_t probes = num_probes > 0 ? (uint64_t)num_probes : 0;
        for (uint64_t i = 0; i < probes; i++) {
            d = (d + i % nbits) % nbits; /* both terms < nbits <= 2^60 */
            if (!(bits[x >> 3] & (1u << (x & 7)))) {
                result = 0;
                break;
            }
            x += d;
            if (x >= nbits) {
                x -= nbits;
            }
        }
    }
    PyBuffer_Release(&view);
    return PyBool_FromLong(result);
}

/* ------------------------------------------------------------------ block decoding */

/* Why a block is malformed; raised as ValueError (the wrapper adds "malformed vN block"). */
static PyObject *corrupt(const char *msg)
{
    PyErr_SetString(PyExc_ValueError, msg);
    return NULL;
}


/* Reuses the int object of the previous row when a field repeats (seq of a batch, ts). */
typedef struct {
    PyObject *obj;
    uint64_t bits;
} IntCache;

static PyObject *cached_u64(IntCache *c, uint64_t v)
{
    if (c->obj != NULL && c->bits == v) {
        Py_INCREF(c->obj);
        return c->obj;
    }
    PyObject *o = PyLong_FromUnsignedLongLong(v);
    if (o == NULL) {
        return NULL;
    }
    Py_XSETREF(c->obj, o);
    c->bits = v;
    Py_INCREF(o);
    return o;
}

static PyObject *cached_i64(IntCache *c, uint64_t raw)
{
    if (c->obj != NULL && c->bits == raw) {
        Py_INCREF(c->obj);
        return c->obj;
    }
    PyObject *o = PyLong_FromLongLong(u64_to_i64(raw));
    if (o == NULL) {
        return NULL;
    }
    Py_XSETREF(c->obj, o);
    c->bits = raw;
    Py_INCREF(o);
    return o;
}

static PyObject *opt_ts(IntCache *c, int present, uint64_t raw)
{
    if (!present) {
        Py_RETURN_NONE;
    }
    return cached_i64(c, raw);
}


/* key = prev[:shared] + suffix, reusing prev when the key repeats. */
static PyObject *join_key(PyObject *prev, size_t shared, const unsigned char *suffix,
                          size_t unshared)
{
    if (shared == 0) {
        return PyBytes_FromStringAndSize((const char *)suffix, (Py_ssize_t)unshared);
    }
    if (unshared == 0 && (Py_ssize_t)shared == PyBytes_GET_SIZE(prev)) {
        Py_INCREF(prev);
        return prev;
    }
    PyObject *key = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(shared + unshared));
    if (key == NULL) {
        return NULL;
    }
    char *k = PyBytes_AS_STRING(key);
    memcpy(k, PyBytes_AS_STRING(prev), shared);
    memcpy(k + shared, suffix, unshared);
    return key;
}

typedef struct {
    IntCache seq, expire, create;
} RowCaches;

static void caches_clear(RowCaches *c)
{
    Py_CLEAR(c->seq.obj);
    Py_CLEAR(c->expire.obj);
    Py_CLEAR(c->create.obj);
}

/* Appends (key, seq, kind, value, expire_ts, create_ts) to `rows`; steals key and value. */
static int append_row(PyObject *rows, RowCaches *c, PyObject *key, uint64_t seq, int kind,
                      PyObject *value, int has_exp, uint64_t exp, int has_cre, uint64_t cre)
{
    PyObject *t = PyTuple_New(6);
    if (t == NULL) {
        Py_DECREF(key);
        Py_DECREF(value);
        return -1;
    }
    PyTuple_SET_ITEM(t, 0, key);
    PyTuple_SET_ITEM(t, 3, value);
    PyObject *o = cached_u64(&c->seq, seq);
    if (o == NULL) {
        goto fail;
    }
    PyTuple_SET_ITEM(t, 1, o);
    o = PyLong_FromLong(kind);
    if (o == NULL) {
        goto fail;
    }
    PyTuple_SET_ITEM(t, 2, o);
    o = opt_ts(&c->expire, has_exp, exp);
    if (o == NULL) {
        goto fail;
    }
    PyTuple_SET_ITEM(t, 4, o);
    o = opt_ts(&c->create, has_cre, cre);
    if (o == NULL) {
        goto fail;
    }
    PyTuple_SET_ITEM(t, 5, o);
    /* Only bytes, ints and None: the tuple can never be part of a cycle. Untracking it now
     * (as the GC itself would, lazily) keeps large decoded lists out of GC traversals. */
    PyObject_GC_UnTrack(t);
    int rc = PyList_Append(rows, t);
    Py_DECREF(t);
    return rc;
fail:
    Py_DECREF(t); /* unset slots are NULL, which tuple dealloc skips */
    return -1;
}


/* Rows of the block payload p[0:n] of format `version`; ValueError if it is malformed. */
static PyObject *decode_block(const unsigned char *p, size_t n, int version)
{
    BlockIter it;
    if (block_iter_init(&it, version, p, n) < 0) {
        return corrupt(it.err);
    }
    PyObject *rows = PyList_New(0);
    if (rows == NULL) {
        return NULL;
    }
    RowCaches caches = {{NULL, 0}, {NULL, 0}, {NULL, 0}};
    PyObject *base = NULL; /* borrowed: the base key (BlockEntry), owned by `rows` */
    BlockEntry e = {0};
    int r;
    while ((r = block_iter_next(&it, &e)) > 0) {
        PyObject *key = join_key(base, e.shared, p + e.kstart, e.unshared);
        if (key == NULL) {
            goto error;
        }
        PyObject *value = PyBytes_FromStringAndSize((const char *)p + e.vstart,
                                                    (Py_ssize_t)e.vlen);
        if (value == NULL) {
            Py_DECREF(key);
            goto error;
        }
        if (e.sets_base) {
            base = key;
        }
        if (append_row(rows, &caches, key, e.seq, e.kind, value, e.has_exp, e.exp, e.has_cre,
                       e.cre) < 0) {
            goto error;
        }
    }
    if (r < 0) {
        PyErr_SetString(PyExc_ValueError, it.err);
        goto error;
    }
    caches_clear(&caches);
    return rows;
error:
    caches_clear(&caches);
    Py_DECREF(rows);
    return NULL;
}

PyDoc_STRVAR(decode_block_v2_doc,
"decode_block_v2(data, /) -> list[tuple]\n\n"
"Rows of a decompressed v2 block; ValueError if it is malformed.");

static PyObject *py_decode_block_v2(PyObject *self, PyObject *arg)
{
    (void)self;
    ByteSpan s;
    if (span_get(arg, &s, "data") < 0) {
        return NULL;
    }
    PyObject *out = decode_block(s.ptr, (size_t)s.len, 2);
    span_release(&s);
    return out;
}

PyDoc_STRVAR(decode_block_v1_doc,
"decode_block_v1(data, /) -> list[tuple]\n\n"
"Rows of a decompressed v1 block; ValueError if it is malformed.");

static PyObject *py_decode_block_v1(PyObject *self, PyObject *arg)
{
    (void)self;
    ByteSpan s;
    if (span_get(arg, &s, "data") < 0) {
        return NULL;
    }
    PyObject *out = decode_block(s.ptr, (size_t)s.len, 1);
    span_release(&s);
    return out;
}


PyDoc_STRVAR(decode_blocks_doc,
"decode_blocks(data, bounds, version, flat=False, /) -> list[list[tuple]] | list[tuple]\n\n"
"Rows of the uncompressed stored blocks data[bounds[i]:bounds[i+1]], each checked against\n"
"its trailing CRC-32 (big-endian) first; version is the SST format version (1 or 2).\n"
"One list per block, or with flat=True one list of all their rows in order.\n"
"ValueError names the block (its position in bounds) that is damaged.");

static PyObject *py_decode_blocks(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *data, *bounds;
    int version, flat = 0;
    if (!PyArg_ParseTuple(args, "OO!i|p", &data, &PyList_Type, &bounds, &version, &flat)) {
        return NULL;
    }
    if (version != 1 && version != 2) {
        PyErr_Format(PyExc_ValueError, "unsupported SST format version %d", version);
        return NULL;
    }
    Py_ssize_t nb = PyList_GET_SIZE(bounds) - 1;
    if (nb < 0) {
        PyErr_SetString(PyExc_ValueError, "bounds must hold at least one offset");
        return NULL;
    }
    ByteSpan s;
    if (span_get(data, &s, "data") < 0) {
        return NULL;
    }
    PyObject *out = PyList_New(flat ? 0 : nb);
    if (out == NULL) {
        span_release(&s);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nb; i++) {
        Py_ssize_t a = PyLong_AsSsize_t(PyList_GET_ITEM(bounds, i));
        Py_ssize_t b = PyLong_AsSsize_t(PyList_GET_ITEM(bounds, i + 1));
        if ((a == -1 || b == -1) && PyErr_Occurred()) {
            goto fail;
        }
        if (a < 0 || b > s.len || b - a < 4) {
            PyErr_Format(PyExc_ValueError, "block %zd: bounds [%zd, %zd) out of range", i, a, b);
            goto fail;
        }
        const unsigned char *p = s.ptr + a;
        size_t n = (size_t)(b - a - 4);
        if (sl_crc32(p, n) != load_be32(p + n)) {
            PyErr_Format(PyExc_ValueError, "block %zd: checksum mismatch", i);
            goto fail;
        }
        PyObject *rows = decode_block(p, n, version);
        if (rows == NULL) {
            goto fail;
        }
        if (flat) {
            Py_ssize_t at = PyList_GET_SIZE(out);
            int rc = PyList_SetSlice(out, at, at, rows);
            Py_DECREF(rows);
            if (rc < 0) {
                goto fail;
            }
        }
        else {
            PyList_SET_ITEM(out, i, rows);
        }
    }
    span_release(&s);
    return out;
fail:
    span_release(&s);
    Py_DECREF(out);
    return NULL;
}


PyDoc_STRVAR(index_metas_doc,
"index_metas(data, start, n, /) -> (offsets, first_keys) | None\n\n"
"The n BlockMeta tables (format §7.8) of an SST index buffer whose block_meta vector\n"
"entries start at `start`: two tuples, exactly what sst_index._decode_metas returns.\n"
"None when any table, vtable, field or key fails a bounds or layout check (or the required\n"
"first_key is absent): the Python decoder then runs and names the problem.");

static PyObject *py_index_metas(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *data;
    Py_ssize_t start, n;
    if (!PyArg_ParseTuple(args, "O!nn", &PyBytes_Type, &data, &start, &n)) {
        return NULL;
    }
    const unsigned char *d = (const unsigned char *)PyBytes_AS_STRING(data);
    long long end = PyBytes_GET_SIZE(data);
    if (start < 0 || n < 0 || (long long)start + 4LL * n > end) {
        Py_RETURN_NONE;
    }
    PyObject *offsets = PyTuple_New(n);
    PyObject *keys = PyTuple_New(n);
    if (offsets == NULL || keys == NULL) {
        Py_XDECREF(offsets);
        Py_XDECREF(keys);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long long entry = (long long)start + 4LL * i;
        long long t = entry + load_le32(d + entry);
        if (t + 4 > end) {
            goto reject;
        }
        long long vt = t - (int32_t)load_le32(d + t);
        if (vt < 0 || vt + 4 > end) {
            goto reject;
        }
        unsigned vt_len = load_le16(d + vt), obj_len = load_le16(d + vt + 2);
        if (vt_len < 4 || (vt_len & 1) || vt + vt_len > end || obj_len < 4 || t + obj_len > end) {
            goto reject;
        }
        unsigned rel0 = vt_len > 4 ? load_le16(d + vt + 4) : 0;
        unsigned rel1 = vt_len > 6 ? load_le16(d + vt + 6) : 0;
        if ((rel0 && (rel0 < 4 || rel0 + 8 > obj_len)) || rel1 < 4 || rel1 + 4 > obj_len) {
            goto reject;
        }
        uint64_t offset = 0;
        if (rel0) {
            const unsigned char *q = d + t + rel0;
            for (int b = 7; b >= 0; b--) {
                offset = offset << 8 | q[b];
            }
        }
        long long k = t + rel1 + load_le32(d + t + rel1);
        if (k + 4 > end) {
            goto reject;
        }
        long long klen = load_le32(d + k);
        if (k + 4 + klen > end) {
            goto reject;
        }
        PyObject *o = PyLong_FromUnsignedLongLong(offset);
        PyObject *key = PyBytes_FromStringAndSize((const char *)d + k + 4, (Py_ssize_t)klen);
        if (o == NULL || key == NULL) {
            Py_XDECREF(o);
            Py_XDECREF(key);
            Py_DECREF(offsets);
            Py_DECREF(keys);
            return NULL;
        }
        PyTuple_SET_ITEM(offsets, i, o);
        PyTuple_SET_ITEM(keys, i, key);
    }
    PyObject *out = PyTuple_Pack(2, offsets, keys);
    Py_DECREF(offsets);
    Py_DECREF(keys);
    return out;
reject:
    Py_DECREF(offsets);
    Py_DECREF(keys);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ block writer */

/*
 * BlockWriterV2: cuts rows into v2 blocks with 0.17.0's fit rule (format §7.7) and keeps the
 * SST-level bookkeeping of SstWriter (ordering, stats, bloom hashes, index keys).
 * Reference implementation: slatelib.format.block.BlockWriterPy.
 */


static PyObject *keybuf_bytes(const KeyBuf *b)
{
    return PyBytes_FromStringAndSize((const char *)b->p, (Py_ssize_t)b->len);
}

static PyObject *bw_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"block_size", "compacted", "want_hashes", "prefix_lens", NULL};
    Py_ssize_t block_size;
    int compacted = 1, want_hashes = 0;
    PyObject *prefix_lens = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "n|$ppO:BlockWriterV2", kwlist, &block_size,
                                     &compacted, &want_hashes, &prefix_lens)) {
        return NULL;
    }
    if (block_size < 0) {
        PyErr_SetString(PyExc_ValueError, "block_size must not be negative");
        return NULL;
    }
    size_t lens[MAX_PREFIX_EXTRACTORS];
    Py_ssize_t num_prefixes = 0;
    if (prefix_lens != NULL && prefix_lens != Py_None) {
        if (!PyTuple_Check(prefix_lens)) {
            PyErr_SetString(PyExc_TypeError, "prefix_lens must be a tuple of ints");
            return NULL;
        }
        num_prefixes = PyTuple_GET_SIZE(prefix_lens);
        if (num_prefixes > MAX_PREFIX_EXTRACTORS) {
            PyErr_Format(PyExc_ValueError, "at most %d prefix lengths",
                         MAX_PREFIX_EXTRACTORS);
            return NULL;
        }
        for (Py_ssize_t i = 0; i < num_prefixes; i++) {
            Py_ssize_t n = PyLong_AsSsize_t(PyTuple_GET_ITEM(prefix_lens, i));
            if (n == -1 && PyErr_Occurred()) {
                return NULL;
            }
            if (n < 1) {
                PyErr_SetString(PyExc_ValueError, "prefix lengths must be positive");
                return NULL;
            }
            lens[i] = (size_t)n;
        }
    }
    BlockWriterObject *self = (BlockWriterObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    /* tp_alloc zeroes the object: every pointer is NULL and every counter 0 */
    self->block_size = block_size;
    self->compacted = compacted;
    self->want_hashes = want_hashes;
    self->num_prefixes = (size_t)num_prefixes;
    for (Py_ssize_t i = 0; i < num_prefixes; i++) {
        self->prefixes[i].n = lens[i];
    }
    self->blocks = PyList_New(0);
    if (self->blocks == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static void bw_dealloc(BlockWriterObject *self)
{
    PyMem_Free(self->data);
    PyMem_Free(self->restarts);
    PyMem_Free(self->hashes);
    for (size_t i = 0; i < self->num_prefixes; i++) {
        PyMem_Free(self->prefixes[i].hashes);
        PyMem_Free(self->prefixes[i].last.p);
    }
    PyMem_Free(self->block_first_key.p);
    PyMem_Free(self->prev_block_last.p);
    PyMem_Free(self->last_key.p);
    Py_XDECREF(self->first_key);
    Py_XDECREF(self->blocks);
    Py_XDECREF(self->sink_owner);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static size_t varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static unsigned char *put_varint(unsigned char *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (unsigned char)((v & 0x7F) | 0x80);
        v >>= 7;
    }
    *p++ = (unsigned char)v;
    return p;
}

/* Index key of a block (format §7.8): shortest prefix of `first` greater than `prev_last`. */
static PyObject *index_separator(const KeyBuf *prev_last, const KeyBuf *first)
{
    const unsigned char *a = prev_last->p;
    const unsigned char *b = first->p;
    size_t la = prev_last->len, lb = first->len;
    size_t n = la < lb ? la : lb;
    size_t cut;
    if (la == lb && memcmp(a, b, n) == 0) {
        cut = lb;
    } else {
        size_t j = 0;
        while (j < n && a[j] == b[j]) {
            j++;
        }
        cut = j < n ? j + 1 : (la + 1 < lb ? la + 1 : lb);
    }
    return PyBytes_FromStringAndSize((const char *)b, (Py_ssize_t)cut);
}

/* Closes the open block (which must hold rows) into a tuple appended to self->blocks. */
static int bw_close_block(BlockWriterObject *self)
{
    size_t total = self->data_len + 2 * self->num_restarts + 2;
    if (self->num_restarts > U16_MAX || total > (size_t)PY_SSIZE_T_MAX) {
        PyErr_SetString(PyExc_ValueError, "block has too many restart points");
        return -1;
    }
    SlSink *sink = self->sink;
    int placed = sink != NULL && !self->sink_off && sink->base != NULL
                 && sink->len <= sink->cap && total + 4 <= sink->cap - sink->len;
    if (sink != NULL && !placed) {
        self->sink_off = 1;
    }
    PyObject *raw = placed ? PyLong_FromSize_t(total)
                           : PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (raw == NULL) {
        return -1;
    }
    /* placed: written past the sink's len, which moves only once the block is recorded */
    unsigned char *out = placed ? sink->base + sink->len
                                : (unsigned char *)PyBytes_AS_STRING(raw);
    if (self->data_len) {
        memcpy(out, self->data, self->data_len);
    }
    unsigned char *q = out + self->data_len;
    for (size_t i = 0; i < self->num_restarts; i++, q += 2) {
        store_be16(q, self->restarts[i]);
    }
    store_be16(q, (unsigned)self->num_restarts);
    if (placed) {
        store_be32(out + total, sl_crc32(out, total));
    }
    PyObject *index_key;
    if (!self->compacted) {
        unsigned char be[8];
        store_be64(be, self->block_first_seq);
        index_key = PyBytes_FromStringAndSize((const char *)be, 8);
    } else if (!self->prev_block_last.set) {
        index_key = PyBytes_FromStringAndSize(NULL, 0);
    } else {
        index_key = index_separator(&self->prev_block_last, &self->block_first_key);
    }
    if (index_key == NULL) {
        Py_DECREF(raw);
        return -1;
    }
    PyObject *t = PyTuple_New(5);
    if (t == NULL) {
        Py_DECREF(raw);
        Py_DECREF(index_key);
        return -1;
    }
    PyTuple_SET_ITEM(t, 0, raw);
    PyTuple_SET_ITEM(t, 1, index_key);
    uint64_t counts[3] = {self->block_puts, self->block_deletes, self->block_merges};
    for (Py_ssize_t i = 0; i < 3; i++) {
        PyObject *c = PyLong_FromUnsignedLongLong(counts[i]);
        if (c == NULL) {
            Py_DECREF(t); /* unset slots are NULL, which tuple dealloc skips */
            return -1;
        }
        PyTuple_SET_ITEM(t, 2 + i, c);
    }
    PyObject_GC_UnTrack(t); /* bytes and ints only: never part of a cycle */
    if (sl_grow((void **)&self->prev_block_last.p, &self->prev_block_last.cap,
             self->last_key.len ? self->last_key.len : 1, 1, SL_MEM) < 0) {
        Py_DECREF(t);
        return -1;
    }
    int rc = PyList_Append(self->blocks, t);
    Py_DECREF(t);
    if (rc < 0) {
        return -1;
    }
    if (placed) {
        sink->len += total + 4;
    }
    /* room was made before the append: the copy cannot fail */
    if (self->last_key.len) {
        memcpy(self->prev_block_last.p, self->last_key.p, self->last_key.len);
    }
    self->prev_block_last.len = self->last_key.len;
    self->prev_block_last.set = 1;
    self->closed_bytes += total;
    self->data_len = 0;
    self->num_restarts = 0;
    self->block_rows = 0;
    self->block_puts = self->block_deletes = self->block_merges = 0;
    self->block_first_key.set = 0;
    return 0;
}

static int ts_field(PyObject *obj, const char *name, int *present, int64_t *out)
{
    if (obj == Py_None) {
        *present = 0;
        return 0;
    }
    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int or None, not %.100s", name,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    long long v = PyLong_AsLongLong(obj);
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s %R out of the i64 range", name, obj);
        return -1;
    }
    *present = 1;
    *out = (int64_t)v;
    return 0;
}

/* Adds one row given as raw fields (the core shared by bw_add_tuple and the native
 * pipeline's sink, csrc/pipe.h). `key_obj`, when not NULL, is an exact bytes object holding
 * k[0:klen] (kept as first_key instead of a copy). Everything that can fail on a bad row is
 * checked before any state changes, so a rejected row leaves the writer as it was. */
int bw_add_raw(BlockWriterObject *self, PyObject *key_obj, const unsigned char *k,
                      size_t klen, uint64_t seq, int kind, const unsigned char *v, size_t vlen,
                      int has_exp, int64_t exp, int has_cre, int64_t cre)
{
    if (klen == 0) {
        PyErr_SetString(PyExc_ValueError, "keys must not be empty");
        return -1;
    }
    if (kind == KIND_TOMBSTONE) {
        vlen = 0;
    }
    if (self->compacted && self->last_key.set) {
        int c = sl_key_cmp(k, klen, self->last_key.p, self->last_key.len);
        if (c < 0 || (c == 0 && seq >= self->last_seq)) {
            PyObject *kb = PyBytes_FromStringAndSize((const char *)k, (Py_ssize_t)klen);
            PyObject *lb = keybuf_bytes(&self->last_key);
            if (kb != NULL && lb != NULL) {
                PyErr_Format(PyExc_ValueError, "rows out of order: %R@%llu after %R@%llu", kb,
                             (unsigned long long)seq, lb, (unsigned long long)self->last_seq);
            }
            Py_XDECREF(kb);
            Py_XDECREF(lb);
            return -1;
        }
    }

    int restart = self->block_rows % RESTART_INTERVAL == 0;
    size_t shared = 0;
    if (!restart) {
        const unsigned char *lk = self->last_key.p;
        size_t lklen = self->last_key.len;
        size_t m = klen < lklen ? klen : lklen;
        /* 8 bytes at a time: the first differing byte is the lowest set byte of the xor */
        while (shared + 8 <= m) {
            uint64_t x = load_le64(lk + shared) ^ load_le64(k + shared);
            if (x != 0) {
                shared += (size_t)__builtin_ctzll(x) / 8;
                m = shared;
                break;
            }
            shared += 8;
        }
        while (shared < m && lk[shared] == k[shared]) {
            shared++;
        }
    }
    size_t tail = vlen + 9 + (has_exp ? 8 : 0) + (has_cre ? 8 : 0) + varint_len(vlen);
    size_t row_len = varint_len(shared) + varint_len(klen - shared) + (klen - shared) + tail;
    if (self->block_rows > 0) {
        size_t size = self->data_len + 2 * self->num_restarts + 2;
        if (size + row_len + (restart ? 2 : 0) > (size_t)self->block_size) {
            if (bw_close_block(self) < 0) {
                return -1;
            }
            restart = 1;
            shared = 0;
            row_len = varint_len(0) + varint_len(klen) + klen + tail;
        }
    }
    if (restart && self->data_len > U16_MAX) {
        PyErr_SetString(PyExc_ValueError, "block data exceeds the u16 restart offset range");
        return -1;
    }
    if (row_len > (size_t)PY_SSIZE_T_MAX - self->data_len) {
        PyErr_NoMemory();
        return -1;
    }
    if (sl_grow((void **)&self->data, &self->data_cap, self->data_len + row_len, 1, SL_MEM) < 0) {
        return -1;
    }
    if (restart && sl_grow((void **)&self->restarts, &self->restarts_cap,
                        self->num_restarts + 1, sizeof(uint16_t), SL_MEM) < 0) {
        return -1;
    }
    if (self->want_hashes && sl_grow((void **)&self->hashes, &self->hashes_cap,
                                  self->num_hashes + 1, sizeof(uint64_t), SL_MEM) < 0) {
        return -1;
    }
    for (size_t i = 0; i < self->num_prefixes; i++) {
        PrefixHashes *ph = &self->prefixes[i];
        if (klen >= ph->n &&
            (sl_grow((void **)&ph->hashes, &ph->cap, ph->num + 1, sizeof(uint64_t), SL_MEM) < 0 ||
             sl_grow((void **)&ph->last.p, &ph->last.cap, ph->n, 1, SL_MEM) < 0)) {
            return -1;
        }
    }
    if (sl_grow((void **)&self->last_key.p, &self->last_key.cap, klen, 1, SL_MEM) < 0) {
        return -1;
    }
    if (self->block_rows == 0 && self->compacted &&
        sl_grow((void **)&self->block_first_key.p, &self->block_first_key.cap, klen, 1, SL_MEM) < 0) {
        return -1;
    }
    PyObject *first = NULL;
    if (self->first_key == NULL) {
        if (key_obj != NULL) {
            first = key_obj;
            Py_INCREF(first);
        } else {
            first = PyBytes_FromStringAndSize((const char *)k, (Py_ssize_t)klen);
            if (first == NULL) {
                return -1;
            }
        }
    }

    /* nothing below can fail */
    if (restart) {
        self->restarts[self->num_restarts++] = (uint16_t)self->data_len;
    }
    unsigned char *p = self->data + self->data_len;
    p = put_varint(p, shared);
    p = put_varint(p, klen - shared);
    p = put_varint(p, vlen);
    sl_copy(p, k + shared, klen - shared);
    p += klen - shared;
    if (vlen) {
        memcpy(p, v, vlen);
        p += vlen;
    }
    store_be64(p, seq);
    unsigned flags = kind == KIND_TOMBSTONE ? FLAG_TOMBSTONE
                   : kind == KIND_MERGE ? FLAG_MERGE_OPERAND : 0u;
    if (has_exp) {
        flags |= FLAG_HAS_EXPIRE_TS;
    }
    if (has_cre) {
        flags |= FLAG_HAS_CREATE_TS;
    }
    p[8] = (unsigned char)flags;
    p += 9;
    if (has_exp) {
        store_be64(p, (uint64_t)exp);
        p += 8;
    }
    if (has_cre) {
        store_be64(p, (uint64_t)cre);
        p += 8;
    }
    self->data_len += row_len;

    if (self->block_rows == 0) {
        if (self->compacted) {
            memcpy(self->block_first_key.p, k, klen);
            self->block_first_key.len = klen;
            self->block_first_key.set = 1;
        }
        self->block_first_seq = seq;
    }
    self->block_rows++;
    if (first != NULL) {
        self->first_key = first;
        self->first_seq = seq;
    }
    sl_copy(self->last_key.p, k, klen);
    self->last_key.len = klen;
    self->last_key.set = 1;
    self->last_seq = seq;
    self->rows++;
    self->raw_key_size += klen;
    if (kind == KIND_TOMBSTONE) {
        self->deletes++;
        self->block_deletes++;
    } else {
        self->raw_val_size += vlen;
        if (kind == KIND_MERGE) {
            self->merges++;
            self->block_merges++;
        } else {
            self->puts++;
            self->block_puts++;
        }
    }
    if (self->want_hashes) {
        self->hashes[self->num_hashes++] = siphash13_raw(k, klen);
    }
    for (size_t i = 0; i < self->num_prefixes; i++) {
        PrefixHashes *ph = &self->prefixes[i];
        if (klen < ph->n || (ph->last.set && memcmp(ph->last.p, k, ph->n) == 0)) {
            continue;
        }
        ph->hashes[ph->num++] = siphash13_raw(k, ph->n);
        memcpy(ph->last.p, k, ph->n);
        ph->last.len = ph->n;
        ph->last.set = 1;
    }
    return 0;
}

/* Adds one row tuple: checks and unpacks its fields, then bw_add_raw. */
static int bw_add_tuple(BlockWriterObject *self, PyObject *row)
{
    PyObject *key_obj = PyTuple_GET_ITEM(row, 0);
    PyObject *seq_obj = PyTuple_GET_ITEM(row, 1);
    PyObject *kind_obj = PyTuple_GET_ITEM(row, 2);
    PyObject *val_obj = PyTuple_GET_ITEM(row, 3);

    if (!PyLong_Check(seq_obj)) {
        PyErr_Format(PyExc_TypeError, "seq must be an int, not %.100s",
                     Py_TYPE(seq_obj)->tp_name);
        return -1;
    }
    unsigned long long seq = PyLong_AsUnsignedLongLong(seq_obj);
    if (seq == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "seq %R out of the u64 range", seq_obj);
        return -1;
    }
    if (!PyLong_Check(kind_obj)) {
        PyErr_Format(PyExc_TypeError, "kind must be an int, not %.100s",
                     Py_TYPE(kind_obj)->tp_name);
        return -1;
    }
    long kind = PyLong_AsLong(kind_obj);
    if (kind != KIND_VALUE && kind != KIND_TOMBSTONE && kind != KIND_MERGE) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "invalid row kind %R", kind_obj);
        return -1;
    }
    int has_exp, has_cre;
    int64_t exp = 0, cre = 0;
    if (ts_field(PyTuple_GET_ITEM(row, 4), "expire_ts", &has_exp, &exp) < 0 ||
        ts_field(PyTuple_GET_ITEM(row, 5), "create_ts", &has_cre, &cre) < 0) {
        return -1;
    }
    ByteSpan key;
    if (PyBytes_CheckExact(key_obj)) {
        key.ptr = (const unsigned char *)PyBytes_AS_STRING(key_obj);
        key.len = PyBytes_GET_SIZE(key_obj);
        key.has_view = 0;
    } else if (PyObject_CheckBuffer(key_obj)) {
        if (span_get(key_obj, &key, "key") < 0) {
            return -1;
        }
    } else {
        PyErr_Format(PyExc_TypeError, "key must be bytes, not %.100s",
                     Py_TYPE(key_obj)->tp_name);
        return -1;
    }
    ByteSpan val = {NULL, 0, {0}, 0};
    int rc = -1;
    if (key.len == 0) {
        PyErr_SetString(PyExc_ValueError, "keys must not be empty");
        goto done;
    }
    if (kind != KIND_TOMBSTONE && span_get(val_obj, &val, "value") < 0) {
        goto done;
    }
    rc = bw_add_raw(self, PyBytes_CheckExact(key_obj) ? key_obj : NULL, key.ptr,
                    (size_t)key.len, (uint64_t)seq, (int)kind, val.ptr, (size_t)val.len,
                    has_exp, exp, has_cre, cre);
done:
    span_release(&val);
    span_release(&key);
    return rc;
}

/* Rows are tuples; any other sequence (a list) is converted, as the reference unpacks it. */
int bw_add_row(BlockWriterObject *self, PyObject *row)
{
    if (PyTuple_Check(row)) {
        if (PyTuple_GET_SIZE(row) != 6) {
            PyErr_Format(PyExc_ValueError, "a row has 6 fields, not %zd", PyTuple_GET_SIZE(row));
            return -1;
        }
        return bw_add_tuple(self, row);
    }
    if (!PySequence_Check(row) || PyBytes_Check(row) || PyUnicode_Check(row)) {
        PyErr_Format(PyExc_TypeError, "a row must be a 6-tuple, not %.100s",
                     Py_TYPE(row)->tp_name);
        return -1;
    }
    PyObject *t = PySequence_Tuple(row);
    if (t == NULL) {
        return -1;
    }
    int rc;
    if (PyTuple_GET_SIZE(t) != 6) {
        PyErr_Format(PyExc_ValueError, "a row has 6 fields, not %zd", PyTuple_GET_SIZE(t));
        rc = -1;
    } else {
        rc = bw_add_tuple(self, t);
    }
    Py_DECREF(t);
    return rc;
}

int bw_enter(BlockWriterObject *self)
{
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "BlockWriterV2 is already in use");
        return -1;
    }
    self->busy = 1;
    return 0;
}

static PyObject *bw_add(BlockWriterObject *self, PyObject *row)
{
    if (bw_enter(self) < 0) {
        return NULL;
    }
    int rc = bw_add_row(self, row);
    self->busy = 0;
    if (rc < 0) {
        return NULL;
    }
    return PyBool_FromLong(PyList_GET_SIZE(self->blocks) > 0);
}

static PyObject *bw_add_rows(BlockWriterObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"rows", "start", "end", NULL};
    PyObject *rows_arg, *end_obj = Py_None;
    Py_ssize_t start = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|nO:add_rows", kwlist, &rows_arg, &start,
                                     &end_obj)) {
        return NULL;
    }
    Py_ssize_t end = PY_SSIZE_T_MAX;
    if (end_obj != Py_None) {
        end = PyNumber_AsSsize_t(end_obj, PyExc_OverflowError);
        if (end == -1 && PyErr_Occurred()) {
            return NULL;
        }
    }
    if (start < 0 || end < 0) {
        PyErr_SetString(PyExc_ValueError, "start and end must not be negative");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(rows_arg, "rows must be a list or tuple of rows");
    if (seq == NULL) {
        return NULL;
    }
    if (bw_enter(self) < 0) {
        Py_DECREF(seq);
        return NULL;
    }
    int rc = 0;
    /* the length is re-read every step: a GC finalizer could shrink the list */
    for (Py_ssize_t i = start; i < end && i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *row = PySequence_Fast_GET_ITEM(seq, i);
        Py_INCREF(row);
        rc = bw_add_row(self, row);
        Py_DECREF(row);
        if (rc < 0) {
            break;
        }
    }
    self->busy = 0;
    Py_DECREF(seq);
    if (rc < 0) {
        return NULL;
    }
    return PyLong_FromSsize_t(PyList_GET_SIZE(self->blocks));
}

static PyObject *bw_finish_block(BlockWriterObject *self, PyObject *unused)
{
    (void)unused;
    if (bw_enter(self) < 0) {
        return NULL;
    }
    int rc = self->block_rows > 0 ? bw_close_block(self) : 0;
    self->busy = 0;
    if (rc < 0) {
        return NULL;
    }
    return PyBool_FromLong(PyList_GET_SIZE(self->blocks) > 0);
}

static PyObject *bw_take_blocks(BlockWriterObject *self, PyObject *unused)
{
    (void)unused;
    if (bw_enter(self) < 0) {
        return NULL;
    }
    PyObject *fresh = PyList_New(0);
    self->busy = 0;
    if (fresh == NULL) {
        return NULL;
    }
    PyObject *out = self->blocks;
    self->blocks = fresh;
    self->sink_off = 0;
    return out;
}

/* set_sink(blocks | None): frame finished blocks straight into an SstBlocks' buffer (see
 * SlSink in csrc/common.h); only for uncompressed SSTs (the caller's choice) */
static PyObject *bw_set_sink(BlockWriterObject *self, PyObject *owner)
{
    if (bw_enter(self) < 0) {
        return NULL;
    }
    self->busy = 0;
    if (PyList_GET_SIZE(self->blocks) > 0) {
        PyErr_SetString(PyExc_ValueError, "set_sink() with finished blocks not taken");
        return NULL;
    }
    SlSink *sink = NULL;
    if (owner != Py_None) {
        PyObject *cap = PyObject_CallMethod(owner, "sink_capsule", NULL);
        if (cap == NULL) {
            return NULL;
        }
        sink = PyCapsule_GetPointer(cap, SL_SINK_CAPSULE);
        Py_DECREF(cap); /* the pointer lives as long as its owner, which we keep */
        if (sink == NULL) {
            return NULL;
        }
        Py_INCREF(owner);
    }
    Py_XSETREF(self->sink_owner, owner == Py_None ? NULL : owner);
    self->sink = sink;
    self->sink_off = 0;
    Py_RETURN_NONE;
}

static PyObject *bw_hashes(BlockWriterObject *self, PyObject *unused)
{
    (void)unused;
    return PyBytes_FromStringAndSize((const char *)self->hashes,
                                     (Py_ssize_t)(self->num_hashes * sizeof(uint64_t)));
}

static PyObject *bw_prefix_hashes(BlockWriterObject *self, PyObject *arg)
{
    Py_ssize_t i = PyLong_AsSsize_t(arg);
    if (i == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (i < 0 || (size_t)i >= self->num_prefixes) {
        PyErr_Format(PyExc_IndexError, "no prefix extractor %zd", i);
        return NULL;
    }
    const PrefixHashes *ph = &self->prefixes[i];
    return PyBytes_FromStringAndSize((const char *)ph->hashes,
                                     (Py_ssize_t)(ph->num * sizeof(uint64_t)));
}

static PyObject *bw_bloom(BlockWriterObject *self, PyObject *arg)
{
    long long bits_per_key = PyLong_AsLongLong(arg);
    if (bits_per_key == -1 && PyErr_Occurred()) {
        return NULL;
    }
    /* busy: bloom_build_raw may release the GIL while it reads self->hashes */
    if (bw_enter(self) < 0) {
        return NULL;
    }
    PyObject *out = bloom_build_raw((const unsigned char *)self->hashes, self->num_hashes,
                                    bits_per_key);
    self->busy = 0;
    return out;
}

static PyObject *opt_key(PyObject *key)
{
    if (key == NULL) {
        Py_RETURN_NONE;
    }
    Py_INCREF(key);
    return key;
}

static PyObject *bw_get_first_key(BlockWriterObject *self, void *c)
{
    (void)c;
    return opt_key(self->first_key);
}

static PyObject *bw_get_last_key(BlockWriterObject *self, void *c)
{
    (void)c;
    if (!self->last_key.set) {
        Py_RETURN_NONE;
    }
    return keybuf_bytes(&self->last_key);
}

static PyObject *bw_get_first_seq(BlockWriterObject *self, void *c)
{
    (void)c;
    if (self->first_key == NULL) {
        Py_RETURN_NONE;
    }
    return PyLong_FromUnsignedLongLong(self->first_seq);
}

static PyObject *bw_get_last_seq(BlockWriterObject *self, void *c)
{
    (void)c;
    if (!self->last_key.set) {
        Py_RETURN_NONE;
    }
    return PyLong_FromUnsignedLongLong(self->last_seq);
}

static PyObject *bw_get_open_size(BlockWriterObject *self, void *c)
{
    (void)c;
    if (self->block_rows == 0) {
        return PyLong_FromLong(0);
    }
    return PyLong_FromSize_t(self->data_len + 2 * self->num_restarts + 2);
}

#define BW_U64_GETTER(field)                                                              \
    static PyObject *bw_get_##field(BlockWriterObject *self, void *c)                     \
    {                                                                                     \
        (void)c;                                                                          \
        return PyLong_FromUnsignedLongLong(self->field);                                  \
    }

BW_U64_GETTER(rows)
BW_U64_GETTER(puts)
BW_U64_GETTER(deletes)
BW_U64_GETTER(merges)
BW_U64_GETTER(raw_key_size)
BW_U64_GETTER(raw_val_size)

static PyObject *bw_get_open_rows(BlockWriterObject *self, void *c)
{
    (void)c;
    return PyLong_FromSsize_t(self->block_rows);
}

static PyObject *bw_get_block_size(BlockWriterObject *self, void *c)
{
    (void)c;
    return PyLong_FromSsize_t(self->block_size);
}

static PyObject *bw_get_compacted(BlockWriterObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(self->compacted);
}

static PyGetSetDef bw_getset[] = {
    {"num_rows", (getter)bw_get_rows, NULL, "rows added", NULL},
    {"num_puts", (getter)bw_get_puts, NULL, "value rows added", NULL},
    {"num_deletes", (getter)bw_get_deletes, NULL, "tombstones added", NULL},
    {"num_merges", (getter)bw_get_merges, NULL, "merge operands added", NULL},
    {"raw_key_size", (getter)bw_get_raw_key_size, NULL, "sum of key lengths", NULL},
    {"raw_val_size", (getter)bw_get_raw_val_size, NULL, "sum of value lengths", NULL},
    {"first_key", (getter)bw_get_first_key, NULL, "key of the first row, or None", NULL},
    {"first_seq", (getter)bw_get_first_seq, NULL, "seq of the first row, or None", NULL},
    {"last_key", (getter)bw_get_last_key, NULL, "key of the last row, or None", NULL},
    {"last_seq", (getter)bw_get_last_seq, NULL, "seq of the last row, or None", NULL},
    {"open_size", (getter)bw_get_open_size, NULL,
     "encoded size of the open block (0 when it is empty)", NULL},
    {"open_rows", (getter)bw_get_open_rows, NULL, "rows in the open block", NULL},
    {"block_size", (getter)bw_get_block_size, NULL, "target block size", NULL},
    {"compacted", (getter)bw_get_compacted, NULL,
     "True: ordering checks and key separators; False: WAL (seq separators)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef bw_methods[] = {
    {"add", (PyCFunction)bw_add, METH_O,
     "add(row) -> bool\n\nAdd one row; True if finished blocks are waiting in take_blocks()."},
    {"add_rows", (PyCFunction)(void (*)(void))bw_add_rows, METH_VARARGS | METH_KEYWORDS,
     "add_rows(rows, start=0, end=None) -> int\n\n"
     "Add rows[start:end] in order; returns the number of finished blocks waiting.\n"
     "A rejected row raises; the rows before it stay added."},
    {"finish_block", (PyCFunction)bw_finish_block, METH_NOARGS,
     "finish_block() -> bool\n\nClose the open block if it holds rows."},
    {"set_sink", (PyCFunction)bw_set_sink, METH_O,
     "set_sink(blocks) -> None\n\n"
     "Frame each finished block (with its CRC-32) straight into the buffer of `blocks` (an\n"
     "_sstwrite.SstBlocks; None: stop) where it fits; take_blocks() then gives its length\n"
     "instead of its bytes, and SstBlocks.add(blocks) (without compression) records it."},
    {"take_blocks", (PyCFunction)bw_take_blocks, METH_NOARGS,
     "take_blocks() -> list\n\n"
     "Finished blocks since the last call, as (raw_block, index_key, puts, deletes, merges)."},
    {"hashes", (PyCFunction)bw_hashes, METH_NOARGS,
     "hashes() -> bytes\n\nSipHash-1-3 of every row's key so far, native-endian u64."},
    {"prefix_hashes", (PyCFunction)bw_prefix_hashes, METH_O,
     "prefix_hashes(i) -> bytes\n\nSipHash-1-3 of the prefixes of extractor i (prefix_lens[i]\n"
     "bytes of each key at least that long, a prefix equal to the previous one skipped),\n"
     "native-endian u64."},
    {"bloom", (PyCFunction)bw_bloom, METH_O,
     "bloom(bits_per_key) -> bytes\n\nBloom filter data over hashes()."},
    {NULL, NULL, 0, NULL},
};

PyDoc_STRVAR(bw_doc,
"BlockWriterV2(block_size, *, compacted=True, want_hashes=False, prefix_lens=())\n\n"
"Cuts rows into v2 data blocks with 0.17.0's fit rule and keeps an SST's bookkeeping:\n"
"ordering checks (compacted), per-block and total stats, first/last key and seq, index\n"
"keys (key separators when compacted, first seq when not) and, with want_hashes, the\n"
"SipHash-1-3 of every row's key; per prefix_lens entry N (at most 8), the SipHash-1-3\n"
"of the first N bytes of keys at least N long (prefix_hashes(i)).");

PyTypeObject BlockWriterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "slatelib._speedups.BlockWriterV2",
    .tp_basicsize = sizeof(BlockWriterObject),
    .tp_dealloc = (destructor)bw_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = bw_doc,
    .tp_methods = bw_methods,
    .tp_getset = bw_getset,
    .tp_new = bw_new,
};

/* ------------------------------------------------------------------ module */

static PyMethodDef module_methods[] = {
    {"siphash13", py_siphash13, METH_O, siphash13_doc},
    {"siphash13_many", py_siphash13_many, METH_O, siphash13_many_doc},
    {"bloom_build", py_bloom_build, METH_VARARGS, bloom_build_doc},
    {"bloom_check", py_bloom_check, METH_VARARGS, bloom_check_doc},
    {"decode_block_v2", py_decode_block_v2, METH_O, decode_block_v2_doc},
    {"decode_block_v1", py_decode_block_v1, METH_O, decode_block_v1_doc},
    {"range_stats", py_range_stats, METH_O, range_stats_doc},
    {"decode_blocks", py_decode_blocks, METH_VARARGS, decode_blocks_doc},
    {"index_metas", py_index_metas, METH_VARARGS, index_metas_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "slatelib._speedups",
    .m_doc = "Native hot paths of slatelib's SST codec; slatelib.format.native loads it.",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__speedups(void)
{
    sl_crc32_init();
    if (PyType_Ready(&BlockWriterType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&speedups_module);
    if (m == NULL) {
        return NULL;
    }
    Py_INCREF(&BlockWriterType);
    if (PyModule_AddObject(m, "BlockWriterV2", (PyObject *)&BlockWriterType) < 0) {
        Py_DECREF(&BlockWriterType);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "RESTART_INTERVAL", RESTART_INTERVAL) < 0 ||
        pipe_init_module(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
