"""Finding and loading libxdm, and the C declarations the package calls.

The library is looked for, in order:

1. ``$XDM_LIBRARY``, a path (the build tree's ``./xdm-uninstalled`` and the
   test harness set it to ``<builddir>/.libs/libxdm.so``); when it is set,
   nothing else is tried;
2. the ``libdir`` written into ``xdm/_paths.py`` by ``make`` (a package
   installed by ``make install`` finds the library it was installed with);
3. ``libxdm.so.0`` through the dynamic loader's own search
   (``LD_LIBRARY_PATH``, the ``ldconfig`` cache, ``/usr/lib``);
4. ``libxdm.so.0`` in the directories a ``./configure && make install``
   puts it in by default: ``/usr/local/lib`` (which the loader only knows
   after ``ldconfig`` has run), then for prefix ``/usr`` the interpreter's
   multiarch directory (``/usr/lib/x86_64-linux-gnu``) and ``/usr/lib``.
   A package installed by pip has no ``_paths.py`` and relies on 3 and 4.

The first that loads wins; if none does, :class:`xdm.LibraryNotFound` names
each attempt and why it failed, and says what to do.  Loading happens once
per process, on the first call that needs the library, under a lock.

Every function is declared with its argument and result types from
``<xdm/xdm.h>``; the structures below mirror the header field by field, so a
change there must be made here too (the tests read each of them back).
"""

import ctypes
import os
import threading

from .errors import LibraryNotFound

# The shared object's major version (libtool's current - age); bump with it.
SONAME = "libxdm.so.0"

# Constants of <xdm/xdm.h> the package needs.
MAX_DEVICES = 64
TAG_MAX = 128
IPC_HANDLE_SIZE = 256
MAX_TAGS = 65536

_c_status = ctypes.c_int
_c_rt = ctypes.c_void_p


class Error(ctypes.Structure):
    """struct xdm_error"""

    _fields_ = [
        ("code", ctypes.c_int),
        ("requested", ctypes.c_size_t),
        ("remaining", ctypes.c_size_t),
        ("generation", ctypes.c_uint64),
        ("side", ctypes.c_int),
        ("driver_code", ctypes.c_int),
        ("message", ctypes.c_char * 512),
    ]


class Block(ctypes.Structure):
    """struct xdm_block"""

    _fields_ = [
        ("ptr", ctypes.c_uint64),
        ("ordinal", ctypes.c_uint32),
        ("stream", ctypes.c_uint32),
        ("bytes", ctypes.c_size_t),
        ("align", ctypes.c_size_t),
        ("tag", ctypes.c_char_p),
        ("generation", ctypes.c_uint64),
        ("state", ctypes.c_int),
    ]


class Stats(ctypes.Structure):
    """struct xdm_stats"""

    _fields_ = [
        ("bytes_outstanding", ctypes.c_uint64),
        ("blocks_outstanding", ctypes.c_uint64),
        ("bytes_peak", ctypes.c_uint64),
        ("allocs", ctypes.c_uint64),
        ("frees", ctypes.c_uint64),
        ("failures", ctypes.c_uint64),
        ("waits_queued", ctypes.c_uint64),
        ("events_recorded", ctypes.c_uint64),
        ("bytes_allocated", ctypes.c_uint64),
        ("bytes_freed", ctypes.c_uint64),
        ("blocks_peak", ctypes.c_uint64),
    ]


class DeviceInfo(ctypes.Structure):
    """struct xdm_device_info"""

    _fields_ = [
        ("name", ctypes.c_char * 128),
        ("uuid", ctypes.c_char * 40),
        ("total_bytes", ctypes.c_uint64),
        ("platform", ctypes.c_char * 32),
    ]


class TreeNode(ctypes.Structure):
    """struct xdm_tree_node"""

    _fields_ = [
        ("dir", ctypes.c_bool),
        ("mode", ctypes.c_uint),
    ]


# int (*fn)(const char *name, const struct xdm_tree_node *node, void *arg)
TREE_LIST_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p,
                                ctypes.POINTER(TreeNode), ctypes.c_void_p)

_P = ctypes.POINTER

# name: (restype, argtypes)
_PROTOTYPES = {
    "xdm_strerror": (ctypes.c_char_p, [ctypes.c_int]),
    "xdm_last_error": (_P(Error), []),
    "xdm_last_error_message": (ctypes.c_char_p, []),
    "xdm_error_clear": (None, []),
    "xdm_runtime_get": (_c_status, [ctypes.c_uint32, _P(_c_rt)]),
    "xdm_runtime_create": (_c_status, [ctypes.c_uint32, ctypes.c_char_p,
                                       ctypes.c_char_p, _P(_c_rt)]),
    "xdm_runtime_destroy": (_c_status, [_c_rt]),
    "xdm_runtime_ordinal": (ctypes.c_uint32, [_c_rt]),
    "xdm_runtime_name": (ctypes.c_char_p, [_c_rt]),
    "xdm_bytes_outstanding": (ctypes.c_size_t, [_c_rt]),
    "xdm_reap_pending": (_c_status, [_c_rt]),
    "xdm_supports_block_use_tracking": (ctypes.c_bool, [_c_rt]),
    "xdm_runtime_stats": (None, [_c_rt, _P(Stats)]),
    "xdm_runtime_reset_peak": (_c_status, [_c_rt]),
    "xdm_runtime_reset_totals": (_c_status, [_c_rt]),
    "xdm_set_query_id": (None, [ctypes.c_uint64]),
    "xdm_query_id": (ctypes.c_uint64, []),
    "xdm_stream_count": (ctypes.c_uint32, [_c_rt]),
    "xdm_stream_handle": (_c_status, [_c_rt, ctypes.c_uint32, _P(ctypes.c_void_p)]),
    "xdm_stream_synchronize": (_c_status, [_c_rt, ctypes.c_uint32]),
    "xdm_native_stream": (_c_status, [_c_rt, ctypes.c_void_p, _P(ctypes.c_uint32)]),
    # The tag is passed as the interned pointer xdm_tag_intern() returned.
    "xdm_native_allocate": (_c_status, [_c_rt, ctypes.c_size_t, ctypes.c_void_p,
                                        ctypes.c_void_p, _P(ctypes.c_void_p)]),
    "xdm_native_free": (_c_status, [_c_rt, ctypes.c_void_p, ctypes.c_void_p]),
    "xdm_native_record_use": (_c_status, [_c_rt, ctypes.c_void_p, ctypes.c_void_p]),
    "xdm_native_lookup": (_c_status, [_c_rt, ctypes.c_void_p, _P(Block)]),
    "xdm_tag_intern": (ctypes.c_void_p, [ctypes.c_char_p]),
    "xdm_set_thread_tag": (_c_status, [ctypes.c_char_p]),
    "xdm_thread_tag": (ctypes.c_char_p, []),
    "xdm_runtime_device": (_c_status, [_c_rt, _P(DeviceInfo)]),
    "xdm_runtime_layer_count": (ctypes.c_uint32, [_c_rt]),
    "xdm_runtime_layer_name": (ctypes.c_char_p, [_c_rt, ctypes.c_uint32]),
    "xdm_runtime_stack_spec": (_c_status, [_c_rt, ctypes.c_char_p, ctypes.c_size_t]),
    "xdm_layer_attr_show": (_c_status, [_c_rt, ctypes.c_uint32, ctypes.c_char_p,
                                        ctypes.c_char_p, ctypes.c_size_t]),
    "xdm_layer_attr_store": (_c_status, [_c_rt, ctypes.c_uint32, ctypes.c_char_p,
                                         ctypes.c_char_p]),
    "xdm_tree_stat": (ctypes.c_int, [ctypes.c_char_p, _P(TreeNode)]),
    "xdm_tree_list": (ctypes.c_int, [ctypes.c_char_p, TREE_LIST_FN, ctypes.c_void_p]),
    "xdm_tree_show": (ctypes.c_int, [ctypes.c_char_p, _P(ctypes.c_void_p),
                                     _P(ctypes.c_size_t)]),
    "xdm_tree_store": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]),
    "xdm_mount": (_c_status, [ctypes.c_char_p]),
    "xdm_unmount": (_c_status, []),
    "xdm_mount_point": (ctypes.c_bool, [ctypes.c_char_p, ctypes.c_size_t]),
    # struct xdm_ipc_handle is 256 bytes, passed by address.
    "xdm_ipc_export": (_c_status, [_c_rt, _P(Block), ctypes.c_char_p]),
    "xdm_ipc_open": (_c_status, [_c_rt, ctypes.c_char_p, ctypes.c_uint32,
                                 _P(ctypes.c_uint64), _P(ctypes.c_size_t)]),
    "xdm_ipc_close": (_c_status, [_c_rt, ctypes.c_uint64, ctypes.c_uint32]),
    "xdm_parse_size": (_c_status, [ctypes.c_char_p, ctypes.c_uint64, _P(ctypes.c_uint64)]),
    "xdm_version": (ctypes.c_char_p, []),
}

_lock = threading.Lock()
_lib = None
_path = None
_libc_free = None


def _paths():
    """The generated xdm._paths module, or None outside an installed tree."""
    try:
        from . import _paths as paths
    except ImportError:
        return None
    return paths


def default_libdirs():
    """The library directories of a default ``./configure && make install``.

    ``/usr/local/lib`` (prefix ``/usr/local``), then for prefix ``/usr``
    the interpreter's multiarch directory (``/usr/lib/<triplet>``, where
    distributions put libraries) and ``/usr/lib``.
    """
    import sysconfig

    dirs = ["/usr/local/lib"]
    multiarch = sysconfig.get_config_var("MULTIARCH")
    if multiarch:
        dirs.append("/usr/lib/" + multiarch)
    dirs.append("/usr/lib")
    return dirs


def _candidates():
    """(source, path) pairs to try, in order; see the module's docstring."""
    env = os.environ.get("XDM_LIBRARY")
    if env:
        # A path that was asked for is the only candidate: silently loading
        # another libxdm would hide the mistake.
        return [("XDM_LIBRARY", env)]
    found = []
    paths = _paths()
    if paths is not None and getattr(paths, "libdir", None):
        found.append(("xdm._paths libdir", os.path.join(paths.libdir, SONAME)))
    found.append(("the dynamic loader's search", SONAME))
    for d in default_libdirs():
        path = os.path.join(d, SONAME)
        if all(path != p for _, p in found):
            found.append(("a default libdir", path))
    return found


def _declare(cdll):
    for name, (restype, argtypes) in _PROTOTYPES.items():
        fn = getattr(cdll, name)
        fn.restype = restype
        fn.argtypes = argtypes


def _load():
    tried = []
    candidates = _candidates()
    for source, path in candidates:
        if os.sep in path and not os.path.exists(path):
            # Said here, not by dlopen: "no such file" is the whole story.
            tried.append((path, "%s: no such file" % source))
            continue
        try:
            cdll = ctypes.CDLL(path)
            _declare(cdll)
        except (OSError, AttributeError) as e:
            # AttributeError: an older libxdm without a symbol called here.
            tried.append((path, "%s: %s" % (source, e)))
            continue
        return cdll, path
    if candidates[0][0] == "XDM_LIBRARY":
        advice = ("Set XDM_LIBRARY to the path of libxdm.so.0 (a build tree "
                  "has it in .libs/), or unset it to look in the usual places")
    else:
        advice = ("Install libxdm (xdm's `make install` puts it in "
                  "/usr/local/lib), or set XDM_LIBRARY to the path of "
                  "libxdm.so.0 (a build tree has it in .libs/)")
    raise LibraryNotFound(tried, advice)


def lib():
    """The loaded libxdm (a ctypes.CDLL), loading it on first use."""
    global _lib, _path
    cdll = _lib
    if cdll is not None:
        return cdll
    with _lock:
        if _lib is None:
            _lib, _path = _load()
        return _lib


def library_path():
    """The path (or name) libxdm was loaded from; loads it if needed."""
    lib()
    return _path


def libc_free(address):
    """free() a buffer that libxdm malloc'ed (xdm_tree_show's text)."""
    global _libc_free
    if _libc_free is None:
        # The process's own free: the one libxdm's malloc pairs with, also
        # when a sanitizer's runtime is preloaded.
        fn = ctypes.CDLL(None).free
        fn.restype = None
        fn.argtypes = [ctypes.c_void_p]
        _libc_free = fn
    _libc_free(address)


def pkglibdir():
    """The installed module directory ($(pkglibdir)), or None.

    Known only to an installed package (from xdm/_paths.py); from a build
    tree use :func:`module_path`, which also reads XDM_MODULE_PATH.
    """
    paths = _paths()
    return getattr(paths, "pkglibdir", None) if paths is not None else None


def module_path():
    """Directories libxdm searches for modules, in its order.

    The colon-separated entries of $XDM_MODULE_PATH, then
    :func:`pkglibdir` when known.  (A config file's ``module_dir`` sits
    between the two for libxdm; it is not read here.)
    """
    dirs = [d for d in os.environ.get("XDM_MODULE_PATH", "").split(":") if d]
    installed = pkglibdir()
    if installed:
        dirs.append(installed)
    return dirs


def find_module(filename):
    """The first file of that name in :func:`module_path`, or None.

    For glue shared objects installed beside the modules (the torch
    allocator's), found the same way in a build tree and when installed.
    """
    for d in module_path():
        path = os.path.join(d, filename)
        if os.path.isfile(path):
            return path
    return None
