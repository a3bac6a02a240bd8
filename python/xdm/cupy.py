"""CuPy allocates through xdm: ``xdm.cupy.use()``.

::

    import cupy, xdm.cupy
    xdm.cupy.use()                  # CuPy's allocator is now xdm's runtime
    x = cupy.arange(1 << 20)        # counted by the budget, seen in the tree
    xdm.cupy.restore()              # CuPy's default memory pool again

Each allocation goes to ``xdm.runtime(d)`` for CuPy's current device ``d``
(or to the one runtime given to ``use``) on CuPy's current stream, and is
freed when CuPy lets go of it, on that same stream.  Memory used on
another stream must be synchronized by the caller before it is dropped, as
with CuPy's own pool.  CuPy's pinned host memory is left to CuPy.

A refusal raises an exception that is both
``cupy.cuda.memory.OutOfMemoryError`` (what CuPy users catch, and what
CuPy's own pool raises) and ``xdm.OutOfBudget`` (with ``requested``,
``remaining``, and xdm's sentence as its message); the platform running
out is such a class too, deriving from ``xdm.OutOfMemory`` instead.  Any
other failure raises the xdm error as is.

CuPy's per-thread default stream (``CUPY_CUDA_PER_THREAD_DEFAULT_STREAM=1``,
set before cupy is imported) is served through the legacy stream, which CUDA
orders with every thread's per-thread stream: a free on it first marks the
freeing thread's work there, so the block's next user, on any thread,
follows that work (see xdm(3)).  A thread should synchronize its
per-thread stream before it ends (a copy to the host does): on some drivers
a thread that ends while its stream still runs work hangs in its exit, with
or without xdm.

Importing this module does not import CuPy; ``use`` does.
"""

import threading

from . import _lib
from .errors import InvalidArgument, OutOfBudget, OutOfMemory
from .runtime import Runtime, runtime as _runtime

_lock = threading.Lock()
_oom_classes = {}


class _Owner:
    """Frees one block when CuPy drops its last reference to the memory."""

    __slots__ = ("rt", "ptr", "stream")

    def __init__(self, rt, ptr, stream):
        self.rt = rt
        self.ptr = ptr
        self.stream = stream

    def __del__(self):
        # A private runtime closed first has freed its blocks already.
        if not self.rt.closed:
            self.rt.free(self.ptr, self.stream)


def _oom_class(cupy_oom, base):
    """One exception class that CuPy's and xdm's handlers both catch."""
    cls = _oom_classes.get((cupy_oom, base))
    if cls is None:
        cls = type("OutOfMemoryError", (cupy_oom, base), {
            "__module__": __name__,
            "__doc__": "An xdm refusal (%s) as CuPy's out-of-memory error."
                       % base.__name__,
            # CuPy's __init__ takes (size, total): build it as the xdm error.
            "__init__": base.__init__,
        })
        _oom_classes[(cupy_oom, base)] = cls
    return cls


def _refusal(cupy, error):
    """The exception to raise for an xdm refusal inside CuPy's allocator."""
    base = type(error)
    try:
        cls = _oom_class(cupy.cuda.memory.OutOfMemoryError, base)
    except (AttributeError, TypeError):
        return error            # no such CuPy class, or one we cannot mix in
    if base is OutOfBudget:
        return cls(error.message, error.requested, error.remaining)
    return cls(error.message)


def _allocator(cupy, fixed):
    """CuPy's allocator function: size -> cupy.cuda.MemoryPointer."""

    def malloc(size):
        device = cupy.cuda.Device().id
        if fixed is None:
            rt = _runtime(device)
        else:
            rt = fixed
            if rt.ordinal != device:
                raise InvalidArgument(
                    "xdm.cupy: CuPy's current device is %d, but the runtime "
                    "given to use() serves device %d" % (device, rt.ordinal))
        stream = cupy.cuda.get_current_stream().ptr
        try:
            ptr = rt.allocate(size, stream)
        except (OutOfBudget, OutOfMemory) as e:
            raise _refusal(cupy, e) from None
        owner = _Owner(rt, ptr, stream) if ptr else None
        mem = cupy.cuda.UnownedMemory(ptr, size, owner, device)
        return cupy.cuda.MemoryPointer(mem, 0)

    return malloc


def use(ordinal=None, runtime=None):
    """Make CuPy allocate device memory through xdm from now on.

    ordinal: None follows CuPy's current device (``xdm.runtime(d)``); an
    int pins the singleton runtime of that ordinal.  runtime: a
    :class:`xdm.Runtime` to use instead (a private one, say).  Allocating
    while CuPy's current device is not the pinned runtime's device raises
    InvalidArgument.  Memory CuPy's pool holds already stays CuPy's.
    """
    if runtime is not None:
        if not isinstance(runtime, Runtime):
            raise TypeError("runtime is an xdm.Runtime, not %s" % type(runtime).__name__)
        if ordinal is not None and ordinal != runtime.ordinal:
            raise InvalidArgument("ordinal %r and the runtime's ordinal %d differ"
                                  % (ordinal, runtime.ordinal))
        fixed = runtime
    elif ordinal is not None:
        fixed = _runtime(ordinal)
    else:
        fixed = None
        _lib.lib()              # a missing libxdm fails here, not in CuPy
    import cupy

    with _lock:
        cupy.cuda.set_allocator(_allocator(cupy, fixed))


def restore():
    """Give CuPy its default memory pool back."""
    import cupy

    with _lock:
        cupy.cuda.set_allocator(cupy.get_default_memory_pool().malloc)
