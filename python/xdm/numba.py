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
budget has left and what this runtime has not handed out.

An array's ``get_ipc_handle()`` carries xdm's handle of the array's block
(``xdm.ipc.export``), not the driver's: it works on every stack whose memory
can be shared (xdm-cuda(7), SHARING; the default ``pool | cuda_vmm`` among
them), where ``cuIpcGetMemHandle`` fails on memory of virtual-memory
mappings or of a stream-ordered pool.  The receiving process opens it with
``xdm.ipc.open`` in its own runtime of the same device when it unpickles
and opens the handle; it needs xdm importable, not ``use()``, and the
exporting process must admit its user (xdm(3), "Sharing blocks with other
processes").  While the receiver has it open the sender's free of the array
is held back, and ``close()`` unmaps it once the receiver's work on its
default stream is done.

Importing this module does not import Numba: the plugin class is built
when Numba (or ``use``) first asks for ``_numba_memory_manager``.
"""

import ctypes
import importlib
import threading

from . import ipc as _ipc
from .runtime import runtime as _runtime

INTERFACE_VERSION = 1
LEGACY_STREAM = 0
PER_THREAD_STREAM = 2

_lock = threading.Lock()
_manager = None
_ipc_handle = None


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


def _default_stream():
    return PER_THREAD_STREAM if _per_thread_default_stream() else LEGACY_STREAM


def _build_ipc_handle(cuda):
    class XdmIpcHandle(cuda.IpcHandle):
        """Numba's IPC handle over xdm's: ``handle`` is the 256 bytes of
        xdm.ipc.export for the block, ``offset`` where the array starts in
        it, ``size`` the array's bytes."""

        def __init__(self, base, handle, size, source_info=None, offset=0):
            super().__init__(base, bytes(handle), size, source_info, offset)
            self._shared = None
            self._mem = None

        def open(self, context):
            if self.base is not None:
                raise ValueError("opening IpcHandle from original process")
            if self._shared is not None:
                raise ValueError("IpcHandle is already opened")
            shared = _ipc.open(self.handle, _runtime(context.device.id), _default_stream())
            if self.offset + self.size > shared.nbytes:
                shared.close()
                raise ValueError("xdm.numba: the handle names %d bytes at offset %d, but the "
                                 "block it opened has %d" % (self.size, self.offset, shared.nbytes))
            self._shared = shared
            # As Numba's own open: the block up to the array's end, viewed
            # from the array's start.
            self._mem = cuda.MemoryPointer(context, ctypes.c_void_p(shared.ptr),
                                           self.offset + self.size)
            return self._mem.own().view(self.offset)

        # Numba's staged and direct opens go through the driver's IPC: both
        # are xdm's open here (a device the receiver cannot reach is refused
        # by xdm with its sentence).
        open_direct = open
        open_staged = open

        def close(self):
            if self._shared is None:
                raise ValueError("IpcHandle not opened")
            shared, self._shared, self._mem = self._shared, None, None
            shared.close()

        def __reduce__(self):
            return (_rebuild_ipc_handle,
                    (self.handle, self.size, self.source_info, self.offset))

    XdmIpcHandle.__module__ = __name__
    return XdmIpcHandle


def _rebuild_ipc_handle(handle, size, source_info, offset):
    """Unpickling an XdmIpcHandle in the receiving process."""
    manager_class()
    return _ipc_handle(None, handle, size, source_info, offset)


def _build():
    from numba import cuda

    global _ipc_handle
    _ipc_handle = _build_ipc_handle(cuda)

    class XdmMemoryManager(cuda.HostOnlyCUDAMemoryManager):
        """Numba's device memory from xdm.runtime(<the context's device>)."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._rt = None
            self._stream = None

        def _runtime(self):
            if self._rt is None:
                self._stream = _default_stream()
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

        def get_ipc_handle(self, memory):
            # memory may be a view: its owner is the block Numba allocated.
            base = memory.owner.device_pointer_value
            offset = memory.device_pointer_value - base
            handle = _ipc.export(base, self._runtime())
            return _ipc_handle(memory, handle, memory.size,
                               self.context.device.get_device_identity(), offset)

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
