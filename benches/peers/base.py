"""benches/peers/base.py: the interface every peer system implements.

A Peer names one column of the merged table. load() imports its system and
raises SkipPeer (with the reason) when it is not installed or has no device;
prepare(case, inputs, n, matmul_n) returns call, a function of no arguments
that computes the case once (inputs already where the system wants them,
outputs preallocated where the system's documented API takes an out=
argument) and returns the output; to_host turns that output into a NumPy
array; time_one(call) times one call, waiting for the device.
"""
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


def cuda_event_timer(make_event, elapsed_ms):
    """time_one from a framework's CUDA events: record, call, record, wait."""
    def time_one(call):
        e0, e1 = make_event(), make_event()
        e0.record()
        call()
        e1.record()
        e1.synchronize()
        return elapsed_ms(e0, e1) * 1e-3
    return time_one
