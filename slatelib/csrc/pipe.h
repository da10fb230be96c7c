/*
 * The native decode -> merge -> sink pipeline of slatelib._speedups (check_blocks,
 * CheckedBlocks, Pipe, pipe_crc32), compiled as csrc/pipe.c; what it offers _speedups.c.
 * Python reference: slatelib/format/native_pipe.py's pure paths and
 * slatelib/format/native_merge.py; tests: tests/unit/format/test_native_pipe.py,
 * tests/unit/format/test_native_merge.py; design: docs/rfcs/0015-native-pipeline.md.
 */
#ifndef SLATELIB_CSRC_PIPE_H
#define SLATELIB_CSRC_PIPE_H

#include "common.h"

/* Called from PyInit__speedups: adds the functions check_blocks and pipe_crc32, the types
 * CheckedBlocks and Pipe, the error classes PipeInputError and PipeWriterError, and the
 * PIPE_* constants to the module m. 0, or -1 with an exception. */
int pipe_init_module(PyObject *m);

#endif /* SLATELIB_CSRC_PIPE_H */
