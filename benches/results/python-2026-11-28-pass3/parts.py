# CPU time (process_time, best of 5 x 5000 calls) of the parts of the lazy call
# float(lf.sum(a*s + 1)) on 16 float64: each op alone, the build, build + compute,
# float() of a computed 0-d array, the whole call. Run with the package under test first on PYTHONPATH.
import time, sys
import numpy as np
import lazyfuse as lf
a = lf.asarray(np.random.default_rng(0).random(16))
def best(f, n=5000):
    b = 1e9
    for _ in range(5):
        t = time.process_time()
        for _ in range(n): f()
        b = min(b, (time.process_time() - t) / n * 1e6)
    return b
s = 0.5
def build(): return lf.sum(a * s + 1)
def mul(): return a * s
x = a * s
def add(): return x + 1
y = x + 1
def red(): return lf.sum(y)
def whole(): return float(lf.sum(a * s + 1))
def comp():
    z = lf.sum(a * s + 1); lf.compute(z); return z
z = lf.compute(lf.sum(a * s + 1))
def flt(): return float(z)
for _ in range(500): whole()
print("mul %.1f add %.1f sum %.1f build %.1f build+compute %.1f float(computed) %.1f whole %.1f" % (
    best(mul), best(add), best(red), best(build), best(comp), best(flt), best(whole)))
