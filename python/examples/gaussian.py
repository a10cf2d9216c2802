"""The README's Gaussian density from Python: lazyfuse.evaluate against NumPy.

Run by `bash scripts/quickstart.sh demo` with the package installed in .venv/;
exits non-zero when the results differ.
"""
import sys

import numpy as np

import lazyfuse

n = 1 << 20
x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
m, s = 0.0, 1.0
pdf = lazyfuse.evaluate("exp(-0.5 * ((x - m) / s) ** 2) / (s * 2.5066282746)")
want = np.exp(-0.5 * ((x.astype(np.float64) - m) / s) ** 2) / (s * 2.5066282746)
err = float(np.max(np.abs(pdf - want)))
ss = lazyfuse.evaluate("sum(x * x)")
print(f"lazyfuse (Python): gaussian_pdf of {n} float32 values on {lazyfuse.default_context().backend}: "
      f"dtype {pdf.dtype}, max |error| vs NumPy {err:.3g}; sum of squares {float(ss):.6g} "
      f"(NumPy {float(np.sum(x.astype(np.float64) ** 2)):.6g})")
ok = pdf.dtype == np.float64 and err < 1e-12 and abs(float(ss) - np.sum(x.astype(np.float64) ** 2)) < 1e-3 * n
sys.exit(0 if ok else 1)
