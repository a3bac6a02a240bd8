"""PyTorch allocates through xdm: ``xdm.torch.use()``.

::

    import xdm.torch
    xdm.torch.use(stack="budget key=team limit=20G | pool | cuda_vmm")
    import torch
    x = torch.randn(1 << 20, device="cuda")     # a block of xdm.runtime(0)

``use`` makes xdm torch's CUDA allocator: the C module ``libxdm-torch.so``
implements torch's whole allocator interface and installs itself as
torch's current allocator.  torch can swap its allocator only before its
first CUDA allocation, so call ``use`` first: once torch has allocated
CUDA memory (or initialized CUDA, ``torch.cuda.init()``), ``use`` raises
InvalidArgument and torch keeps its own allocator.  The module is built
against one torch; ``use`` refuses another with one sentence.

Every tensor's memory is then a block of the xdm runtime of its device, on
torch's stream: the budget counts it (and refuses it: torch raises
``torch.OutOfMemoryError`` with xdm's sentence, and the program goes on),
the tree and the log show it, ``with xdm.tag("weights"):`` tags what the
thread allocates inside the block.  Autograd's backward runs on torch's
worker threads, which do not carry the caller's tag: gradients and the
buffers of backward are tagged with those threads' tags (untagged unless
code on them sets one).

What torch asks of its allocator is answered from xdm's own state
(xdm-torch(7) lists each feature):

- torch's memory statistics (``torch.cuda.memory_stats``,
  ``max_memory_allocated``, ``memory_summary``, the resets) are the
  runtimes' counters and the pools' attributes, with the budget's figures
  under ``xdm.budget.*`` keys; this module's ``memory_stats`` and
  ``memory_*`` helpers read them through torch;
- ``cudnn.benchmark``, CUDA graphs and their private pools (each a
  private runtime under the same budget), ``torch.compile(mode=
  "reduce-overhead")`` with its graph trees, ``torch.cuda.MemPool``,
  memory history and snapshots, ``record_stream``, ``empty_cache``,
  ``set_per_process_memory_fraction`` and peer access all work;
- CUDA tensors sent to other processes (``torch.multiprocessing``) travel
  as xdm's handles of their blocks, when both processes allocate through
  xdm on a stack whose memory can be shared (``pool | cuda_vmm``, or
  ``cuda_async ipc=true``; xdm-torch(7));
- torch's allocator settings, ``PYTORCH_ALLOC_CONF`` (or
  ``PYTORCH_CUDA_ALLOC_CONF``), are read by ``use``: those with an xdm
  equivalent change the stack (``expandable_segments:True`` makes its base
  ``cuda_vmm``, ``backend:cudaMallocAsync`` ``cuda_async``,
  ``per_process_memory_fraction:F`` sets the pool's ``max``), the others
  are told on stderr; ``alloc_conf_plan()`` shows what they mean
  (``xdm.torch_conf``).

The module is looked for in ``$XDM_TORCH_LIBRARY``, then beside xdm's
modules (``xdm.find_module``: ``$XDM_MODULE_PATH``, then the installed
``$(pkglibdir)``), then in the build tree at ``$XDM_TOP_BUILDDIR``.

Importing this module does not import torch; ``use`` does.
"""

import atexit
import ctypes
import dataclasses
import functools
import os
import sys
import tempfile
import threading

from . import _lib
from . import torch_conf as _torch_conf
from . import tree as _tree
from .errors import InvalidArgument, NotSupported, XdmError
from .runtime import runtime as _runtime

LIBRARY = "libxdm-torch.so"
ALLOC_FN = "xdm_torch_malloc"
FREE_FN = "xdm_torch_free"

_lock = threading.Lock()
_state = {
    "path": None,       # the glue module torch allocates through
    "glue": None,       # its ctypes handle
    "allocator": None,  # torch's CUDAPluggableAllocator object, kept alive
    "hooks": None,      # what xdm_torch_install_hooks() answered
    "config": None,     # the XDM_CONFIG use() chose, if any
}
_said = set()           # the lines told on stderr, each told once


def _candidates():
    """(where, path) of each place the glue module is looked for."""
    found = []
    env = os.environ.get("XDM_TORCH_LIBRARY")
    if env:
        # A path that was asked for is the only candidate.
        return [("XDM_TORCH_LIBRARY", env)]
    for d in _lib.module_path():
        found.append(("xdm's module path", os.path.join(d, LIBRARY)))
    top = os.environ.get("XDM_TOP_BUILDDIR")
    if top:
        found.append(("the build tree (XDM_TOP_BUILDDIR)",
                      os.path.join(top, "frameworks", "torch", ".libs", LIBRARY)))
    return found


def library_path():
    """The path of the glue module torch loads, or NotSupported saying
    where it was looked for."""
    tried = _candidates()
    for _, path in tried:
        if os.path.isfile(path):
            return path
    where = "; ".join("%s: %s" % (w, p) for w, p in tried) or "nowhere: " \
        "XDM_TORCH_LIBRARY, XDM_MODULE_PATH and XDM_TOP_BUILDDIR are unset and " \
        "xdm is not installed"
    raise NotSupported("xdm.torch: %s was not found (looked in %s); xdm was built "
                       "without torch, or configure did not find torch's headers "
                       "(./configure --with-torch)" % (LIBRARY, where))


def _config_source():
    """The file (or "<embedded>") the process's runtimes are, or would
    be, built from: the first line of the tree's config file."""
    first = _tree.show("config").split("\n", 1)[0]
    return first[2:] if first.startswith("# ") else first


def _stack_config(stack):
    """A config file of one stack for every device; removed at exit."""
    if not isinstance(stack, str) or not stack.strip():
        raise InvalidArgument("xdm.torch.use: stack is a non-empty str, like "
                              "'budget limit=8G | pool | cuda_vmm'")
    if "\n" in stack or "\0" in stack:
        raise InvalidArgument("xdm.torch.use: a stack is one line")
    fd, path = tempfile.mkstemp(prefix="xdm-torch-", suffix=".conf")
    with os.fdopen(fd, "w") as f:
        f.write("# written by xdm.torch.use(stack=...)\n[device *]\nstack = %s\n" % stack)
    atexit.register(_remove, path)
    return path


def _remove(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def _choose_config(path, what):
    """Point XDM_CONFIG at path, if no runtime was built from another."""
    path = os.path.abspath(path)
    previous = os.environ.get("XDM_CONFIG")
    os.environ["XDM_CONFIG"] = path
    try:
        source = _config_source()
    except OSError:
        source = None   # it does not load: the runtime's build says why below
    if source is not None and source != path:
        if previous is None:
            del os.environ["XDM_CONFIG"]
        else:
            os.environ["XDM_CONFIG"] = previous
        raise InvalidArgument(
            "xdm.torch.use: xdm's runtimes of this process are built already, from "
            "%s; %s can only be chosen before the first runtime is built (call "
            "xdm.torch.use first)" % (source, what))
    return path


def _ordinal(value, what="ordinal"):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgument("xdm.torch: %s is a device ordinal (an int >= 0), "
                              "not %r" % (what, value))
    return value


def use(ordinal=None, config=None, stack=None):
    """Make xdm torch's CUDA allocator, before torch allocates CUDA memory.

    ordinal: None builds each device's runtime at torch's first allocation
    there; an int builds that device's runtime now, so that a bad config
    or stack raises here rather than inside torch.
    config: a config file (xdm.conf(5)) for this process's runtimes, set as
    XDM_CONFIG.  stack: one stack for every device, e.g.
    ``"budget key=ci limit=8G | pool | cuda_vmm"``, written to a temporary
    config file (removed at exit) that becomes XDM_CONFIG; anything else
    (a mount, per-device stacks) needs a config file.  xdm reads its
    config once, when the process's first runtime is built: both raise
    InvalidArgument if one was built already from another file.

    torch's allocator settings in PYTORCH_ALLOC_CONF and
    PYTORCH_CUDA_ALLOC_CONF, read as torch reads them (alloc_conf_text),
    are applied to the stack given, or to the
    default stack when neither config nor a configured file gives one;
    a config file's stacks are left as they are.  What each setting
    becomes, and the warnings told once on stderr, are
    ``alloc_conf_plan()``'s; a setting torch refuses raises
    InvalidArgument here too.

    Calling use again changes nothing (and refuses a new config or stack).
    Raises NotSupported when the glue module is missing or torch sees no
    CUDA device, InvalidArgument when torch's allocator is initialized.
    """
    if ordinal is not None:
        ordinal = _ordinal(ordinal)
    if config is not None and stack is not None:
        raise InvalidArgument("xdm.torch.use: give a config file or a stack, not both")
    if config is not None and not isinstance(config, (str, os.PathLike)):
        raise InvalidArgument("xdm.torch.use: config is a path, not %r" % (config,))
    stack = _apply_alloc_conf(config, stack)
    with _lock:
        if _state["allocator"] is not None:
            if config is not None or stack is not None:
                raise InvalidArgument("xdm.torch.use: torch allocates through xdm already "
                                      "(config %s); its config cannot change now"
                                      % _state["config"])
            if ordinal is not None:
                _runtime(ordinal)
            return
        path = library_path()
        _lib.lib()      # libxdm first: the glue binds to this same copy
        chosen = None
        if config is not None:
            config = os.fspath(config)
            if not os.path.isfile(config):
                raise InvalidArgument("xdm.torch.use: config %s is not a file" % config)
            chosen = _choose_config(config, "a config")
        elif stack is not None:
            chosen = _choose_config(_stack_config(stack), "a stack")
        if ordinal is not None:
            _runtime(ordinal)
        _install(path)
        _state["config"] = chosen


def alloc_conf_text(environ=None):
    """(name, text) of the allocator settings torch reads from environ
    (os.environ by default): PYTORCH_ALLOC_CONF, else the older
    PYTORCH_CUDA_ALLOC_CONF; when both are set, the name is both and the
    text the entries torch takes from each (xdm.torch_conf.combine: the CUDA
    allocator's own keys from PYTORCH_CUDA_ALLOC_CONF, the others from
    PYTORCH_ALLOC_CONF); (None, None) when neither is set."""
    environ = os.environ if environ is None else environ
    first, second = _torch_conf.ENV_NAMES
    if first in environ and second in environ:
        return ("%s + %s" % (first, second),
                _torch_conf.combine(environ[first], environ[second]))
    for name in _torch_conf.ENV_NAMES:
        if name in environ:
            return name, environ[name]
    return None, None


def _config_file():
    """The configuration file the runtimes' stacks would come from, or None
    when it is the embedded default (whose devices get the platform's
    default stack)."""
    env = os.environ.get("XDM_CONFIG")
    if env:
        return env
    try:
        source = _config_source()
    except (OSError, XdmError):
        return None     # it does not load: building the runtime says why
    return None if source == "<embedded>" else source


def alloc_conf_plan(text=None, stack=None, config=None):
    """What torch's allocator settings mean for use(stack=stack,
    config=config): an xdm.torch_conf.AllocConfPlan, or None when there
    are none.

    text: the settings (None: read PYTORCH_ALLOC_CONF, else
    PYTORCH_CUDA_ALLOC_CONF, as torch does).  With neither stack nor config
    the plan applies to the configuration xdm would read: a file named by
    XDM_CONFIG or installed in $(sysconfdir) keeps its stacks (and the
    plan says so), the embedded default's stack is changed.  Raises
    InvalidArgument, naming the entry, for settings torch refuses.
    """
    source = _torch_conf.ENV_NAMES[0]
    from_env = text is None
    if from_env:
        source, text = alloc_conf_text()
        if text is None:
            return None
    if config is not None:
        config = os.fspath(config)
    elif stack is None:
        config = _config_file()
    plan = _torch_conf.plan(text, stack=stack, config=config, source=source)
    if from_env and " + " in source:
        first, second = _torch_conf.ENV_NAMES
        plan = dataclasses.replace(plan, infos=plan.infos + (
            "both %s and %s are set: as torch does, %s is read from %s and "
            "everything else from %s"
            % (first, second, ", ".join(sorted(_torch_conf.CUDA_FIRST_KEYS)),
               second, first),))
    return plan


def _say(line):
    """line on stderr, prefixed xdm.torch:, once per process."""
    if line not in _said:
        _said.add(line)
        print("xdm.torch: " + line, file=sys.stderr)


def _apply_alloc_conf(config, stack):
    """The stack use() goes on with, torch's allocator settings
    (PYTORCH_ALLOC_CONF) applied: stack itself, or the stack they make
    (from the default stack when stack is None and no file is
    configured).  Tells each change and warning once on stderr.  Nothing
    once torch allocates through xdm: its configuration is set."""
    if _state["allocator"] is not None:
        return stack
    if stack is not None and not isinstance(stack, str):
        return stack    # _stack_config refuses it
    plan = alloc_conf_plan(stack=stack, config=config)
    if plan is None:
        return stack
    for line in plan.changes + plan.warnings:
        _say(line)
    return plan.stack if plan.stack_changed else stack


def _check_torch_version(built_for, running):
    """Refuse to run the glue under another torch than the one it was
    compiled against: a C++ module built for one torch calls into its
    libraries by their layout, which another release changes.

    built_for: the torch version the glue was built against; running: the
    running torch's ``torch.__version__``.  Both are compared whole, the
    local part included (2.11.0+cu130 is not 2.11.0+cu128).  Returns
    nothing when they are equal; raises InvalidArgument otherwise.
    """
    built = str(built_for).strip() if built_for is not None else ""
    run = str(running).strip() if running is not None else ""
    if not built or not run:
        raise InvalidArgument(
            "xdm.torch: cannot compare torch versions (built against %r, running "
            "%r); rebuild xdm with ./configure --with-torch against this torch"
            % (built_for, running))
    if built != run:
        raise InvalidArgument(
            "xdm.torch: %s was built against torch %s but this process runs torch "
            "%s; rebuild xdm with ./configure --with-torch against this torch"
            % (LIBRARY, built, run))


def _declare(glue):
    """The glue module's C entry points, typed."""
    glue.xdm_torch_built_for.restype = ctypes.c_char_p
    glue.xdm_torch_built_for.argtypes = []
    glue.xdm_torch_install.restype = ctypes.c_int
    glue.xdm_torch_install.argtypes = []
    glue.xdm_torch_install_error.restype = ctypes.c_char_p
    glue.xdm_torch_install_error.argtypes = []
    glue.xdm_torch_free_failures.restype = ctypes.c_uint64
    glue.xdm_torch_free_failures.argtypes = []
    glue.xdm_torch_recorded_uses.restype = ctypes.c_uint64
    glue.xdm_torch_recorded_uses.argtypes = []
    glue.xdm_torch_empty_cache.restype = None
    glue.xdm_torch_empty_cache.argtypes = []


def _install(path):
    import torch

    if not torch.cuda.is_available():
        raise NotSupported("xdm.torch.use: torch %s sees no CUDA device"
                           % torch.__version__)
    if torch.cuda.is_initialized():
        raise InvalidArgument(_too_late("torch.cuda is initialized already"))
    # torch is imported: its libraries are loaded, and the glue binds to them.
    glue = ctypes.CDLL(path)
    _declare(glue)
    _check_torch_version(glue.xdm_torch_built_for().decode(), torch.__version__)
    if glue.xdm_torch_install() != 0:
        why = glue.xdm_torch_install_error().decode(errors="replace")
        if "initialized" in why:
            raise InvalidArgument(_too_late("torch's CUDA allocator is initialized "
                                            "already"))
        raise NotSupported("xdm.torch.use: torch refused xdm as its allocator: %s" % why)
    _extend_memory_stats(torch)
    _mark_sent_tensors(torch)
    _state.update(path=path, glue=glue, allocator=True, hooks=1)


def _mark_sent_tensors(torch):
    """CUDA tensors this process sends (torch.multiprocessing, a Queue) are
    rebuilt by _rebuild_cuda_tensor, which checks the receiver first.

    Their storage travels as xdm's handle, which only a process whose torch
    allocates through xdm can open; torch's own allocator would stop at it
    with a message about a future version of torch.  Wrapping torch's own
    reduction keeps its arguments (handle, reference counter, event) as they
    are and adds the check in front of its rebuild."""
    from multiprocessing.reduction import ForkingPickler

    # Imported first: importing torch.multiprocessing registers torch's
    # reductions, which must not replace these afterwards.
    import torch.multiprocessing.reductions as reductions

    torch_reduce = reductions.reduce_tensor

    def reduce_tensor(tensor):
        rebuild, args = torch_reduce(tensor)
        if rebuild is reductions.rebuild_cuda_tensor:
            return _rebuild_cuda_tensor, (rebuild, args)
        return rebuild, args

    for cls in (torch.Tensor, torch.nn.parameter.Parameter):
        ForkingPickler.register(cls, reduce_tensor)


UNSWITCHED_RECEIVER = (
    "xdm.torch: this CUDA tensor comes from a process whose torch allocates "
    "through xdm, and its memory can be opened only by a process that does too; "
    "call xdm.torch.use() in this process before its first CUDA allocation "
    "(torch's own allocator cannot open xdm's handle)")


def _rebuild_cuda_tensor(rebuild, args):
    """The receiver's side of _mark_sent_tensors: torch's rebuild when this
    process's torch allocates through xdm, else a RuntimeError naming the fix.

    Before refusing, the receiver releases the reference torch's sender
    counted for it (its reference-counter file), as torch's own rebuild does
    for a storage it has already: the sender's free of the tensor then lets
    the memory go, rather than keeping it until the sender exits."""
    if installed():
        return rebuild(*args)
    try:
        import inspect
        import torch

        named = inspect.signature(rebuild).bind(*args).arguments
        torch.UntypedStorage._release_ipc_counter_cuda(
            named["ref_counter_handle"], named["ref_counter_offset"])
    except Exception as e:  # noqa: BLE001 - the refusal below is what matters
        _say("could not release the sender's reference to a refused CUDA tensor "
             "(%s: %s); the sender keeps its memory until it exits" % (type(e).__name__, e))
    raise RuntimeError(UNSWITCHED_RECEIVER)


def _too_late(why):
    return ("xdm.torch.use: %s, so torch cannot allocate through xdm in this process; "
            "call xdm.torch.use() before torch's first CUDA allocation" % why)


def installed():
    """True when torch allocates through xdm in this process."""
    return _state["allocator"] is not None


def hooks():
    """Whether torch's record_stream, empty_cache and memory fraction reach
    xdm: True once ``use`` installed xdm (the glue implements torch's whole
    allocator interface), None before."""
    return None if _state["hooks"] is None else True


def free_failures():
    """How many of torch's frees xdm refused (the first is told on stderr)."""
    glue = _state["glue"]
    return 0 if glue is None else glue.xdm_torch_free_failures()


def empty_cache():
    """Give back what the runtimes torch allocated on hold for reuse (the
    pools' idle chunks); what ``torch.cuda.empty_cache()`` does with the
    hooks.  Nothing before ``use``."""
    glue = _state["glue"]
    if glue is not None:
        glue.xdm_torch_empty_cache()


def _device(device):
    """An ordinal from None (torch's current device), an int, "cuda:N" or a
    torch.device."""
    if device is None:
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_initialized():
            return torch.cuda.current_device()
        return 0
    if isinstance(device, str):
        name, _, index = device.partition(":")
        if name != "cuda" or (index and not index.isdigit()):
            raise InvalidArgument("xdm.torch: %r is not a CUDA device" % device)
        return int(index) if index else _device(None)
    index = getattr(device, "index", device)
    if getattr(device, "type", "cuda") != "cuda":
        raise InvalidArgument("xdm.torch: %r is not a CUDA device" % (device,))
    return _device(None) if index is None else _ordinal(index, "device")


def _budget_keys(ordinal):
    """xdm's own keys for torch's memory_stats: the budget's limit, use and
    what remains, where the device's stack has a budget."""
    rt = _runtime(ordinal)
    layers = rt.layers
    if "budget" not in layers:
        return {}
    layer = layers.index("budget")
    keys = {}
    for attr in ("limit", "used", "remaining"):
        keys["xdm.budget.%s_bytes" % attr] = int(rt.layer_attr(layer, attr).split()[0])
    return keys


def _extend_memory_stats(torch):
    """torch.cuda.memory_stats (and memory_summary, which reads it) also
    carry the budget's keys (``xdm.budget.limit_bytes``, ``used_bytes``,
    ``remaining_bytes``)."""
    original = torch.cuda.memory.memory_stats
    if getattr(original, "_xdm_extended", False):
        return

    @functools.wraps(original)
    def memory_stats(device=None):
        stats = original(device)
        stats.update(_budget_keys(torch.cuda.memory._get_device_index(device,
                                                                      optional=True)))
        return stats

    memory_stats._xdm_extended = True
    torch.cuda.memory.memory_stats = memory_stats
    torch.cuda.memory_stats = memory_stats


def memory_stats(device=None):
    """torch.cuda.memory_stats of device, with xdm's budget keys: every
    figure is read from xdm's runtimes (xdm-torch(7) says which)."""
    import torch

    return torch.cuda.memory_stats(_device(device))


def memory_allocated(device=None):
    """Bytes of live blocks on device."""
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device=None):
    """The most bytes of live blocks at once (sampled: xdm-fs(7))."""
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device=None):
    """Bytes the device's runtimes hold from the memory below them."""
    return memory_stats(device)["reserved_bytes.all.current"]


def max_memory_reserved(device=None):
    """The most bytes they held at once."""
    return memory_stats(device)["reserved_bytes.all.peak"]
