import time
import numpy as np
import lazyfuse as lf
from lazyfuse import _array as A
from lazyfuse._ffi import lib, ffi
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
    return b * 1e6
def build(): return lf.sum(a * 0.7 + 1)
def mul(): return a * 0.7
x = a * 0.7
def add(): return x + 1
y = x + 1
def sm(): return lf.sum(y)
z = build()
def tk(): return A._tree_key(z)
prog = A._cache_of(a._ctx)[A._tree_key(z)[0]]
cell = ffi.new("double[1]")
def ev():
    return lib.lf_eval(prog.graph.handle, 1, prog.outs_c, ffi.cast("lf_buffer **", ffi.new("lf_buffer *[1]", [prog.spare[0].handle])))
def ev2(d=ffi.new("lf_buffer *[1]", [prog.spare[0].handle]), g=prog.graph.handle, o=prog.outs_c): return lib.lf_eval(g, 1, o, d)
def ss(g=prog.graph.handle, n=prog.scalars[0]): return lib.lf_scalar_set(g, n, 0.7)
def rd(h=prog.spare[0].handle): return lib.lf_buffer_read(h, cell, 8)
def nothing(): return lib.lf_debug_live_bytes() if hasattr(lib, "lf_debug_live_bytes") else None
print("whole %.2f" % best(lazy))
for name, f in [("build sum(a*s+1)", build), ("a*s", mul), ("x+1", add), ("sum(y)", sm), ("_tree_key", tk),
                ("lf_eval", ev2), ("lf_scalar_set", ss), ("lf_buffer_read", rd), ("empty cffi call", nothing)]:
    print("%-20s %.2f us" % (name, best(f)))
def float_only(reps=5):
    b = 1e9
    for _ in range(reps):
        zs = [lf.sum(a * (0.5 + i * 1e-6) + 1) for i in range(N)]
        zs.reverse()
        t0 = time.process_time()
        pop = zs.pop
        for _ in range(N):
            float(pop())
        b = min(b, (time.process_time() - t0) / N)
    return b * 1e6
print("float(z) of a built z: %.2f us" % float_only())
import cProfile, pstats
zs = [lf.sum(a * (0.5 + i * 1e-6) + 1) for i in range(N)]
zs.reverse()
pr = cProfile.Profile(time.process_time)
pop = zs.pop
pr.enable()
for _ in range(N): float(pop())
pr.disable()
pstats.Stats(pr).sort_stats("tottime").print_stats(15)
