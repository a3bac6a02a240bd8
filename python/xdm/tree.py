"""The introspection tree, read and written in-process, and the FUSE mount.

Every live runtime of the process is a directory of sysfs-style files, one
value per file (``xdm-fs(7)`` lists them).  These calls read the same tree
that ``cat /mnt/xdm/...`` reads, without a mount::

    xdm.tree.list("")                   # ['version', 'pid', ..., '0']
    xdm.tree.show("0/bytes_outstanding")  # '1048576\\n', as cat shows it
    xdm.tree.store("0/budget/limit", "8G")

A path is relative to the root, "/"-separated; "" is the root.  Failures
are ``OSError`` with the errno the filesystem would answer: ENOENT (no such
file), ENOTDIR, EISDIR, EACCES (a read-only file, or an action read),
EINVAL (a value the file refuses; nothing was changed).
"""

import ctypes
import errno as _errno
import os
from collections import namedtuple

from . import _lib
from .errors import check

Node = namedtuple("Node", "dir mode")
Node.__doc__ = "A tree entry: dir (bool) and mode (0555, 0444, 0644 or 0200)."


def _path(path):
    if not isinstance(path, str):
        raise TypeError("a tree path is a str, not %s" % type(path).__name__)
    return path.encode("utf-8")


def _raise(err, path):
    code = -err
    raise OSError(code, os.strerror(code) if code > 0 else "unknown error", path)


def stat(path):
    """The entry at path: Node(dir, mode)."""
    node = _lib.TreeNode()
    err = _lib.lib().xdm_tree_stat(_path(path), ctypes.byref(node))
    if err:
        _raise(err, path)
    return Node(bool(node.dir), node.mode)


def list(path=""):
    """The names in the directory at path, in the tree's order."""
    names = []

    def collect(name, node, arg):
        names.append(name.decode("utf-8", "replace"))
        return 0

    fn = _lib.TREE_LIST_FN(collect)
    err = _lib.lib().xdm_tree_list(_path(path), fn, None)
    if err:
        _raise(err, path)
    return names


def show(path):
    """The text of the file at path, exactly as cat shows it ('42\\n')."""
    c = _lib.lib()
    text = ctypes.c_void_p()
    length = ctypes.c_size_t()
    err = c.xdm_tree_show(_path(path), ctypes.byref(text), ctypes.byref(length))
    if err:
        _raise(err, path)
    try:
        return ctypes.string_at(text.value, length.value).decode("utf-8", "replace")
    finally:
        _lib.libc_free(text.value)


def store(path, value):
    """Write the whole value of a writable file (a str, bytes or int).

    A value the file cannot parse is OSError(EINVAL), and the file keeps
    the value it had.
    """
    if isinstance(value, bool) or not isinstance(value, (str, bytes, int)):
        raise TypeError("a tree value is a str, bytes or int, not %s"
                        % type(value).__name__)
    if isinstance(value, int):
        value = str(value)
    raw = value.encode("utf-8") if isinstance(value, str) else value
    if b"\0" in raw:
        raise OSError(_errno.EINVAL, "a value may not hold a NUL byte", path)
    err = _lib.lib().xdm_tree_store(_path(path), raw, len(raw))
    if err:
        _raise(err, path)


def mount(directory):
    """Serve the tree as a FUSE filesystem at directory ("%p": the pid).

    NotSupported when libxdm was built without FUSE, InvalidArgument when
    a tree is mounted already.
    """
    if not isinstance(directory, str):
        raise TypeError("a mount point is a str, not %s" % type(directory).__name__)
    check(_lib.lib().xdm_mount(os.fsencode(directory)))


def unmount():
    """Stop serving the tree; InvalidArgument when nothing is mounted."""
    check(_lib.lib().xdm_unmount())


def mount_point():
    """The mounted directory, or None."""
    buf = ctypes.create_string_buffer(4096)
    if not _lib.lib().xdm_mount_point(buf, len(buf)):
        return None
    return os.fsdecode(buf.value)
