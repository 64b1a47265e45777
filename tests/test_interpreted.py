"""``_numba_cache.interpreted_or_compiled``: a kernel runs its own source in the interpreter
while that costs less than compiling it, then compiled; decided by the callers' estimates."""

import numpy as np
from numba import njit

from ipusim import _numba_cache


@njit
def _double(x, out):
    for i in range(x.size):
        out[i] = 2 * x[i]


def _fresh():
    return njit(_double.py_func)  # a dispatcher nothing has compiled yet


def test_interpreted_until_the_estimates_reach_the_compile():
    k = _fresh()
    x = np.arange(4.0)
    for _ in range(3):  # 0.3 + 0.3 + 0.3 <= 1.0: all interpreted
        out = np.zeros(4)
        _numba_cache.interpreted_or_compiled(k, (x, out), 0.3, 1.0)
        assert np.array_equal(out, 2 * x)
        assert not k.signatures
    out = np.zeros(4)
    _numba_cache.interpreted_or_compiled(k, (x, out), 0.3, 1.0)  # 1.2 > 1.0: compiled
    assert np.array_equal(out, 2 * x)
    assert len(k.signatures) == 1


def test_a_compiled_kernel_is_never_interpreted():
    k = _fresh()
    k(np.arange(2.0), np.zeros(2))
    called = []
    k.py_func = lambda *a: called.append(a)  # would record an interpreted run
    out = np.zeros(3)
    _numba_cache.interpreted_or_compiled(k, (np.arange(3.0), out), 0.0, 1.0)
    assert not called and np.array_equal(out, [0.0, 2.0, 4.0])


def test_a_call_over_the_compile_estimate_compiles_at_once():
    k = _fresh()
    out = np.zeros(2)
    _numba_cache.interpreted_or_compiled(k, (np.arange(2.0), out), 5.0, 1.0)
    assert len(k.signatures) == 1 and np.array_equal(out, [0.0, 2.0])
