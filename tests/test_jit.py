"""The compiled helpers called per key, value, task or heap step run without numba's runtime (daydream._jit): with
it, every array handed to them is reference-counted by atomic instructions, which took most of their time. The same
results either way are held by the tests of each compiled path (test_event_columns, test_cpu_sweep,
test_simulation_compiled); these hold the option itself, so that losing it is seen, not only felt."""

from __future__ import annotations

import pytest

pytest.importorskip("numba")

from daydream import _jit  # noqa: E402
from daydream.graph.build import cpu_sweep  # noqa: E402
from daydream.simulation import compiled  # noqa: E402
from daydream.trace import json_scan  # noqa: E402

HOT = [
    *(
        getattr(json_scan, f)
        for f in ("_space", "_hex", "_string", "_number", "_literal", "_slot_of", "_intern", "_scan")
    ),
    cpu_sweep._context,
    *(getattr(compiled, f) for f in ("_less", "_push", "_run", "_swap", "_sift_up", "_sift_down")),
]


def test_this_numba_compiles_without_its_runtime() -> None:
    # a numba that drops the option still gives the same results, slower: this says so where it happens
    assert _jit.RUNTIME_OPTIONAL


@pytest.mark.parametrize("helper", HOT, ids=lambda f: f"{f.py_func.__module__.rsplit('.', 1)[-1]}.{f.py_func.__name__}")
def test_hot_helpers_are_compiled_without_the_runtime(helper: object) -> None:
    assert helper.targetoptions.get("_nrt") is False  # type: ignore[attr-defined]


def test_the_loops_that_allocate_keep_it() -> None:
    for loop in (json_scan.scan, cpu_sweep._nesting, cpu_sweep._sweep, compiled._simulate_arrays):
        assert "_nrt" not in loop.targetoptions


def test_a_numba_without_the_option_compiles_with_the_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    from numba.core.cpu import CPUTargetOptions

    assert _jit._runtime_optional()
    owner = next(c for c in CPUTargetOptions.__mro__ if "_nrt" in vars(c))  # a base class of numba's options
    monkeypatch.delattr(owner, "_nrt")
    assert not _jit._runtime_optional()


def test_loading_the_compiled_code_does_not_load_scipy_linalg() -> None:
    # numba's array functions ask scipy for BLAS when first loaded: 0.14 s of a run, for functions daydream does not
    # compile; in a fresh process (the suite may have loaded scipy) they load without it, and still work
    import subprocess
    import sys

    code = (
        "import sys, numpy as np, numba\n"
        "from daydream.trace import json_scan\n"
        "from daydream.simulation import compiled\n"
        "assert numba.njit(lambda x: x + 1)(1) == 2\n"  # a first compiled call: numba loads its functions
        "assert 'scipy.linalg' not in sys.modules, 'scipy.linalg loaded'\n"
        "assert 'scipy.linalg.cython_blas' not in sys.modules\n"
        "print(numba.njit(lambda a, b: np.convolve(a, b))(np.ones(3), np.ones(2)).tolist(),"
        " numba.njit(lambda a, b: np.dot(a, b))(np.ones(3), np.ones(3)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[1.0,", "2.0,", "2.0,", "1.0]", "3.0"]
