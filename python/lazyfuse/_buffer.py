"""lazyfuse._buffer: Buffer (an lf_buffer) and DLPack in both directions, no copies.

In: ``Buffer.from_dlpack(ctx, obj)`` wraps any object with ``__dlpack__``
(NumPy >= 1.22, CuPy, PyTorch, JAX) in place. It asks for the versioned
capsule first (``__dlpack__(stream=, max_version=(1, 0))``, what NumPy 2
understands) and falls back to ``__dlpack__()`` / ``__dlpack__(stream=)`` for
producers that take no such keywords (NumPy 1.2x). A versioned tensor is
handed to lf_buffer_from_dlpack through an unversioned DLManagedTensor made
here whose deleter calls the producer's; a read-only one (DLPack's
READ_ONLY flag) is refused as an output. The capsule is renamed "used_..."
only once lazyfuse owns the tensor, so on failure the producer's capsule still
frees it. lazyfuse calls the tensor's deleter exactly once, when the buffer
and every graph reading it are gone, and the producer's deleter keeps the
source array alive until then (NumPy's holds a reference to the array).

Out: ``Buffer.__dlpack__(stream=None, max_version=None, dl_device=None,
copy=None)`` and ``__dlpack_device__()`` (the protocol's signature), so
``np.from_dlpack(buf)`` gives a NumPy array over lazyfuse's memory. The
capsule holds a tensor made here around lf_buffer_to_dlpack's: versioned
("dltensor_versioned") when the consumer's max_version is 1.x, else the legacy
"dltensor". Its deleter keeps the Context alive (the C library frees every
export's memory in lf_ctx_destroy) and runs lf's export deleter through
Context.defer, never inside another C call on the context. A capsule nobody
consumed calls the deleter when it is destroyed.

What must stay true: every tensor made here is in _live (so its cdata and the
objects it needs stay alive) from its creation until its deleter ran, and each
deleter runs once; dtypes lazyfuse lacks raise LazyfuseTypeError naming the
dtype before any C call.
"""
import ctypes
import threading

from ._ffi import (DLPACK_CODE_NAMES, LF_FROM_DLPACK, LazyfuseTypeError, LazyfuseValueError,
                   dtype_name, ffi, lf_dtype_of, lib)

DLPACK_FLAG_READ_ONLY = 1 << 0
KDL_CPU = 1
KDL_CUDA = 2

# ---- the Python C API for capsules (ctypes.pythonapi keeps the GIL) -------------

_api = ctypes.pythonapi
_capsule_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))
_capsule_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_SetName", _api))
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_IsValid", _api))
_capsule_destructor_t = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p,
                                 _capsule_destructor_t)(("PyCapsule_New", _api))
# raw forms for the destructor, which gets the capsule as a bare pointer
_capsule_is_valid_raw = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", _api))
_capsule_get_pointer_raw = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))

# A capsule keeps a pointer to its name: the bytes must outlive every capsule,
# even those that die while the interpreter shuts down (_immortal, below).
_NAME_LEGACY = b"dltensor"
_NAME_VERSIONED = b"dltensor_versioned"
_NAME_USED_LEGACY = b"used_dltensor"
_NAME_USED_VERSIONED = b"used_dltensor_versioned"

# address of a tensor made here -> what its deleter needs (and keeps alive)
_live = {}
_live_lock = threading.Lock()


def live_tensors():
    """How many tensors made here still wait for their deleter (for tests)."""
    return len(_live)


# ---- import --------------------------------------------------------------------


def _import_deleter(mt):
    """Deleter of the unversioned wrapper around a versioned producer tensor."""
    if _live_lock is None:  # interpreter shutdown: the process is ending
        return
    with _live_lock:
        entry = _live.pop(int(ffi.cast("uintptr_t", mt)), None)
    if entry is not None:
        versioned = entry[1]
        if versioned.deleter != ffi.NULL:
            versioned.deleter(versioned)


def _immortal(obj):
    """Keeps obj (a C callback's trampoline) alive until the process ends:
    arrays and capsules still alive while the interpreter shuts down call
    these deleters after the module's globals are gone."""
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))
    return obj


_import_deleter_c = _immortal(ffi.callback("void(DLManagedTensor *)", _import_deleter))
for _name in (_NAME_LEGACY, _NAME_VERSIONED, _NAME_USED_LEGACY, _NAME_USED_VERSIONED):
    _immortal(_name)


def _dlpack_dtype_name(dt):
    code, bits, lanes = dt.code, dt.bits, dt.lanes
    name = f"{DLPACK_CODE_NAMES.get(code, f'code {code}')}{bits}"
    return name if lanes == 1 else f"{name}x{lanes}"


def _get_capsule(obj, stream):
    """obj.__dlpack__ by the newest protocol obj takes; returns (capsule, versioned)."""
    try:
        cap = obj.__dlpack__(stream=stream, max_version=(1, 0))
    except TypeError:
        try:
            cap = obj.__dlpack__(stream=stream)
        except TypeError:
            cap = obj.__dlpack__()
    if _capsule_is_valid(cap, _NAME_VERSIONED):
        return cap, True
    if _capsule_is_valid(cap, _NAME_LEGACY):
        return cap, False
    raise LazyfuseTypeError(f"{type(obj).__name__}.__dlpack__ returned {cap!r}, not an unused DLPack capsule")


def _check_source_dtype(obj):
    """A clear TypeError for dtypes lazyfuse lacks, before asking for a capsule."""
    dt = getattr(obj, "dtype", None)
    if dt is None:
        return
    try:
        import numpy as np
        npdt = np.dtype(dt)
    except Exception:
        return  # not a NumPy-style dtype (torch, ...): DLPack's code says
    lf_dtype_of(npdt)


class Buffer:
    """An lf_buffer of a Context. ``dtype`` is NumPy's name, ``shape`` a tuple."""

    __slots__ = ("ctx", "handle", "dtype", "shape", "lf_dtype", "readonly", "exported", "__weakref__")

    def __init__(self, ctx, handle, readonly=False, known=None):
        """known: (lf_dtype, shape) of handle when the caller knows them
        (saves asking the library)."""
        self.ctx = ctx
        self.handle = handle
        if known is None:
            self.lf_dtype = int(lib.lf_buffer_dtype(handle))
            self.shape = tuple(int(lib.lf_buffer_dim(handle, i)) for i in range(lib.lf_buffer_ndim(handle)))
        else:
            self.lf_dtype, self.shape = known
        self.dtype = dtype_name(self.lf_dtype)
        self.readonly = readonly
        self.exported = False  # a DLPack export of its memory was made (then it is never written again)

    @classmethod
    def new(cls, ctx, dtype, shape):
        """A new zero-filled buffer owned by lazyfuse."""
        lf = lf_dtype_of(dtype)
        shape = tuple(int(s) for s in shape)
        dims = ffi.new("int64_t[]", list(shape) or [0])
        with ctx.calling():
            h = lib.lf_buffer_new(ctx.handle, lf, len(shape), dims)
            if h == ffi.NULL:
                raise _error_from_message(ctx.errmsg(), "buffer")
        return cls(ctx, h)

    @classmethod
    def from_dlpack(cls, ctx, obj, writable=False):
        """Wraps obj (anything with __dlpack__) in place. writable: it will be
        an output (a read-only source is then refused)."""
        if not hasattr(obj, "__dlpack__"):
            raise LazyfuseTypeError(f"{type(obj).__name__} has no __dlpack__ (not an array lazyfuse can wrap)")
        _check_source_dtype(obj)
        stream = None
        if ctx.backend == "cuda":
            with ctx.calling():
                stream = int(lib.lf_ctx_dlpack_stream(ctx.handle))
        cap, versioned = _get_capsule(obj, stream)
        name = _NAME_VERSIONED if versioned else _NAME_LEGACY
        ptr = _capsule_get_pointer(cap, name)
        wrapper_addr = None
        if versioned:
            vt = ffi.cast("DLManagedTensorVersioned *", ptr)
            if vt.version.major != 1:
                raise LazyfuseValueError(f"DLPack version {vt.version.major}.{vt.version.minor} is not supported (1.x is)")
            readonly = bool(vt.flags & DLPACK_FLAG_READ_ONLY)
            tensor = vt.dl_tensor
        else:
            mt = ffi.cast("DLManagedTensor *", ptr)
            readonly = False
            tensor = mt.dl_tensor
        if (tensor.dtype.code, tensor.dtype.bits) not in LF_FROM_DLPACK or tensor.dtype.lanes != 1:
            raise LazyfuseTypeError(
                f"lazyfuse has no dtype for {_dlpack_dtype_name(tensor.dtype)} "
                f"(it has bool, int32, int64, float32, float64)")
        if writable and readonly:
            raise LazyfuseValueError("output array is read-only")
        if versioned:
            wrapper = ffi.new("DLManagedTensor *")
            wrapper.dl_tensor = tensor
            wrapper.manager_ctx = ffi.NULL
            wrapper.deleter = _import_deleter_c
            wrapper_addr = int(ffi.cast("uintptr_t", wrapper))
            with _live_lock:
                _live[wrapper_addr] = (wrapper, vt)
            mt = wrapper
        with ctx.calling():
            if stream is None:
                h = lib.lf_buffer_from_dlpack(ctx.handle, mt)
            else:
                h = lib.lf_buffer_from_dlpack_stream(ctx.handle, mt, stream)
            if h == ffi.NULL:
                msg = ctx.errmsg()
        if h == ffi.NULL:
            if wrapper_addr is not None:
                with _live_lock:
                    _live.pop(wrapper_addr, None)
            raise _error_from_message(msg, "DLPack import")
        # lazyfuse owns the tensor now: the capsule must not free it
        _capsule_set_name(cap, _NAME_USED_VERSIONED if versioned else _NAME_USED_LEGACY)
        return cls(ctx, h, readonly=readonly)

    def free(self):
        """Drops this handle (graphs reading the buffer keep it alive)."""
        h, self.handle = self.handle, None
        if h is not None and h != ffi.NULL:
            ctx = self.ctx
            ctx.defer(lambda: lib.lf_buffer_free(h))

    def __del__(self):
        try:
            self.free()
        except Exception:
            pass

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    # ---- export --------------------------------------------------------------

    def __dlpack_device__(self):
        if self.ctx.backend == "cuda":
            import os
            return (KDL_CUDA, int(os.environ.get("LF_CUDA_DEVICE", "0") or 0))
        return (KDL_CPU, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """DLPack export of this buffer's own memory (no copy unless copy=True)."""
        if self.handle is None:
            raise BufferError("buffer was freed")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"lazyfuse buffer lives on device {self.__dlpack_device__()}, "
                              f"not {tuple(dl_device)}")
        if copy:
            if self.__dlpack_device__()[0] != KDL_CPU:
                raise BufferError("copy=True is supported for host buffers only")
            return self.to_numpy_copy().__dlpack__(max_version=max_version) if max_version \
                else self.to_numpy_copy().__dlpack__()
        versioned = max_version is not None and int(max_version[0]) >= 1
        self.exported = True  # before the export: a program never reuses this memory for a result
        out = ffi.new("DLManagedTensor **")
        ctx = self.ctx
        cuda = self.__dlpack_device__()[0] == KDL_CUDA
        with ctx.calling():
            if cuda:
                s = 1 if stream is None else int(stream)
                st = lib.lf_buffer_to_dlpack_stream(self.handle, s, out)
            else:
                if stream is not None and stream != -1:
                    raise BufferError(f"stream={stream!r}: a host buffer takes stream None or -1")
                st = lib.lf_buffer_to_dlpack(self.handle, out)
            if st != lib.LF_OK:
                msg = ctx.errmsg()
        if st != lib.LF_OK:
            raise _error_from_message(msg, "DLPack export", st)
        inner = out[0]
        return _export_capsule(ctx, inner, versioned, self.readonly)

    def to_numpy(self):
        """A NumPy array over this buffer's memory (no copy)."""
        import numpy as np
        return np.from_dlpack(self)

    def to_numpy_copy(self):
        """A new NumPy array with this buffer's values (lf_buffer_read)."""
        import numpy as np
        arr = np.empty(self.shape, dtype=self.dtype)
        with self.ctx.calling():
            self.ctx.check(lib.lf_buffer_read(self.handle, ffi.cast("void *", arr.ctypes.data), arr.nbytes),
                           "read")
        return arr

    def __repr__(self):
        return f"<lazyfuse.Buffer {self.dtype}{list(self.shape)}>"


def _release_export(addr):
    """Runs once per exported tensor: from its consumer's deleter call, or from
    its capsule's destructor when nobody consumed it."""
    if _live_lock is None:  # interpreter shutdown: the process is ending
        return
    with _live_lock:
        entry = _live.pop(addr, None)
    if entry is None:
        return
    _wrapper, inner, ctx = entry

    def release():
        inner.deleter(inner)
    ctx.defer(release)


def _export_deleter_legacy(mt):
    _release_export(int(ffi.cast("uintptr_t", mt)))


def _export_deleter_versioned(mt):
    _release_export(int(ffi.cast("uintptr_t", mt)))


_export_deleter_legacy_c = _immortal(ffi.callback("void(DLManagedTensor *)", _export_deleter_legacy))
_export_deleter_versioned_c = _immortal(ffi.callback("void(DLManagedTensorVersioned *)",
                                                     _export_deleter_versioned))


def _capsule_destructor(cap):
    # Called with the GIL, when the capsule dies: an unconsumed tensor is freed.
    if _live_lock is None:  # interpreter shutdown
        return
    for name in (_NAME_VERSIONED, _NAME_LEGACY):
        if _capsule_is_valid_raw(cap, name):
            ptr = _capsule_get_pointer_raw(cap, name)
            if ptr:
                _release_export(ptr)
            return


_capsule_destructor_c = _immortal(_capsule_destructor_t(_capsule_destructor))


def _export_capsule(ctx, inner, versioned, readonly):
    if versioned:
        t = ffi.new("DLManagedTensorVersioned *")
        t.version.major = 1
        t.version.minor = 0
        t.manager_ctx = ffi.NULL
        t.deleter = _export_deleter_versioned_c
        t.flags = DLPACK_FLAG_READ_ONLY if readonly else 0
        t.dl_tensor = inner.dl_tensor
        name = _NAME_VERSIONED
    else:
        t = ffi.new("DLManagedTensor *")
        t.dl_tensor = inner.dl_tensor
        t.manager_ctx = ffi.NULL
        t.deleter = _export_deleter_legacy_c
        name = _NAME_LEGACY
    addr = int(ffi.cast("uintptr_t", t))
    with _live_lock:
        _live[addr] = (t, inner, ctx)
    try:
        return _capsule_new(addr, name, _capsule_destructor_c)
    except BaseException:
        _release_export(addr)
        raise


def _error_from_message(msg, what, status=None):
    """An exception for a C call that returned NULL (lf_buffer_new,
    lf_buffer_from_dlpack): the C API gives no status there, so the class is
    picked from the message's words (dtype, shape, memory, ...)."""
    from ._ffi import error_for
    if status is None:
        status = _guess_status(msg)
    return error_for(status, f"{what}: {msg}" if msg else what)


def _guess_status(msg):
    m = msg.lower()
    if "dtype" in m:
        return lib.LF_ERR_DTYPE
    if "device" in m or "context" in m and "cuda" in m:
        return lib.LF_ERR_INVALID
    if "dimension" in m or "shape" in m:
        return lib.LF_ERR_SHAPE
    if "overflow" in m:
        return lib.LF_ERR_OVERFLOW
    if "memory" in m or "nomem" in m or "alloc" in m:
        return lib.LF_ERR_NOMEM
    if "null" in m:
        return lib.LF_ERR_NULL
    return lib.LF_ERR_INVALID
