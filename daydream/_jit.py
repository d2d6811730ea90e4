"""numba's decorators as daydream compiles with them: cached on disk next to the module (or in numba's user cache
where that is read-only), the GIL released so that a compiled loop runs beside Python on another core.

:data:`jit_without_runtime` is for code that allocates nothing and is called often with arrays: with numba's runtime
(NRT), every array handed to a compiled function is reference-counted on entry and on exit by atomic instructions,
whatever the function does with it. Per call that is a few dozen cycles per array; for helpers called per key, value,
task or heap step it was most of the time, measured on the 1M-event tiling: the JSON scanner's 45 batches in 0.50 s
against 0.87-1.0 s with it, the frontier loop over 326k tasks in 0.009 s against 0.10 s. numba compiles its own hot
helpers so (its sorts, its string functions) with the option ``_nrt``, which it does not document; where a numba has
no such option, the code is compiled with the runtime: the same results, slower.
"""

from __future__ import annotations

import sys
from typing import Any

import numba


def _array_math_without_blas() -> None:
    """numba's array functions loaded without asking scipy for BLAS. The first compiled call loads them, and with them
    scipy.linalg (0.14 s of a 5 s run: the whole package, to learn whether np.convolve and np.correlate may take their
    inner products from BLAS). daydream's compiled code calls neither; where they are called in a process whose
    numba loaded them here, they use numba's own loop (the same sums, slower). np.dot and the other linear algebra
    ask scipy for BLAS when they are compiled, as before. Where scipy.linalg is loaded already, nothing changes."""
    if "numba.np.arraymath" in sys.modules or "scipy.linalg.cython_blas" in sys.modules:
        return
    # the import fails while this holds: numba's check finds no BLAS
    sys.modules["scipy.linalg.cython_blas"] = None  # type: ignore[assignment]
    try:
        import numba.np.arraymath  # noqa: F401
    finally:
        del sys.modules["scipy.linalg.cython_blas"]


_array_math_without_blas()
jit = numba.njit(cache=True, nogil=True)


def _runtime_optional() -> bool:
    """Whether this numba can compile a function without its runtime (an option of its CPU target named ``_nrt``)."""
    try:
        from numba.core.cpu import CPUTargetOptions

        return isinstance(getattr(CPUTargetOptions, "_nrt", None), CPUTargetOptions.Mapping)
    except Exception:  # noqa: BLE001 - numba's internals moved: compile with the runtime
        return False


RUNTIME_OPTIONAL = _runtime_optional()
# code that allocates nothing (no array made, sliced or copied: numba says so when it compiles, "NRT required")
jit_without_runtime: Any = numba.njit(cache=True, nogil=True, _nrt=False) if RUNTIME_OPTIONAL else jit
