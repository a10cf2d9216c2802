# CPU time (process_time, best of 5 x 5000) of the C calls of the cached lazy program of
# float(lf.sum(a*0.5 + 1)) through cffi: lf_eval, lf_scalar_set, lf_buffer_new_like + lf_buffer_free,
# lf_buffer_read, and a call that does nothing (lf_debug_live_bytes).
import time
import numpy as np
import lazyfuse as lf
from lazyfuse._ffi import lib, ffi
from lazyfuse import _array as A
a = lf.asarray(np.random.default_rng(0).random(16))
z = lf.compute(lf.sum(a * 0.5 + 1))
ctx = a._ctx
cache = A._cache_of(ctx)
prog = list(cache.values())[0]
g = prog.graph.handle
def best(f, n=5000):
    b = 1e9
    for _ in range(5):
        t = time.process_time()
        for _ in range(n): f()
        b = min(b, (time.process_time() - t) / n * 1e6)
    return b
h = lib.lf_buffer_new_like(ctx.handle, prog.outs[0])
dst = ffi.new("lf_buffer *[]", [h])
def ev(): lib.lf_eval(g, 1, prog.outs_c, dst)
def ss(): lib.lf_scalar_set(g, prog.scalars[0], 0.5)
def nl(): lib.lf_buffer_free(lib.lf_buffer_new_like(ctx.handle, prog.outs[0]))
cell = ffi.new("double[1]")
def rd(): lib.lf_buffer_read(h, cell, 8)
def nothing(): lib.lf_debug_live_bytes()
print("lf_eval %.2f scalar_set %.2f new_like+free %.2f buffer_read %.2f trivial-call %.2f" % (best(ev), best(ss), best(nl), best(rd), best(nothing)))
