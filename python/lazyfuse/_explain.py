"""lazyfuse._explain: seeing the fusion of lazy arrays from Python.

explain(a, b, ...) prints (and returns) the plan lf_eval makes for the arrays
(one graph's arrays: its kernels, their kind, the nodes each computes and the
bytes each moves, parsed from lf_dump_dot's fused view) and the statistics of
the eval (lf_ctx_last_stats). Arrays not yet computed are computed by that
eval; computed ones are evaluated again into scratch memory for the figures.
to_dot(a, ..., fused=True) returns lf_dump_dot's DOT text as a Dot object, a
str whose _repr_svg_ runs Graphviz's ``dot -Tsvg`` (notebooks show it) when
``dot`` is on PATH.

What must stay true: lf_dump_dot writes to a FILE*; the package passes one
made by libc's open_memstream (declared here as void *, which is what a
FILE * is at the ABI level) and closes it before reading the text.
"""
import re
import shutil
import subprocess
import sys

from ._array import Array, compute
from ._buffer import Buffer
from ._ffi import LazyfuseValueError, ffi, lib

ffi.cdef(r"""
lf_status lf_dump_dot(lf_graph *g, int n, lf_node *const *outs, int mode, void *out);
void *open_memstream(char **ptr, size_t *sizeloc);
int fclose(void *stream);
void free(void *ptr);
""")
_libc = ffi.dlopen(None)
LF_DOT_GRAPH, LF_DOT_FUSED = 0, 1


def _one_graph(arrays, what):
    if not arrays:
        raise TypeError(f"{what}: give at least one array")
    for a in arrays:
        if not isinstance(a, Array):
            raise TypeError(f"{what}: {type(a).__name__} is not a lazyfuse Array")
    lazy = [a for a in arrays if a._graph is not None or a._buf is None]
    if len(lazy) != len(arrays):
        raise LazyfuseValueError(f"{what}: an array made by asarray has no graph (it is an input)")
    if any(a._graph is None for a in lazy):
        # deferred arrays (made without a graph, see _array._lazy): built into
        # the graph of the first one that has one, else a new one
        g = next((a._live_graph() for a in lazy if a._graph is not None), None)
        if g is None:
            g = lazy[0]._live_graph()
        with g.ctx.calling():
            for a in lazy:
                if a._graph is None:
                    a._graph, a._node = g, a._node_in(g)
    gs = {id(a._live_graph()) for a in lazy}
    if len(gs) != 1:
        raise LazyfuseValueError(f"{what}: the arrays belong to {len(gs)} graphs (combine them in one "
                                 f"expression, or explain them one at a time)")
    return lazy[0]._graph


def _dump(g, arrays, mode):
    outs = ffi.new("lf_node *[]", [a._node for a in arrays])
    ptr = ffi.new("char **")
    size = ffi.new("size_t *")
    f = _libc.open_memstream(ptr, size)
    if f == ffi.NULL:
        raise MemoryError("to_dot: open_memstream failed")
    with g.ctx.calling():
        st = lib.lf_dump_dot(g.handle, len(arrays), outs, mode, f)
        _libc.fclose(f)
        text = ffi.string(ptr[0], size[0]).decode("utf-8", "replace") if ptr[0] != ffi.NULL else ""
        if ptr[0] != ffi.NULL:
            _libc.free(ptr[0])
        g.ctx.check(st, "to_dot")
    return text


class Dot(str):
    """DOT text; shown as SVG in a notebook when Graphviz's dot is installed."""

    def _repr_svg_(self):
        exe = shutil.which("dot")
        if exe is None:
            return None
        r = subprocess.run([exe, "-Tsvg"], input=self.encode(), capture_output=True, timeout=60)
        return r.stdout.decode("utf-8", "replace") if r.returncode == 0 else None


def to_dot(*arrays, fused=True):
    """Graphviz DOT of what evaluating the arrays involves: the fused plan
    (kernels as clusters, stored buffers as cylinders), or with fused=False
    the graph's nodes. Nothing is computed."""
    g = _one_graph(arrays, "to_dot")
    return Dot(_dump(g, arrays, LF_DOT_FUSED if fused else LF_DOT_GRAPH))


_KERNEL = re.compile(r'subgraph cluster_k(\d+) \{\n\s*label="kernel \d+: ([^"\\]*)\\nin (\d+) B, out (\d+) B";(.*?)\n  \}',
                     re.S)
_NODE = re.compile(r'n\d+ \[label="([^"]*)"\]')


def plan(*arrays):
    """The fused plan as a list of dicts: kernel number, kind, the nodes it
    computes (their labels), bytes in and out."""
    g = _one_graph(arrays, "plan")
    text = _dump(g, arrays, LF_DOT_FUSED)
    out = []
    for m in _KERNEL.finditer(text):
        nodes = [n.replace("\\n", " ") for n in _NODE.findall(m.group(5))]
        out.append({"kernel": int(m.group(1)), "kind": m.group(2), "nodes": nodes,
                    "bytes_in": int(m.group(3)), "bytes_out": int(m.group(4))})
    return out


def explain(*arrays, file=None):
    """Prints the fused kernels of evaluating the arrays and the statistics of
    that eval; returns the text. Lazy arrays are computed by it."""
    g = _one_graph(arrays, "explain")
    kernels = plan(*arrays)
    ctx = g.ctx
    if any(a._buf is None for a in arrays):
        compute(*arrays)
    else:  # evaluate again into scratch buffers, for the figures
        outs = ffi.new("lf_node *[]", [a._node for a in arrays])
        with ctx.calling():
            bufs = [Buffer(ctx, lib.lf_buffer_new_like(ctx.handle, a._node)) for a in arrays]
            dsts = ffi.new("lf_buffer *[]", [b.handle for b in bufs])
            ctx.check(lib.lf_eval(g.handle, len(arrays), outs, dsts), "explain")
    stats = ctx.last_stats()
    lines = [f"lazyfuse plan for {len(arrays)} output{'s' if len(arrays) != 1 else ''} "
             f"({ctx.backend} backend): {len(kernels)} kernel{'s' if len(kernels) != 1 else ''}"]
    for k in kernels:
        lines.append(f"  kernel {k['kernel']}: {k['kind']}, in {k['bytes_in']} B, out {k['bytes_out']} B")
        for n in k["nodes"]:
            lines.append(f"      {n}")
    lines.append("statistics of the eval (lf_ctx_last_stats):")
    for name, value in stats.items():
        lines.append(f"  {name:20s} {value}")
    text = "\n".join(lines) + "\n"
    (file or sys.stdout).write(text)
    return text
