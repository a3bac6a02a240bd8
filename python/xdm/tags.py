"""Tags: what a block is for, shown in the tree and the CSV log.

A framework allocates deep in its own code, where no argument of the caller
reaches, so the tag is a property of the calling thread: every block a
thread allocates through the framework entry without a tag of its own
carries the thread's tag::

    with xdm.tag("activations"):
        y = model(x)            # torch, CuPy or Numba memory tagged here

``tag`` blocks nest and restore the previous tag on exit, exceptions
included.  The tag is per OS thread: asyncio tasks sharing a thread share
it.  A tag is 1 to 128 bytes of UTF-8 without newline, comma or control
character (the tree, which is ASCII, shows each byte outside ASCII as
"?"); libxdm keeps one copy of each distinct text for the life of the
process (at most 65,536 of them), so tag by purpose, not by step number.
"""

import contextlib

from . import _lib
from .errors import InvalidArgument, OutOfMemory, check

_OUT_OF_MEMORY = OutOfMemory.status


def _encode(name):
    if not isinstance(name, str):
        raise TypeError("a tag is a str, not %s" % type(name).__name__)
    if "\0" in name:
        raise InvalidArgument("a tag may not hold a NUL character")
    try:
        return name.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidArgument("a tag must be encodable as UTF-8: %s" % e) from None


def intern(name):
    """The interned copy of a tag, as an address that lives as long as the
    process: what the C calls take for a tag."""
    c = _lib.lib()
    addr = c.xdm_tag_intern(_encode(name))
    if not addr:
        check(c.xdm_last_error().contents.code or _OUT_OF_MEMORY)
    return addr


def set_tag(name):
    """Set the calling thread's tag (None clears it)."""
    raw = None if name is None else _encode(name)
    check(_lib.lib().xdm_set_thread_tag(raw))


def current_tag():
    """The calling thread's tag, or None."""
    raw = _lib.lib().xdm_thread_tag()
    return None if raw is None else raw.decode("utf-8", "replace")


@contextlib.contextmanager
def tag(name):
    """Tag what this thread allocates inside the block; None for untagged."""
    c = _lib.lib()
    previous = c.xdm_thread_tag()       # bytes of an interned tag, or None
    set_tag(name)
    try:
        yield name
    finally:
        check(c.xdm_set_thread_tag(previous))
