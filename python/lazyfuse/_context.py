"""lazyfuse._context: Context, the Python side of an lf_ctx.

A Context owns one lf_ctx (a backend, a thread pool, kernel caches). The C
library lets one thread at a time use a context and everything made from it,
so every call into C that touches a context's objects runs inside
``with ctx.calling():``, which holds the context's lock (other Python threads
wait; the GIL is released during the C call itself by cffi). Different
contexts run concurrently.

Deferred releases: the deleter of a DLPack export (a NumPy array made from a
lazyfuse buffer dying) may run at any time, in any thread, even inside a C
call on the same context (lf_buffer_free of an imported tensor drops the last
reference to a NumPy array that itself views lazyfuse memory). It never calls
into C itself: it queues the release with ``ctx.defer(fn)``, and the queue is
drained by whoever holds (or next takes) the lock, outside any other C call.

default_context(): one CPU context per Python thread (so threads evaluating
at once do not wait on each other), made on first use with the thread count
set by set_num_threads (0: one per online CPU). $LAZYFUSE_BACKEND ("cpu",
"cuda", "auto", "reference") picks another backend.

What must stay true: a Context is destroyed only when no Buffer, graph or
export refers to it (they all hold a reference to it); lf_ctx_destroy is never
run at interpreter exit while exports may still be alive (no atexit hook).
"""
import collections
import os
import threading

from ._ffi import LazyfuseValueError, errmsg, error_for, ffi, lib

BACKENDS = {
    "auto": 0,
    "cpu": 1,
    "cuda": 2,
    "reference": 3,
}


class Context:
    """An lf_ctx: ``Context(backend="cpu", threads=0, fusion=None, cache_dir=None)``.

    threads 0 means one worker per online CPU; fusion None keeps the default
    (on unless $LF_FUSION=0)."""

    def __init__(self, backend="cpu", threads=0, fusion=None, cache_dir=None):
        if backend not in BACKENDS:
            raise LazyfuseValueError(f"unknown backend {backend!r} (one of {', '.join(BACKENDS)})")
        threads = int(threads)
        if threads < 0:
            raise LazyfuseValueError(f"threads must be >= 0, got {threads}")
        opt = ffi.new("lf_ctx_options *")
        st = lib.lf_ctx_options_init_sized(opt, ffi.sizeof("lf_ctx_options"))
        if st != lib.LF_OK:
            raise error_for(st, errmsg(ffi.NULL))
        opt.backend = BACKENDS[backend]
        opt.threads = threads
        opt.fusion = -1 if fusion is None else (1 if fusion else 0)
        self._cache_dir = None
        if cache_dir is not None:
            self._cache_dir = ffi.new("char[]", os.fsencode(cache_dir))
            opt.cache_dir = self._cache_dir
        handle = lib.lf_ctx_new(opt)
        if handle == ffi.NULL:
            msg = errmsg(ffi.NULL)
            raise error_for(_status_from_message(msg), msg)
        self.handle = handle
        self.threads = threads
        self.backend = ffi.string(lib.lf_backend_name(lib.lf_ctx_backend(handle))).decode()
        self._lock = threading.Lock()
        self._owner = None          # thread id holding _lock
        self._deferred = collections.deque()
        # per-context caches that higher layers keep (evaluate's programs)
        self.programs = {}

    def calling(self):
        """``with ctx.calling():`` holds the context for C calls; re-entrant
        within one thread."""
        return _Calling(self)

    def defer(self, release):
        """Runs release() (a C call on this context) now if the context is free,
        else once the thread using it is done."""
        if getattr(self, "handle", None) is None:
            # lf_ctx_destroy already freed everything of this context (a
            # graph or buffer finalized after its context, as the garbage
            # collector may order a cycle): running release now would free
            # it twice
            return
        self._deferred.append(release)
        if self._owner == threading.get_ident():
            return  # drained when this thread's outermost calling() ends
        if self._lock.acquire(blocking=False):
            self._owner = threading.get_ident()
            try:
                self._drain()
            finally:
                self._owner = None
                self._lock.release()

    def _drain(self):
        while self._deferred:
            try:
                release = self._deferred.popleft()
            except IndexError:
                break
            release()

    def check(self, status, what=None):
        if status != lib.LF_OK:
            msg = errmsg(self.handle)
            if what:
                msg = f"{what}: {msg}" if msg else what
            raise error_for(status, msg)

    def errmsg(self):
        return errmsg(self.handle)

    def last_stats(self):
        """The lf_eval_stats of the last eval on this context, as a dict."""
        st = ffi.new("lf_eval_stats *")
        with self.calling():
            self.check(lib.lf_ctx_last_stats_sized(self.handle, st, ffi.sizeof("lf_eval_stats")))
        return {name: getattr(st, name) for name, _ in ffi.typeof("lf_eval_stats").fields}

    def synchronize(self):
        with self.calling():
            self.check(lib.lf_ctx_synchronize(self.handle))

    def __del__(self):
        handle = getattr(self, "handle", None)
        if handle is not None and handle != ffi.NULL:
            self.handle = None
            try:
                self._drain()
            finally:
                self.programs.clear()
                lib.lf_ctx_destroy(handle)

    def __repr__(self):
        return f"<lazyfuse.Context backend={self.backend} threads={self.threads}>"


class _Calling:
    """The context manager of Context.calling (a class: cheaper than a
    generator on the per-call path)."""
    __slots__ = ("ctx", "outer")

    def __init__(self, ctx):
        self.ctx = ctx
        self.outer = False

    def __enter__(self):
        ctx = self.ctx
        me = threading.get_ident()
        if ctx._owner != me:
            ctx._lock.acquire()
            ctx._owner = me
            self.outer = True
        return ctx

    def __exit__(self, *exc):
        if self.outer:
            ctx = self.ctx
            try:
                ctx._drain()
            finally:
                ctx._owner = None
                ctx._lock.release()
            # a release queued by another thread between the drain and the
            # release of the lock runs now if the context is free
            if ctx._deferred and ctx._lock.acquire(blocking=False):
                ctx._owner = threading.get_ident()
                try:
                    ctx._drain()
                finally:
                    ctx._owner = None
                    ctx._lock.release()
        return False


def _status_from_message(msg):
    """lf_ctx_new returns NULL without a status: pick one from the message."""
    if "not part of this build" in msg or "CUDA" in msg or "backend" in msg:
        return lib.LF_ERR_BACKEND
    return lib.LF_ERR_INVALID


# ---- default contexts --------------------------------------------------------

_num_threads = 0
_local = threading.local()
_generation = 0


def default_context():
    """This thread's context (made on first use)."""
    ctx = getattr(_local, "ctx", None)
    if ctx is None or getattr(_local, "generation", -1) != _generation:
        backend = os.environ.get("LAZYFUSE_BACKEND", "cpu")
        ctx = Context(backend=backend, threads=_num_threads)
        _local.ctx = ctx
        _local.generation = _generation
    return ctx


def set_num_threads(n):
    """Sets the worker threads of default contexts made from now on (this
    thread's is made again at its next use); returns the previous setting
    (0: one per online CPU)."""
    global _num_threads, _generation
    n = int(n)
    if n < 0:
        raise LazyfuseValueError(f"set_num_threads: n must be >= 0, got {n}")
    old = _num_threads
    _num_threads = n
    _generation += 1
    return old if old else os.cpu_count() or 1


def get_num_threads():
    return _num_threads if _num_threads else (os.cpu_count() or 1)
