"""benches/peers/base.py: the interface every peer system implements.

A Peer names one column of the merged table. load() imports its system and
raises SkipPeer (with the reason) when it is not installed or has no device;
prepare(case, inputs, n, matmul_n) returns call, a function of no arguments
that computes the case once (inputs already where the system wants them,
outputs preallocated where the system's documented API takes an out=
argument) and returns the output; to_host turns that output into a NumPy
array; time_one(call) times one call, waiting for the device; sync()
waits until the device has finished everything queued (nothing on the CPU)
and wait(out) until one result is computed.

GPU systems time with device_timer: the host clock around the call, the
device synchronized before and after, as lazyfuse-bench times an eval on the
CUDA backend (launch overheads count, as a user waits for them; CUDA events
around the launches alone would leave the host's share out).
"""
import time

import common


class SkipPeer(Exception):
    """The system cannot run here: not installed, or no device."""


class Peer:
    name = '?'          # column name
    backend = 'cpu'     # 'cpu' or 'cuda'
    how = ''            # one line: how the system is used

    def load(self, threads):
        raise NotImplementedError

    def version(self):
        return ''

    def prepare(self, case, inputs, n, matmul_n):
        raise NotImplementedError

    def to_host(self, out):
        import numpy as np
        return np.asarray(out)

    def time_one(self, call):
        return common.wall_timer()(call)

    def sync(self):
        """Waits for the device (GPU systems); nothing to wait for on the CPU."""

    def wait(self, out):
        """Waits until out, a result of call(), is computed."""
        self.sync()


def device_timer(sync):
    """time_one for a GPU system: sync() (the whole device) before starting
    the clock, so that nothing queued earlier is counted, and after the call,
    so that its kernels have finished when the clock stops."""
    def time_one(call):
        sync()
        t0 = time.perf_counter()
        call()
        sync()
        return time.perf_counter() - t0
    return time_one
