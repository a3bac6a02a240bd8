"""xdm's errors as exceptions, one class per ``enum xdm_status``.

Every failed call of libxdm returns a status and leaves a sentence and a
payload in the calling thread's ``xdm_last_error()``.  :func:`check` turns
that into the exception of the status's class, carrying both::

    try:
        rt.allocate(1 << 30)
    except xdm.OutOfBudget as e:
        print(e.requested, e.remaining, e)   # str(e) is xdm's sentence

Classes also derive from the Python exception a caller would catch anyway:
``OutOfBudget`` and ``OutOfMemory`` are ``MemoryError``, ``InvalidArgument``
is ``ValueError``, ``LibraryNotFound`` is ``OSError``.

This module needs no library: it is imported before libxdm is loaded, and
reports a library that cannot be.
"""

# enum xdm_status, in the header's order.
OK = 0
STATUS_NAMES = (
    "XDM_OK",
    "XDM_E_OUT_OF_BUDGET",
    "XDM_E_DRIVER",
    "XDM_E_STREAM_MISUSE",
    "XDM_E_USE_AFTER_FREE",
    "XDM_E_OUT_OF_BOUNDS",
    "XDM_E_INVALID",
    "XDM_E_NO_DEVICE",
    "XDM_E_NOT_SUPPORTED",
    "XDM_E_CONFIG",
    "XDM_E_MODULE",
    "XDM_E_OUT_OF_MEMORY",
)

# enum xdm_bounds_side
_SIDES = {0: None, 1: "before", 2: "after"}


def status_name(status):
    """The C name of a status ("XDM_E_INVALID"), or "status N" if unknown."""
    if isinstance(status, int) and 0 <= status < len(STATUS_NAMES):
        return STATUS_NAMES[status]
    return "status %r" % (status,)


class XdmError(Exception):
    """A failed xdm call: ``status`` (int), ``status_name``, ``message``.

    ``str(e)`` is the message, xdm's own sentence.
    """

    status = None

    def __init__(self, message="", status=None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status

    @property
    def status_name(self):
        return None if self.status is None else status_name(self.status)

    def __str__(self):
        return self.message


class OutOfBudget(XdmError, MemoryError):
    """A budget layer refused: ``requested`` bytes, ``remaining`` under it."""

    status = 1

    def __init__(self, message="", requested=0, remaining=0):
        super().__init__(message)
        self.requested = requested
        self.remaining = remaining


class DriverError(XdmError):
    """The driver failed; ``driver_code`` is its own code (a CUresult)."""

    status = 2

    def __init__(self, message="", driver_code=0):
        super().__init__(message)
        self.driver_code = driver_code


class StreamMisuse(XdmError):
    """The stream-ordered contract was broken; the message says how."""

    status = 3


class UseAfterFree(XdmError):
    """A freed block was used; ``generation`` names it."""

    status = 4

    def __init__(self, message="", generation=0):
        super().__init__(message)
        self.generation = generation


class OutOfBounds(XdmError):
    """A guard found a canary damaged: ``generation``, ``side``.

    ``side`` is "before", "after" or None.
    """

    status = 5

    def __init__(self, message="", generation=0, side=None):
        super().__init__(message)
        self.generation = generation
        self.side = side


class InvalidArgument(XdmError, ValueError):
    """A bad argument."""

    status = 6


class NoDevice(XdmError):
    """No such device, or no driver for it."""

    status = 7


class NotSupported(XdmError):
    """The stack or the platform cannot do this."""

    status = 8


class ConfigError(XdmError):
    """A bad config file or stack spec; the message names the position."""

    status = 9


class ModuleError(XdmError):
    """A module could not be loaded or refused to start."""

    status = 10


class OutOfMemory(XdmError, MemoryError):
    """Host memory, or a bounded resource of the runtime, ran out."""

    status = 11


class LibraryNotFound(XdmError, OSError):
    """libxdm could not be loaded; ``tried`` lists (path, reason) pairs.

    ``str(e)`` names every attempt, then what to do (``advice``).
    """

    status = None

    def __init__(self, tried, advice=None):
        self.tried = list(tried)
        if advice is None:
            advice = ("Install libxdm, or set XDM_LIBRARY to the path of "
                      "libxdm.so.0")
        self.advice = advice
        what = "; ".join("%s (%s)" % (path, why) for path, why in self.tried)
        super().__init__("cannot load libxdm: tried %s. %s." % (what or "nothing",
                                                               advice))


_CLASSES = {cls.status: cls for cls in (
    OutOfBudget, DriverError, StreamMisuse, UseAfterFree, OutOfBounds,
    InvalidArgument, NoDevice, NotSupported, ConfigError, ModuleError,
    OutOfMemory)}


def error_class(status):
    """The exception class of a status (XdmError for an unknown one)."""
    return _CLASSES.get(status, XdmError)


def from_last_error(status):
    """The exception for a failed call's status, from this thread's detail.

    Call it on the thread that made the call, before any other xdm call.
    """
    from ._lib import lib

    c = lib()
    err = c.xdm_last_error().contents
    cls = error_class(status)
    if err.code != status:
        # A caller that left no detail: the status still speaks, without a
        # payload that would belong to an older error.
        message = (c.xdm_strerror(status) or b"unknown status").decode()
        return cls(message) if cls is not XdmError else XdmError(message, status)
    message = err.message.decode("utf-8", "replace")
    if cls is OutOfBudget:
        return OutOfBudget(message, err.requested, err.remaining)
    if cls is DriverError:
        return DriverError(message, err.driver_code)
    if cls is UseAfterFree:
        return UseAfterFree(message, err.generation)
    if cls is OutOfBounds:
        return OutOfBounds(message, err.generation, _SIDES.get(err.side))
    if cls is XdmError:
        return XdmError(message, status)
    return cls(message)


def check(status):
    """Raise the exception of a failed status; return None for XDM_OK."""
    if status != OK:
        raise from_last_error(status)
