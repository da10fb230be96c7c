"""pytest plugin of ``make test-sanitize``: the native differential tests on ASan + UBSan builds.

Loaded with ``-p tests.unit.format._sanitizer_run`` from the sanitized copy of the tree
(``build/sanitize/tree``; see the Makefile and docs/rfcs/0020-house-second-step.md). Under
the sanitizers every allocation of the interpreter goes through ASan's allocator
(``PYTHONMALLOC=malloc``), which makes the pure-Python reference side of each differential
test several times slower. The property tests therefore run a quarter of their examples
(at least 25) there: every C path is still driven by generated inputs, and ``make
test-unit`` runs the full counts on the normal build.

It also refuses to run against extensions that were not built with AddressSanitizer, so a
broken sanitized build cannot pass silently on the pure-Python fallback.
"""

from __future__ import annotations

import pytest
from hypothesis import settings

from slatelib import _manifest, _speedups, _sstwrite

SCALE = 4
FLOOR = 25


def pytest_configure(config: pytest.Config) -> None:
    for ext in (_speedups, _manifest, _sstwrite):
        path = ext.__file__ or ""
        with open(path, "rb") as f:
            if b"__asan_init" not in f.read():
                raise pytest.UsageError(f"{path} was not built with AddressSanitizer")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fn = getattr(getattr(item, "obj", None), "__func__", getattr(item, "obj", None))
        # the settings a @given test carries (hypothesis keeps them on the test function)
        current = getattr(fn, "_hypothesis_internal_use_settings", None)
        if isinstance(current, settings) and current.max_examples > FLOOR:
            fewer = max(FLOOR, current.max_examples // SCALE)
            fn._hypothesis_internal_use_settings = settings(current, max_examples=fewer)
