"""xdm: a stream-ordered device memory runtime, from Python.

Pure Python over ctypes: this package loads libxdm (``xdm._lib`` says
where it looks) and calls its C API.  What it carries:

- runtimes: ``xdm.runtime(0)`` (the process's, built from the config),
  ``xdm.runtimes()`` (those built so far) and ``xdm.Runtime.create(0,
  stack=...)`` (a private one); stats, the budget limit, allocation by
  address on a native stream (``xdm.runtime``);
- errors as exceptions with their payloads: ``xdm.OutOfBudget`` has
  ``requested`` and ``remaining`` (``xdm.errors``);
- tags: ``with xdm.tag("activations"):`` (``xdm.tags``);
- the introspection tree and its mount: ``xdm.tree.show("0/budget/used")``,
  ``xdm.mount("/tmp/xdm-%p")`` (``xdm.tree``);
- the framework switches, each importing its framework only when called:
  ``xdm.torch.use()``, ``xdm.cupy.use()``, and the Numba memory manager
  ``NUMBA_CUDA_MEMORY_MANAGER=xdm.numba`` (or ``xdm.numba.use()``);
- blocks shared between processes: ``xdm.ipc.export(array)`` gives a
  handle of bytes, ``xdm.ipc.open(handle)`` maps it in another process
  (``xdm.ipc``);
- a pytest plugin, ``pytest -p xdm.pytest --xdm-limit 8G``: one budget
  per GPU for the whole run, a cap per xdist worker and per test, and the
  tests' peaks (``xdm.pytest``).

Importing xdm loads nothing: libxdm is opened by the first call that needs
it, and no framework is ever imported by ``import xdm``.
"""

from . import errors, ipc, tree
from ._lib import find_module, library_path, module_path, pkglibdir
from .errors import (ConfigError, DriverError, InvalidArgument, LibraryNotFound,
                     ModuleError, NoDevice, NotSupported, OutOfBounds, OutOfBudget,
                     OutOfMemory, StreamMisuse, UseAfterFree, XdmError)
from .runtime import (Block, DeviceInfo, Runtime, Stats, parse_size, query_id,
                      runtime, runtimes, set_query_id, version)
from .tags import current_tag, set_tag, tag
from .tree import mount, mount_point, unmount

__all__ = [
    "Block", "ConfigError", "DeviceInfo", "DriverError", "InvalidArgument",
    "LibraryNotFound", "ModuleError", "NoDevice", "NotSupported", "OutOfBounds",
    "OutOfBudget", "OutOfMemory", "Runtime", "Stats", "StreamMisuse",
    "UseAfterFree", "XdmError", "current_tag", "errors", "find_module", "ipc",
    "library_path", "module_path", "mount", "mount_point", "parse_size",
    "pkglibdir", "query_id", "runtime", "runtimes", "set_query_id", "set_tag",
    "tag", "tree", "unmount", "version",
]
