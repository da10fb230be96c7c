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

int sl_grow(void **buf, size_t *cap, size_t need, size_t elem, int mem)
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
    crc_ready = 1;
}

uint32_t sl_crc32_table(const unsigned char *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
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
    return c ^ 0xFFFFFFFFu;
}

uint32_t sl_crc32(const unsigned char *p, size_t n)
{
    if (zlib_crc32_raw != NULL) {
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
