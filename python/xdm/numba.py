"""Numba allocates device memory through xdm: an EMM plugin.

Either set, before the program starts::

    NUMBA_CUDA_MEMORY_MANAGER=xdm.numba python3 prog.py

or call, before Numba creates its first CUDA context::

    import xdm.numba
    xdm.numba.use()

Numba then asks ``xdm.runtime(d)`` for every device array of device ``d``
(Numba's External Memory Management interface, version 1), on the legacy
default stream (handle 0).  Numba's own streams (``cuda.stream()``) are
blocking streams, which the legacy stream waits for, so a free queued there
follows their work.  With per-thread default streams
(``NUMBA_CUDA_PER_THREAD_DEFAULT_STREAM=1``) the allocation and the free
name the per-thread default stream (handle 2), which xdm serves through the
legacy stream: a free marks the freeing thread's work there, and the
block's next user follows it (see xdm(3)).  Numba may run a deferred
deallocation on another thread than the array's last user: that user's
work is then not what the mark orders, so synchronize it first (Numba's
own copies to the host do), and synchronize a thread's per-thread stream
before the thread ends: on some drivers a thread that ends while its
stream still runs work hangs in its exit, with or without xdm.  Pinned
and mapped host memory stay Numba's own.

A refusal raises ``xdm.OutOfBudget`` (a ``MemoryError``) with
``requested``, ``remaining`` and xdm's sentence.  ``get_memory_info()``
answers xdm's view: the device's total, and as free the least of what the
budget has left and what this runtime has not handed out.  IPC handles
come from Numba's default mixin; memory of a stream-ordered pool
(``cuda_async``) or of virtual-memory mappings (``cuda_vmm``, the default)
cannot be exported that way.

Importing this module does not import Numba: the plugin class is built
when Numba (or ``use``) first asks for ``_numba_memory_manager``.
"""

import ctypes
import importlib
import threading

from .runtime import runtime as _runtime

INTERFACE_VERSION = 1
LEGACY_STREAM = 0
PER_THREAD_STREAM = 2

_lock = threading.Lock()
_manager = None


def _per_thread_default_stream():
    """Whether Numba's config launches on per-thread default streams."""
    for name in ("numba.cuda.core.config", "numba.core.config"):
        try:
            config = importlib.import_module(name)
        except ImportError:
            continue
        value = getattr(config, "CUDA_PER_THREAD_DEFAULT_STREAM", None)
        if value is not None:
            return bool(value)
    return False


def _finalizer(rt, ptr, stream):
    def free():
        # A private runtime closed first has freed its blocks already.
        if not rt.closed:
            rt.free(ptr, stream)
    return free


def _build():
    from numba import cuda

    class XdmMemoryManager(cuda.GetIpcHandleMixin, cuda.HostOnlyCUDAMemoryManager):
        """Numba's device memory from xdm.runtime(<the context's device>)."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._rt = None
            self._stream = None

        def _runtime(self):
            if self._rt is None:
                self._stream = (PER_THREAD_STREAM if _per_thread_default_stream()
                                else LEGACY_STREAM)
                self._rt = _runtime(self.context.device.id)
            return self._rt

        def initialize(self):
            # Build the runtime now: a bad config fails at the context's
            # first use, not at some later allocation.
            self._runtime()

        def memalloc(self, size):
            rt = self._runtime()
            stream = self._stream
            ptr = rt.allocate(size, stream)
            return cuda.MemoryPointer(self.context, ctypes.c_void_p(ptr), size,
                                      finalizer=_finalizer(rt, ptr, stream))

        def get_memory_info(self):
            rt = self._runtime()
            total = rt.device().total_bytes
            free = max(total - rt.bytes_outstanding, 0)
            budget = rt.budget_layer
            if budget is not None:
                free = min(free, int(rt.layer_attr(budget, "remaining")))
            return cuda.MemoryInfo(free=free, total=total)

        def reset(self):
            super().reset()
            if self._rt is not None:
                self._rt.reap()

        @property
        def interface_version(self):
            return INTERFACE_VERSION

    XdmMemoryManager.__module__ = __name__
    return XdmMemoryManager


def manager_class():
    """The EMM plugin class (imports Numba on first call)."""
    global _manager
    with _lock:
        if _manager is None:
            _manager = _build()
        return _manager


def use():
    """Make Numba allocate through xdm; call before Numba's first context."""
    from numba import cuda

    cuda.set_memory_manager(manager_class())


def __getattr__(name):
    # Numba reads _numba_memory_manager from the module that
    # NUMBA_CUDA_MEMORY_MANAGER names; built here, on that first read.
    if name in ("_numba_memory_manager", "XdmMemoryManager"):
        return manager_class()
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
