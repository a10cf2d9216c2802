"""JAX under jax.jit (XLA fuses the NumPy code written with xp = jax.numpy), on
a CUDA device (jax_jit) or on the CPU (jax_jit_cpu: the `jax` package from the
registry carries XLA's CPU backend). Inputs are put on the device before timing; each
timed call is the host clock around the call and jax.block_until_ready on
its output (JAX dispatches asynchronously; it has no device-wide sync), after
the compiling first call and a warm-up. Skipped when JAX has no GPU backend.
run_peers.py sets XLA_PYTHON_CLIENT_PREALLOCATE=false before JAX is imported:
by default JAX takes 75% of the GPU's memory at start, which would leave
the other systems of the same run short."""
import time

import arrayapi
from base import Peer, SkipPeer


class JaxJit(Peer):
    """platform: JAX's name for the device kind ('gpu' or 'cpu')."""

    def __init__(self, name, backend, platform):
        self.name, self.backend, self.platform = name, backend, platform
        self.how = f'jax.jit over the NumPy code (jax.numpy) on the {platform.upper()}, block_until_ready'

    def load(self, threads):
        import os
        import sys
        if self.platform == 'cpu' and threads == 1 and 'jax' not in sys.modules:
            # XLA's CPU backend runs its own thread pool over every core unless told otherwise
            os.environ.setdefault('XLA_FLAGS', '--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1')
        try:
            import jax
            import jax.numpy as jnp
        except ImportError as e:
            raise SkipPeer(f'not installed ({e})')
        try:
            self.dev = jax.devices(self.platform)[0]
        except Exception as e:  # noqa: BLE001 - RuntimeError when no such backend
            raise SkipPeer(f'no {self.platform.upper()} backend ({e})')
        self.jax, self.jnp = jax, jnp

    def version(self):
        return self.jax.__version__

    def prepare(self, case, inputs, n, matmul_n):
        jax, jnp = self.jax, self.jnp
        fn = arrayapi.for_case(case.name)
        d = [jax.device_put(x, self.dev) for x in inputs]
        jitted = jax.jit(lambda *args: fn(jnp, *args))
        return lambda: jitted(*d)

    def time_one(self, call):
        t0 = time.perf_counter()
        self.jax.block_until_ready(call())
        return time.perf_counter() - t0

    def wait(self, out):
        # JAX has no device-wide wait (sync() does nothing): its outputs are
        # waited for, here and in time_one
        self.jax.block_until_ready(out)

    def to_host(self, out):
        import numpy as np
        return np.asarray(out)


PEERS = [JaxJit('jax_jit', 'cuda', 'gpu'), JaxJit('jax_jit_cpu', 'cpu', 'cpu')]
