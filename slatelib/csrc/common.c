/*
 * The common parts of slatelib's C extensions: see csrc/common.h (the growth buffer, the
 * CRC-32, borrowed bytes). Reference of sl_crc32: zlib.crc32 (slatelib/format/checksum.py);
 * tests: tests/unit/format/test_native_pipe.py (pipe_crc32, both ways) and every native
 * differential test; design: docs/rfcs/0020-house-second-step.md.
 */
#include "common.h"

#if defined(__linux__) || defined(__APPLE__)
#include <dlfcn.h>
#define SL_HAVE_DLSYM 1
#endif

/* ------------------------------------------------------------------ the growth buffer */

size_t sl_grown_cap(size_t cap, size_t need, size_t elem)
{
    size_t limit = (size_t)PY_SSIZE_T_MAX / elem;
    if (need > limit) {
        return 0;
    }
    size_t new_cap = cap ? cap : 64;
    while (new_cap < need) {
        if (new_cap > limit / 2) {
            return need;
        }
        new_cap *= 2;
    }
    return new_cap;
}

int sl_grow_slow(void **buf, size_t *cap, size_t need, size_t elem, int mem)
{
    if (need <= *cap) {
        return 0;
    }
    size_t new_cap = sl_grown_cap(*cap, need, elem);
    void *p = NULL;
    if (new_cap != 0) {
        p = mem == SL_RAW ? PyMem_RawRealloc(*buf, new_cap * elem)
                          : PyMem_Realloc(*buf, new_cap * elem);
    }
    if (p == NULL) {
        if (mem != SL_RAW) {
            PyErr_NoMemory();
        }
        return -1;
    }
    *buf = p;
    *cap = new_cap;
    return 0;
}

int sl_buf_put(SlBuf *b, const void *src, size_t n)
{
    if (b->len + n < b->len ||
        sl_grow((void **)&b->p, &b->cap, b->len + n ? b->len + n : 1, 1, SL_MEM) < 0) {
        return -1;
    }
    if (n) {
        memcpy(b->p + b->len, src, n);
    }
    b->len += n;
    return 0;
}

void sl_buf_free(SlBuf *b)
{
    PyMem_Free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* ------------------------------------------------------------------ CRC-32 (zlib's) */

/* zlib's own crc32 (the function zlib.crc32 calls), found in the libz the interpreter's zlib
 * module already loaded; NULL: the table-driven CRC below (the same function, slower). */
typedef unsigned long (*zlib_crc32_t)(unsigned long, const unsigned char *, unsigned int);
static zlib_crc32_t zlib_crc32_raw;
static uint32_t crc_table[8][256];
static int crc_ready;
static void crc_find_clmul(void);

static void crc_find_zlib(void)
{
#if defined(SL_HAVE_DLSYM) && !defined(__SANITIZE_ADDRESS__)
    /* (under AddressSanitizer the table is used, so that every byte read is checked) */
    /* only a libz that is loaded already (by `import zlib`): never load a library here */
    PyObject *zlib = PyImport_ImportModule("zlib");
    if (zlib == NULL) {
        PyErr_Clear();
        return;
    }
    Py_DECREF(zlib);
    static const char *names[] = {"libz.so.1", "libz.so", "libz.1.dylib", "libz.dylib"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_NOLOAD);
        if (h != NULL) {
            void *sym = dlsym(h, "crc32");
            /* ISO C has no function-pointer cast from void *; POSIX guarantees it works */
            memcpy(&zlib_crc32_raw, &sym, sizeof zlib_crc32_raw);
            if (zlib_crc32_raw != NULL) {
                return;
            }
        }
    }
#endif
}

void sl_crc32_init(void)
{
    if (crc_ready) {
        return;
    }
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) {
            c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        }
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
        for (int t = 1; t < 8; t++) {
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
        }
    }
    crc_find_zlib();
    crc_find_clmul();
    crc_ready = 1;
}

/* The register update of the reflected CRC-32 over p[0:n] from state c (no inversions). */
static uint32_t crc_table_update(uint32_t c, const unsigned char *p, size_t n)
{
    while (n >= 8) {
        uint32_t a = c ^ load_le32(p);
        c = crc_table[7][a & 0xFF] ^ crc_table[6][(a >> 8) & 0xFF] ^
            crc_table[5][(a >> 16) & 0xFF] ^ crc_table[4][a >> 24] ^ crc_table[3][p[4]] ^
            crc_table[2][p[5]] ^ crc_table[1][p[6]] ^ crc_table[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--) {
        c = crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    }
    return c;
}

uint32_t sl_crc32_table(const unsigned char *p, size_t n)
{
    return crc_table_update(0xFFFFFFFFu, p, n) ^ 0xFFFFFFFFu;
}

/* ------------------------------------------------------------------ CRC-32 by folding
 *
 * Carry-less multiplication (PCLMULQDQ) folds the message 64 bytes at a time (four 128-bit
 * lanes), then the lanes into one, 16 bytes at a time; the last 128-bit lane is congruent,
 * modulo the CRC polynomial, to everything folded so far, so the table finishes it (16 bytes
 * from state 0: the initial inversion was folded into the first bytes) and the tail.
 *
 * Bit i of a little-endian 128-bit lane is the coefficient of degree 127 - i (the reflected
 * CRC's bit order). Folding a lane X = H x^64 + L (H: its low quadword) forward by N bits is
 * X x^N = H x^(64+N) + L x^N; a carry-less product of two such reflected quadwords lands one
 * degree low, so the constants are x^(63+N) mod P (for H) and x^(N-1) mod P (for L), computed
 * here at init rather than written down. Runtime CPU detection picks this path; elsewhere
 * zlib's crc32 or the table. */

static uint64_t fold_h128, fold_l128, fold_h512, fold_l512;
static int have_clmul;

/* x^n mod P (P = the CRC-32 polynomial, normal bit order), reflected into the high half of a
 * quadword: bit 63 - d holds the coefficient of degree d. */
static uint64_t xpow_mod_reflected(unsigned n)
{
    uint64_t r = 1; /* x^0 */
    for (unsigned i = 0; i < n; i++) {
        r <<= 1;
        if (r & 0x100000000ull) {
            r ^= 0x104C11DB7ull;
        }
    }
    uint64_t out = 0;
    for (int d = 0; d < 32; d++) {
        if (r >> d & 1) {
            out |= 1ull << (63 - d);
        }
    }
    return out;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SL_HAVE_CLMUL_CODE 1
#include <immintrin.h>

__attribute__((target("pclmul,sse2")))
static inline __m128i fold_lane(__m128i x, __m128i k)
{
    return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

/* Requires n >= 64. */
__attribute__((target("pclmul,sse2")))
static uint32_t crc_clmul(uint32_t crc, const unsigned char *p, size_t n)
{
    const __m128i k512 = _mm_set_epi64x((long long)fold_l512, (long long)fold_h512);
    const __m128i k128 = _mm_set_epi64x((long long)fold_l128, (long long)fold_h128);
    __m128i a = _mm_loadu_si128((const __m128i *)p);
    __m128i b = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(p + 32));
    __m128i d = _mm_loadu_si128((const __m128i *)(p + 48));
    a = _mm_xor_si128(a, _mm_cvtsi32_si128((int)~crc));
    p += 64;
    n -= 64;
    while (n >= 64) {
        a = _mm_xor_si128(fold_lane(a, k512), _mm_loadu_si128((const __m128i *)p));
        b = _mm_xor_si128(fold_lane(b, k512), _mm_loadu_si128((const __m128i *)(p + 16)));
        c = _mm_xor_si128(fold_lane(c, k512), _mm_loadu_si128((const __m128i *)(p + 32)));
        d = _mm_xor_si128(fold_lane(d, k512), _mm_loadu_si128((const __m128i *)(p + 48)));
        p += 64;
        n -= 64;
    }
    a = _mm_xor_si128(fold_lane(a, k128), b);
    a = _mm_xor_si128(fold_lane(a, k128), c);
    a = _mm_xor_si128(fold_lane(a, k128), d);
    while (n >= 16) {
        a = _mm_xor_si128(fold_lane(a, k128), _mm_loadu_si128((const __m128i *)p));
        p += 16;
        n -= 16;
    }
    unsigned char lane[16];
    _mm_storeu_si128((__m128i *)lane, a);
    uint32_t state = crc_table_update(0, lane, 16);
    return crc_table_update(state, p, n) ^ 0xFFFFFFFFu;
}
#endif

static void crc_find_clmul(void)
{
    fold_h128 = xpow_mod_reflected(63 + 128);
    fold_l128 = xpow_mod_reflected(128 - 1);
    fold_h512 = xpow_mod_reflected(63 + 512);
    fold_l512 = xpow_mod_reflected(512 - 1);
#if defined(SL_HAVE_CLMUL_CODE) && !defined(__SANITIZE_ADDRESS__)
    __builtin_cpu_init();
    have_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse2");
#endif
}

uint32_t sl_crc32_clmul(const unsigned char *p, size_t n)
{
#if defined(SL_HAVE_CLMUL_CODE)
    if (have_clmul && n >= 64) {
        return crc_clmul(0, p, n);
    }
#endif
    return sl_crc32_table(p, n);
}

int sl_crc32_uses_clmul(void) { return have_clmul; }

uint32_t sl_crc32(const unsigned char *p, size_t n)
{
#if defined(SL_HAVE_CLMUL_CODE)
    if (have_clmul && n >= 64) {
        return crc_clmul(0, p, n);
    }
#endif
    if (zlib_crc32_raw != NULL && n >= 64) {
        unsigned long z = 0;
        while (n > 0) {
            unsigned int step = n > (1u << 30) ? (1u << 30) : (unsigned int)n;
            z = zlib_crc32_raw(z, p, step);
            p += step;
            n -= step;
        }
        return (uint32_t)z;
    }
    return sl_crc32_table(p, n);
}

int sl_crc32_uses_zlib(void) { return zlib_crc32_raw != NULL; }

/* ------------------------------------------------------------------ borrowed bytes */

int span_get(PyObject *obj, ByteSpan *span, const char *what)
{
    span->has_view = 0;
    if (PyBytes_Check(obj)) {
        span->ptr = (const unsigned char *)PyBytes_AS_STRING(obj);
        span->len = PyBytes_GET_SIZE(obj);
        return 0;
    }
    if (!PyObject_CheckBuffer(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be a bytes-like object, not %.100s", what,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (PyObject_GetBuffer(obj, &span->view, PyBUF_SIMPLE) < 0) {
        return -1;
    }
    span->has_view = 1;
    span->ptr = (const unsigned char *)span->view.buf;
    span->len = span->view.len;
    return 0;
}

void span_release(ByteSpan *span)
{
    if (span->has_view) {
        PyBuffer_Release(&span->view);
        span->has_view = 0;
    }
}
