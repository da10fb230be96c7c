"""Native-only test cases, and how they behave under the pure run of the unit suite.

``make test-pure`` runs ``tests/unit`` with ``SLATELIB_NO_NATIVE=1``: every public function
then takes its pure-Python reference, and the cases that test the C code itself (a native
function against its reference, a property of the build) are skipped with
:data:`PURE_RUN_REASON`; the native run of the same suite covers them. Without that
variable, a missing extension fails those cases: a build that silently fell back to Python
would leave the native code untested.
"""

from __future__ import annotations

import pytest

from slatelib.format import native

PURE_RUN = native.DISABLED_BY_ENV
"""This process runs the pure path (``SLATELIB_NO_NATIVE=1`` was set)."""

PURE_RUN_REASON = ("native-only case: SLATELIB_NO_NATIVE=1 runs the pure-Python path; the "
                   "native run of the suite covers this case")


def require_native(built: bool, what: str) -> None:
    """Skip under the pure run; else fail unless ``built`` (``what`` is the missing part)."""
    if PURE_RUN:
        pytest.skip(PURE_RUN_REASON)
    assert built, (f"{what} is not built: `pip install -e .` (or `make install`) builds it "
                   "in place with gcc and the Python headers; see setup.py")


native_only = pytest.mark.skipif(PURE_RUN, reason=PURE_RUN_REASON)
"""For a case that only exercises native code and checks the build itself."""
