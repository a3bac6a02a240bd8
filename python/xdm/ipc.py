"""Blocks shared between processes: xdm_ipc_export, open and close.

In the exporting process::

    handle = xdm.ipc.export(ptr_or_array)      # 256 bytes, send them anywhere

and in another::

    with xdm.ipc.open(handle) as shared:      # shared.ptr, shared.nbytes
        mem = cupy.cuda.UnownedMemory(shared.ptr, shared.nbytes, shared)
        ...

The handle is plain bytes with a secret in them: whoever holds them can open
the block if the exporting process admits their user (its own user, and
those of ``ipc_allow`` in xdm.conf(5) or ``$XDM_IPC_ALLOW``), so send it
only to the processes that are to map the block.  The importer gets the
memory from the exporting process, which must be alive and reachable (the
same network namespace) when it opens.  While any process has the block open, its
owner's free is held back: the memory is not reused nor given back until
the last importer closes it or dies.  Exporting one block twice gives the
same bytes.  xdm(3), "Sharing blocks with other processes", has the rules;
the stack must be one whose memory can be shared (on the host platform,
``host ipc=true`` or ``host_vmm ipc=true``; on a GPU ``cuda_direct``,
``cuda_async ipc=true`` or ``cuda_vmm``, and the pool over any of them:
xdm-cuda(7), SHARING), else NotSupported says so.
"""

import ctypes

from . import _lib
from . import runtime as _runtime
from .errors import InvalidArgument, check

HANDLE_SIZE = _lib.IPC_HANDLE_SIZE


def _address_of(obj):
    """The device address of an int, a CUDA array (CuPy, Numba) or a torch
    tensor, without importing any framework."""
    if isinstance(obj, int) and not isinstance(obj, bool):
        return obj
    iface = getattr(obj, "__cuda_array_interface__", None)
    if iface is not None:
        return iface["data"][0]
    data_ptr = getattr(obj, "data_ptr", None)
    if callable(data_ptr):
        return data_ptr()
    raise TypeError("export takes an address (int), an object with "
                    "__cuda_array_interface__ or a tensor, not %s" % type(obj).__name__)


def export(obj, runtime=None):
    """The handle (bytes) of the live block that starts at obj's address,
    in runtime (default: the process's runtime of device 0).  An address
    inside a block, rather than at its start, is InvalidArgument."""
    rt = runtime if runtime is not None else _runtime.runtime(0)
    block = _lib.Block()
    ptr = _address_of(obj)
    check(_lib.lib().xdm_native_lookup(rt._rt, ptr or None, ctypes.byref(block)))
    out = ctypes.create_string_buffer(HANDLE_SIZE)
    check(_lib.lib().xdm_ipc_export(rt._rt, ctypes.byref(block), out))
    return out.raw


class Shared:
    """A block another process exported, mapped here: ``ptr`` and
    ``nbytes``.  close() (or leaving a ``with`` block) unmaps it once the
    work queued on its stream is done; a Shared that is collected unopened
    closes itself."""

    def __init__(self, rt, ptr, nbytes, stream):
        self._rt = rt
        self.ptr = ptr
        self.nbytes = nbytes
        self._stream = stream

    @property
    def closed(self):
        return self.ptr is None

    def close(self):
        """Unmap; a second close is InvalidArgument, as the C call says."""
        if self.ptr is None:
            raise InvalidArgument("this shared block was closed already")
        ptr, self.ptr = self.ptr, None
        check(_lib.lib().xdm_ipc_close(self._rt._rt, ptr, self._stream))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.ptr is not None:
            self.close()

    def __del__(self):
        if getattr(self, "ptr", None) is not None and not self._rt.closed:
            try:
                self.close()
            except Exception:  # noqa: BLE001 - nothing to tell at collection
                pass

    def __repr__(self):
        if self.ptr is None:
            return "<xdm.ipc.Shared closed>"
        return "<xdm.ipc.Shared 0x%x, %d bytes>" % (self.ptr, self.nbytes)


def open(handle, runtime=None, stream=None):  # noqa: A001 - the C call's name
    """Map the block a handle names; a Shared.  stream is the native stream
    the block will be used on (None: the runtime's first); its close waits
    for the work queued there.  A handle that is not one, of another device,
    of a block freed since, or of an exporter that cannot be reached raises
    with xdm's sentence and maps nothing."""
    if not isinstance(handle, (bytes, bytearray, memoryview)):
        raise TypeError("a handle is bytes, not %s" % type(handle).__name__)
    handle = bytes(handle)
    if len(handle) != HANDLE_SIZE:
        raise InvalidArgument("a handle is %d bytes, not %d" % (HANDLE_SIZE, len(handle)))
    rt = runtime if runtime is not None else _runtime.runtime(0)
    sid = 0 if stream is None else rt.stream_id(stream)
    ptr = ctypes.c_uint64()
    nbytes = ctypes.c_size_t()
    check(_lib.lib().xdm_ipc_open(rt._rt, handle, sid, ctypes.byref(ptr),
                                  ctypes.byref(nbytes)))
    return Shared(rt, ptr.value, nbytes.value, sid)
