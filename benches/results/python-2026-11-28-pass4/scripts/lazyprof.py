import cProfile, pstats, time, sys
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
def best(f, reps=5):
    b = 1e9
    for _ in range(reps):
        t0 = time.process_time()
        for _ in range(N): f()
        b = min(b, (time.process_time() - t0) / N)
    return b
print("lazy compute cpu us/call: %.2f" % (best(lazy) * 1e6))
if len(sys.argv) > 1:
    pr = cProfile.Profile(time.process_time)
    pr.enable()
    for _ in range(N): lazy()
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(25)
