"""Runtimes: the process's one per device ordinal, or private ones.

``xdm.runtime(0)`` is the process-wide runtime of device 0, built on first
use from the configuration (``XDM_CONFIG``, else ``$(sysconfdir)/xdm.conf``,
else the embedded default); every framework switch allocates through it.
``xdm.Runtime.create(0, stack="budget limit=1G | pool | host")`` builds a
private one around a stack of the caller's, for tests and embedding; close
it (or use it as a context manager) to destroy it and free what it holds.

Memory is handed out by address on a *native* stream, the platform's own
handle (a ``CUstream`` as an int on cuda; None is the default stream: the
legacy default stream on cuda, the platform's default stream on host)::

    rt = xdm.Runtime.create(stack="budget limit=1M | pool | host")
    p = rt.allocate(4096, tag="scratch")
    rt.stats().bytes_outstanding       # 4096
    rt.budget_limit = "2M"             # live, for every process on the key
    rt.free(p)

A closed runtime refuses every call with InvalidArgument.  Close a private
runtime only when no other thread is using it.
"""

import ctypes
import operator
import threading
import weakref
from dataclasses import dataclass

from . import _lib
from . import tags as _tags
from . import tree as _tree
from .errors import InvalidArgument, NotSupported, check

_U32_MAX = 2**32 - 1
_U64_MAX = 2**64 - 1
_STATES = ("live", "retired", "quarantined", "freed")
_MAKER = object()


@dataclass(frozen=True)
class Stats:
    """A runtime's own counters (struct xdm_stats)."""

    bytes_outstanding: int
    blocks_outstanding: int
    bytes_peak: int
    allocs: int
    frees: int
    failures: int
    waits_queued: int
    events_recorded: int
    bytes_allocated: int
    bytes_freed: int
    blocks_peak: int


@dataclass(frozen=True)
class DeviceInfo:
    """The device a runtime serves (struct xdm_device_info)."""

    name: str
    uuid: str
    total_bytes: int
    platform: str


@dataclass(frozen=True)
class Block:
    """A live block as the registry holds it (struct xdm_block).

    ``stream`` is the runtime's stream id, ``state`` one of "live",
    "retired", "quarantined", "freed".
    """

    ptr: int
    ordinal: int
    stream: int
    bytes: int
    align: int
    tag: str
    generation: int
    state: str


def _int(what, value, low, high):
    if isinstance(value, bool):
        raise TypeError("%s is an int, not bool" % what)
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError("%s is an int, not %s" % (what, type(value).__name__)) from None
    if not low <= value <= high:
        raise InvalidArgument("%s must be %d to %d, not %d" % (what, low, high, value))
    return value


def _address(what, value):
    """An address or native handle: None, an int, or a ctypes.c_void_p."""
    if value is None:
        return None
    if isinstance(value, ctypes.c_void_p):
        return value.value
    return _int(what, value, 0, _U64_MAX) or None


def _text(what, value):
    if not isinstance(value, str):
        raise TypeError("%s is a str, not %s" % (what, type(value).__name__))
    if "\0" in value:
        raise InvalidArgument("%s may not hold a NUL character" % what)
    return value.encode("utf-8")


def _decode(raw):
    return raw.decode("utf-8", "replace")


def _destroy(handle):
    return _lib.lib().xdm_runtime_destroy(handle)


class Runtime:
    """One xdm runtime.  Get one with :func:`runtime` or :meth:`create`."""

    def __init__(self, handle, singleton, _token=None):
        if _token is not _MAKER:
            # A handle from anywhere else would be a crash waiting to happen.
            raise TypeError("get a runtime from xdm.runtime() or xdm.Runtime.create()")
        self._handle = handle
        self._singleton = singleton
        self._finalizer = None
        if not singleton:
            # Destroyed when collected or at exit, if not closed before.
            self._finalizer = weakref.finalize(self, _destroy, handle)

    @classmethod
    def create(cls, ordinal=0, stack=None, platform=None):
        """A private runtime for ordinal around stack (config syntax, top
        first; None: the configured stack) on platform (a platform module's
        name; None: the configured platform list)."""
        ordinal = _int("ordinal", ordinal, 0, _U32_MAX)
        stack_c = None if stack is None else _text("stack", stack)
        platform_c = None if platform is None else _text("platform", platform)
        handle = ctypes.c_void_p()
        check(_lib.lib().xdm_runtime_create(ordinal, platform_c, stack_c,
                                            ctypes.byref(handle)))
        return cls(handle.value, False, _MAKER)

    # ---- lifetime -----------------------------------------------------

    @property
    def _rt(self):
        handle = self._handle
        if handle is None:
            raise InvalidArgument("this xdm runtime was closed")
        return handle

    @property
    def closed(self):
        return self._handle is None

    @property
    def singleton(self):
        """True for the process-wide runtime of its ordinal."""
        return self._singleton

    def close(self):
        """Destroy a private runtime (its live blocks are freed through its
        stack).  Nothing to do for a singleton, which lives until exit, or
        for a runtime closed already."""
        if self._singleton or self._handle is None:
            return
        self._handle = None
        check(self._finalizer())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        if self._handle is None:
            return "<xdm.Runtime (closed)>"
        kind = "singleton" if self._singleton else "private"
        return "<xdm.Runtime %d %s '%s'>" % (self.ordinal, kind, self.stack)

    # ---- description --------------------------------------------------

    @property
    def ordinal(self):
        return _lib.lib().xdm_runtime_ordinal(self._rt)

    def stats(self):
        """The runtime's counters, read without locks."""
        s = _lib.Stats()
        _lib.lib().xdm_runtime_stats(self._rt, ctypes.byref(s))
        return Stats(*(getattr(s, f) for f, _ in _lib.Stats._fields_))

    def reset_peak(self):
        """Start stats().bytes_peak and blocks_peak again from what is held now."""
        check(_lib.lib().xdm_runtime_reset_peak(self._rt))

    def reset_totals(self):
        """Start allocs, frees, failures, bytes_allocated and bytes_freed
        again from 0; what is held and the peaks stay."""
        check(_lib.lib().xdm_runtime_reset_totals(self._rt))

    @property
    def bytes_outstanding(self):
        """Bytes the stack holds for live and not yet reaped blocks."""
        return _lib.lib().xdm_bytes_outstanding(self._rt)

    def device(self):
        info = _lib.DeviceInfo()
        check(_lib.lib().xdm_runtime_device(self._rt, ctypes.byref(info)))
        return DeviceInfo(_decode(info.name), _decode(info.uuid), info.total_bytes,
                          _decode(info.platform))

    @property
    def stack(self):
        """The stack as a spec string, top first."""
        c = _lib.lib()
        for size in (4096, 1 << 16):
            buf = ctypes.create_string_buffer(size)
            status = c.xdm_runtime_stack_spec(self._rt, buf, size)
            if status == 0:
                return _decode(buf.value)
        check(status)

    @property
    def layers(self):
        """The layers' module names, top first (the platform is no layer)."""
        c = _lib.lib()
        rt = self._rt
        return [_decode(c.xdm_runtime_layer_name(rt, i))
                for i in range(c.xdm_runtime_layer_count(rt))]

    def layer_attr(self, index, name):
        """Show one attribute of layer index (0 is the top), without the
        trailing newline."""
        index = _int("layer index", index, 0, _U32_MAX)
        name_c = _text("attribute name", name)
        c = _lib.lib()
        for size in (4096, 1 << 20):
            buf = ctypes.create_string_buffer(size)
            status = c.xdm_layer_attr_show(self._rt, index, name_c, buf, size)
            if status == 0:
                text = _decode(buf.value)
                return text[:-1] if text.endswith("\n") else text
        check(status)

    def set_layer_attr(self, index, name, value):
        """Store one attribute of layer index, sysfs-style (a str or int)."""
        index = _int("layer index", index, 0, _U32_MAX)
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        check(_lib.lib().xdm_layer_attr_store(self._rt, index,
                                              _text("attribute name", name),
                                              _text("attribute value", value)))

    # ---- allocation ---------------------------------------------------

    def allocate(self, nbytes, stream=None, tag=None):
        """Allocate nbytes on a native stream; the block's address (an int).

        tag None gives the block the thread's tag (see xdm.tag).  Zero bytes
        give 0, which free() accepts.  A refusal raises the error's class:
        OutOfBudget with requested and remaining, for one.
        """
        nbytes = _int("nbytes", nbytes, 0, _U64_MAX)
        native = _address("stream", stream)
        tag_addr = None if tag is None else _tags.intern(tag)
        ptr = ctypes.c_void_p()
        check(_lib.lib().xdm_native_allocate(self._rt, nbytes, native, tag_addr,
                                             ctypes.byref(ptr)))
        return ptr.value or 0

    def free(self, ptr, stream=None):
        """Free the live block at ptr; stream is the native stream it was
        last used on (its work is waited for).  None or 0 does nothing; an
        address that is no live block is InvalidArgument, and nothing is
        freed."""
        check(_lib.lib().xdm_native_free(self._rt, _address("ptr", ptr),
                                         _address("stream", stream)))

    def record_use(self, ptr, stream):
        """The block at ptr is used on a native stream: its free waits for
        the work queued there so far."""
        check(_lib.lib().xdm_native_record_use(self._rt, _address("ptr", ptr),
                                               _address("stream", stream)))

    def lookup(self, ptr):
        """The live block at address ptr (InvalidArgument if none)."""
        b = _lib.Block()
        check(_lib.lib().xdm_native_lookup(self._rt, _address("ptr", ptr),
                                           ctypes.byref(b)))
        state = _STATES[b.state] if 0 <= b.state < len(_STATES) else str(b.state)
        return Block(b.ptr, b.ordinal, b.stream, b.bytes, b.align,
                     None if b.tag is None else _decode(b.tag), b.generation, state)

    def stream_id(self, native=None):
        """The runtime's stream id of a native stream, imported on first
        sight."""
        out = ctypes.c_uint32()
        check(_lib.lib().xdm_native_stream(self._rt, _address("stream", native),
                                           ctypes.byref(out)))
        return out.value

    def reap(self):
        """Finish pending frees and let layers give back what they keep."""
        check(_lib.lib().xdm_reap_pending(self._rt))

    # ---- the budget ---------------------------------------------------

    @property
    def budget_layer(self):
        """The index of the topmost budget layer (the one the tree's
        budget/ directory shows), or None."""
        names = self.layers
        return names.index("budget") if "budget" in names else None

    def _budget_index(self):
        index = self.budget_layer
        if index is None:
            raise NotSupported("runtime %d has no budget layer (stack '%s')"
                               % (self.ordinal, self.stack))
        return index

    @property
    def budget_limit(self):
        """The budget's limit in bytes, shared by every process on its key.

        Assign an int or a size ("8G", "1.5G", "80%" of the device, "max"):
        the change is live.  A value that is no size raises
        InvalidArgument and the limit is unchanged.
        """
        return int(self.layer_attr(self._budget_index(), "limit"))

    @budget_limit.setter
    def budget_limit(self, value):
        index = self._budget_index()
        if isinstance(value, str):
            # Parsed here first for xdm's own sentence on a bad size.
            parse_size(value, self.device().total_bytes)
        else:
            value = _int("budget limit", value, 0, _U64_MAX)
        self.set_layer_attr(index, "limit", value)

    # ---- the tree -----------------------------------------------------

    @property
    def tree_path(self):
        """This runtime's directory in the tree ("0", or "0.1" for a second
        live runtime of ordinal 0)."""
        return _decode(_lib.lib().xdm_runtime_name(self._rt))


_singletons = {}
_singletons_lock = threading.Lock()


def runtime(ordinal=0):
    """The process-wide runtime of a device ordinal, built on first use."""
    ordinal = _int("ordinal", ordinal, 0, _U32_MAX)
    rt = _singletons.get(ordinal)
    if rt is not None:
        return rt
    handle = ctypes.c_void_p()
    check(_lib.lib().xdm_runtime_get(ordinal, ctypes.byref(handle)))
    with _singletons_lock:
        return _singletons.setdefault(ordinal, Runtime(handle.value, True, _MAKER))


def runtimes():
    """The process-wide runtimes built so far, in ordinal order; builds none.

    Built by this package (:func:`runtime`) or from C by anything else in
    the process (a framework's glue calling ``xdm_runtime_get``): they are
    read from the tree, where every live runtime is a directory.  Private
    runtimes (:meth:`Runtime.create`) are not listed.  A test runner resets
    and reads their peaks around each test (``xdm.pytest``).
    """
    ordinals = []
    for name in _tree.list(""):
        if not name[:1].isdigit():
            continue
        try:
            if _tree.show(name + "/singleton").strip() != "1":
                continue
            ordinals.append(int(_tree.show(name + "/ordinal")))
        except OSError:
            continue        # a private runtime destroyed meanwhile
    return [runtime(o) for o in sorted(set(ordinals))]


def parse_size(text, percent_base=0):
    """Bytes of a size: "4096", "64K", "1.5G", "80%" (of percent_base),
    "max".  InvalidArgument, with xdm's sentence, for anything else."""
    out = ctypes.c_uint64()
    base = _int("percent_base", percent_base, 0, _U64_MAX)
    check(_lib.lib().xdm_parse_size(_text("a size", text), base, ctypes.byref(out)))
    return out.value


def set_query_id(query_id):
    """Set the calling thread's query id, written on every log row."""
    _lib.lib().xdm_set_query_id(_int("query id", query_id, 0, _U64_MAX))


def query_id():
    """The calling thread's query id (0 when unset)."""
    return _lib.lib().xdm_query_id()


def version():
    """libxdm's version string."""
    return _decode(_lib.lib().xdm_version())
