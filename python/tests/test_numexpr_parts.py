"""The parts of numexpr's own tests that lazyfuse can run, from tests that the
numexpr suite skips as a whole because their remaining parts use complex
numbers, strings or numexpr's virtual machine (python/numexpr_suite: the
skip list names each). Copied from numexpr 2.14's test_numexpr.py, with
lazyfuse.numexpr as numexpr."""

import numpy as np
from numpy.testing import assert_array_almost_equal, assert_array_equal, assert_equal
import pytest

from lazyfuse.numexpr import evaluate


def test_bool_funcs_real_part():
    array_size = 100
    a = np.arange(2 * array_size, dtype=np.float32)
    a[array_size // 2] = np.nan
    a[array_size // 3] = np.inf
    a[array_size // 4] = -2
    for dtype in (np.float32, np.float64):
        a = a.astype(dtype)
        assert_equal(evaluate("isnan(a)"), np.isnan(a))
        assert_equal(evaluate("isfinite(a)"), np.isfinite(a))
        assert_equal(evaluate("isinf(a)"), np.isinf(a))
        assert_equal(evaluate("signbit(a)"), np.signbit(a))


def test_sign_round_real_part():
    for dtype in [float, np.double, np.int32, np.int64]:
        x = np.arange(10, dtype=dtype)
        y = 2 * np.arange(10, dtype=dtype)[::-1]
        r = x - y
        if not np.issubdtype(dtype, np.integer):
            r[-1] = np.nan
        assert evaluate("round(r)").dtype == np.round(r).dtype
        assert evaluate("sign(r)").dtype == np.sign(r).dtype
        assert_array_equal(evaluate("sign(r)"), np.sign(r))
        assert_array_equal(evaluate("round(r)"), np.round(r))
    a = np.arange(1e6)
    b = np.arange(1e6) * 0.1
    x = (a + 2 * b) / (1 + a + 4 * b * b)
    y = evaluate("(a + 2*b) / (1 + a + 4*b*b)")
    assert_array_almost_equal(x, y)


@pytest.mark.parametrize("ex", ["__builtins__", "lambda x: x", 'locals()["evaluate"]', "import os;",
                                "os. cpu_count()", "(3+1).ᵇit_length()"])
def test_sanitize_refuses(ex, monkeypatch):
    monkeypatch.setenv("NUMEXPR_SANITIZE", "1")
    with pytest.raises(ValueError):
        evaluate(ex)


def test_sanitize_passes_numbers():
    a = 3.0
    for ex in ["a*2.e-5", "a*2.e+5", "a*2e-5", "a*2e+5", "a*2E-5", "a*2.0e5", "a*2.2e5", "2.+a"]:
        assert_array_almost_equal(evaluate(ex), eval(ex))


def test_no_sanitize_first_half(monkeypatch):
    with pytest.raises(SyntaxError):
        evaluate("import os;", sanitize=False)
    monkeypatch.setenv("NUMEXPR_SANITIZE", "0")
    with pytest.raises(SyntaxError):
        evaluate("import os;", sanitize=None)
