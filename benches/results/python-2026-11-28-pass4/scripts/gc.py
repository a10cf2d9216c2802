import time, gc, sys
import numpy as np
import lazyfuse as lf
rng = np.random.default_rng(0)
a = lf.asarray(rng.random(16))
s = [0.5]
def lazy():
    s[0] += 1e-6
    return float(lf.sum(a * s[0] + 1))
for _ in range(500): lazy()
N = 20000
def best(f, reps=7):
    b = 1e9
    for _ in range(reps):
        t0 = time.process_time()
        for _ in range(N): f()
        b = min(b, (time.process_time() - t0) / N)
    return b * 1e6
print("whole %.2f" % best(lazy))
gc.disable()
print("whole, gc off %.2f" % best(lazy))
gc.enable()
def build(): return lf.sum(a * s[0] + 1)
print("build+drop %.2f" % best(build))
