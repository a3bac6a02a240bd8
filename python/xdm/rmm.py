"""RMM (RAPIDS Memory Manager) allocates through xdm: ``xdm.rmm.use()``.

::

    import xdm.rmm
    xdm.rmm.use()                   # RMM's current resource is now over xdm
    import cudf                     # every column RMM allocates is a block
    df = cudf.DataFrame({"a": range(1 << 20)})   # of xdm.runtime(0)

``use`` sets RMM's resource of the device (``rmm.mr.set_per_device_resource``)
to one over an xdm runtime: each allocation RMM makes (cuDF, cuML, a
Dask-CUDA worker, CuPy through RMM's allocator) is then a block of that
runtime, on the stream RMM names, charged to its budget, logged and shown
in the tree.  A refusal raises an exception that is both ``MemoryError``
(what RMM raises when memory runs out) and the xdm error
(``xdm.OutOfBudget`` with ``requested`` and ``remaining``, or
``xdm.OutOfMemory``).

The resource is RMM's ``CallbackMemoryResource`` over the runtime: one
Python call per allocation and per free, which RMM itself calls a cost to
pay only where it matters.  A C++ library that uses RMM can take the
header-only ``xdm::rmm_resource`` (``<xdm/rmm.hpp>``) instead, which costs
no Python at all (xdm-rmm(7)).

Importing this module imports nothing of RMM; ``available()`` says whether
RMM's Python package is here, and ``why_unavailable()`` why not.
"""

import importlib.util
import threading

from .errors import OutOfBudget, OutOfMemory
from .runtime import Runtime, runtime as _runtime

_lock = threading.Lock()
_oom_classes = {}
# device -> the RMM resource it had before the first use(), for restore()
_previous = {}


def available():
    """Whether RMM's Python package can be imported (nothing is imported)."""
    return importlib.util.find_spec("rmm") is not None


def why_unavailable():
    """None when RMM is here; else one sentence saying what is missing."""
    if available():
        return None
    return ("RMM's Python package (rmm) is not importable by this python; install "
            "RAPIDS' rmm (pip install rmm-cu13, or conda) to put RMM under xdm")


def _handle(stream):
    """The native CUDA stream of an RMM Stream (the __cuda_stream__
    protocol), or None for the legacy default stream."""
    if stream is None:
        return None
    protocol = getattr(stream, "__cuda_stream__", None)
    if protocol is not None:
        _version, ptr = protocol()
        return ptr or None
    return int(stream) or None


def _oom_class(base):
    """One class that RMM's handlers (MemoryError) and xdm's both catch."""
    cls = _oom_classes.get(base)
    if cls is None:
        cls = type("OutOfMemoryError", (base, MemoryError), {
            "__module__": __name__,
            "__doc__": "An xdm refusal (%s) as RMM's MemoryError." % base.__name__,
        })
        _oom_classes[base] = cls
    return cls


def _refusal(error):
    cls = _oom_class(type(error))
    if isinstance(error, OutOfBudget):
        return cls(error.message, error.requested, error.remaining)
    return cls(error.message)


def _callbacks(rt):
    """RMM's allocate(size, stream) -> ptr and deallocate(ptr, size, stream)."""

    def allocate(size, stream):
        try:
            return rt.allocate(size, _handle(stream))
        except (OutOfBudget, OutOfMemory) as e:
            raise _refusal(e) from None

    def deallocate(ptr, size, stream):
        rt.free(ptr, _handle(stream))

    return allocate, deallocate


def resource(ordinal=0, runtime=None):
    """An RMM memory resource over ``xdm.runtime(ordinal)``, or over
    ``runtime`` (an :class:`xdm.Runtime`), to set or wrap as the caller
    likes (``rmm.mr.set_current_device_resource``, an RMM adaptor)."""
    if runtime is not None and not isinstance(runtime, Runtime):
        raise TypeError("runtime is an xdm.Runtime, not %s" % type(runtime).__name__)
    rt = runtime if runtime is not None else _runtime(ordinal)
    import rmm.mr

    allocate, deallocate = _callbacks(rt)
    return rmm.mr.CallbackMemoryResource(allocate, deallocate)


def use(ordinal=0, runtime=None):
    """Make RMM allocate device memory of ``ordinal`` through xdm from now
    on (``runtime``: an :class:`xdm.Runtime` of that device instead of the
    singleton).  Memory RMM handed out before stays with the resource that
    made it.  Returns the resource set."""
    if runtime is not None:
        ordinal = runtime.ordinal
    mr = resource(ordinal, runtime)
    import rmm.mr

    with _lock:
        before = rmm.mr.get_per_device_resource(ordinal)
        rmm.mr.set_per_device_resource(ordinal, mr)
        _previous.setdefault(ordinal, before)
    return mr


def restore(ordinal=0):
    """Give device ``ordinal`` back the RMM resource it had before ``use``."""
    import rmm.mr

    with _lock:
        before = _previous.pop(ordinal, None)
        if before is not None:
            rmm.mr.set_per_device_resource(ordinal, before)
