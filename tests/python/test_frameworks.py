"""xdm.cupy and xdm.numba on the host platform, against stand-ins for the
parts of CuPy's and Numba's APIs they call (the GPU tests run the real
frameworks).  The stand-ins follow the documented signatures:
cupy.cuda.UnownedMemory(ptr, size, owner, device_id),
cupy.cuda.MemoryPointer(mem, offset), cupy.cuda.set_allocator(fn), and
Numba's EMM interface (BaseCUDAMemoryManager(context=...),
MemoryPointer(context, pointer, size, owner=None, finalizer=None),
set_memory_manager instantiating the class with context=None)."""

import gc
import sys
import types

import pytest

import xdm
import xdm.cupy

from conftest import run_python


class FakeCupyOOM(MemoryError):
    def __init__(self, size, total, limit=0):
        super().__init__("Out of memory allocating %d bytes" % size)


def fake_cupy():
    state = types.SimpleNamespace(allocator=None, device=0, stream=0)

    class UnownedMemory:
        def __init__(self, ptr, size, owner, device_id=-1):
            self.ptr, self.size, self.owner, self.device_id = ptr, size, owner, device_id

    class MemoryPointer:
        def __init__(self, mem, offset):
            self.mem, self.ptr = mem, mem.ptr + offset

    def set_allocator(fn):
        state.allocator = fn

    def default_malloc(size):
        raise AssertionError("CuPy's default pool was asked")

    cupy = types.ModuleType("cupy")
    cupy.cuda = types.SimpleNamespace(
        UnownedMemory=UnownedMemory, MemoryPointer=MemoryPointer,
        set_allocator=set_allocator,
        Device=lambda: types.SimpleNamespace(id=state.device),
        get_current_stream=lambda: types.SimpleNamespace(ptr=state.stream),
        memory=types.SimpleNamespace(OutOfMemoryError=FakeCupyOOM))
    cupy.get_default_memory_pool = lambda: types.SimpleNamespace(malloc=default_malloc)
    cupy.state = state
    cupy.default_malloc = default_malloc
    return cupy


@pytest.fixture
def cupy(monkeypatch):
    mod = fake_cupy()
    monkeypatch.setitem(sys.modules, "cupy", mod)
    return mod


@pytest.fixture
def unraisable(monkeypatch):
    """Exceptions raised in finalizers, which Python only reports."""
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u.exc_value))
    return seen


def test_cupy_allocates_and_frees_through_xdm(cupy, budget_rt, unraisable):
    xdm.cupy.use(runtime=budget_rt)
    malloc = cupy.state.allocator
    with xdm.tag("cupy-array"):
        mp = malloc(4096)
    blk = budget_rt.lookup(mp.ptr)
    assert blk.bytes == 4096 and blk.tag == "cupy-array"
    assert mp.mem.size == 4096 and mp.mem.device_id == 0
    assert blk.stream == budget_rt.stream_id(cupy.state.stream)
    assert int(budget_rt.layer_attr(0, "used")) == 4096
    del mp, blk
    gc.collect()
    s = budget_rt.stats()
    assert (s.allocs, s.frees) == (1, 1) and unraisable == []


def test_cupy_refusal_is_cupys_oom_and_xdms(cupy, budget_rt):
    xdm.cupy.use(runtime=budget_rt)
    with pytest.raises(FakeCupyOOM) as e:
        cupy.state.allocator(2 << 20)
    err = e.value
    assert isinstance(err, xdm.OutOfBudget)
    assert (err.requested, err.remaining) == (2 << 20, 1 << 20)
    assert str(err).startswith("budget: %d bytes requested" % (2 << 20))


def test_cupy_zero_bytes(cupy, budget_rt):
    xdm.cupy.use(runtime=budget_rt)
    mp = cupy.state.allocator(0)
    assert mp.ptr == 0 and mp.mem.owner is None
    assert budget_rt.stats().allocs == 0


def test_cupy_device_must_match_a_pinned_runtime(cupy, budget_rt):
    xdm.cupy.use(runtime=budget_rt)
    cupy.state.device = 1
    with pytest.raises(xdm.InvalidArgument) as e:
        cupy.state.allocator(64)
    assert "current device is 1" in str(e.value)
    with pytest.raises(xdm.InvalidArgument):
        xdm.cupy.use(ordinal=3, runtime=budget_rt)
    with pytest.raises(TypeError):
        xdm.cupy.use(runtime="rt")


def test_cupy_follows_the_current_device(cupy):
    xdm.cupy.use()
    rt = xdm.runtime(0)
    before = rt.stats().allocs
    mp = cupy.state.allocator(256)
    assert rt.lookup(mp.ptr).bytes >= 256
    assert rt.stats().allocs == before + 1
    del mp
    gc.collect()


def test_cupy_memory_outliving_its_runtime(cupy, make_runtime, unraisable):
    rt = make_runtime("host")
    xdm.cupy.use(runtime=rt)
    mp = cupy.state.allocator(512)
    rt.close()          # frees the block itself
    del mp
    gc.collect()
    assert unraisable == []


def test_cupy_restore(cupy, budget_rt):
    xdm.cupy.use(runtime=budget_rt)
    xdm.cupy.restore()
    assert cupy.state.allocator is cupy.default_malloc


NUMBA_STUB = r"""
import collections, sys, types, weakref
numba = types.ModuleType("numba")
cuda = types.ModuleType("numba.cuda")
core = types.ModuleType("numba.core")
config = types.ModuleType("numba.core.config")
config.CUDA_PER_THREAD_DEFAULT_STREAM = 0
numba.cuda, numba.core, core.config = cuda, core, config
sys.modules.update({"numba": numba, "numba.cuda": cuda, "numba.core": core,
                    "numba.core.config": config})

class BaseCUDAMemoryManager:
    def __init__(self, *args, **kwargs):
        if "context" not in kwargs:
            raise RuntimeError("Memory manager requires a context")
        self.context = kwargs.pop("context")

class HostOnlyCUDAMemoryManager(BaseCUDAMemoryManager):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.host_resets = 0
    def reset(self):
        self.host_resets += 1

class GetIpcHandleMixin:
    def get_ipc_handle(self, memory):
        raise NotImplementedError

class MemoryPointer:
    def __init__(self, context, pointer, size, owner=None, finalizer=None):
        self.context, self.device_pointer, self.size = context, pointer, size
        if finalizer is not None:
            self._finalizer = weakref.finalize(self, finalizer)
    def free(self):
        self._finalizer()

managers = []
def set_memory_manager(cls):
    if cls(context=None).interface_version != 1:
        raise RuntimeError("EMM interface version")
    managers.append(cls)

cuda.BaseCUDAMemoryManager = BaseCUDAMemoryManager
cuda.HostOnlyCUDAMemoryManager = HostOnlyCUDAMemoryManager
cuda.GetIpcHandleMixin = GetIpcHandleMixin
cuda.MemoryPointer = MemoryPointer
cuda.MemoryInfo = collections.namedtuple("MemoryInfo", "free,total")
cuda.set_memory_manager = set_memory_manager
"""

NUMBA_TEST = r"""
import gc, importlib, types
import xdm
# What numba does with NUMBA_CUDA_MEMORY_MANAGER=xdm.numba:
cls = importlib.import_module("xdm.numba")._numba_memory_manager
assert issubclass(cls, cuda.HostOnlyCUDAMemoryManager)
assert issubclass(cls, cuda.GetIpcHandleMixin)
mm = cls(context=types.SimpleNamespace(device=types.SimpleNamespace(id=0)))
mm.initialize()
rt = xdm.runtime(0)
with xdm.tag("numba-array"):
    mp = mm.memalloc(4096)
ptr = mp.device_pointer.value
blk = rt.lookup(ptr)
print("alloc", blk.bytes, blk.tag, blk.stream == rt.stream_id(0))
info = mm.get_memory_info()
print("info", info.total == rt.device().total_bytes, info.free == (1 << 20) - 4096)
try:
    mm.memalloc(2 << 20)
except xdm.OutOfBudget as e:
    print("refused", e.requested, e.remaining)
mp.free()
print("freed", rt.stats().frees)
mp = mm.memalloc(100)
del mp
gc.collect()
print("collected", rt.stats().frees, rt.stats().blocks_outstanding)
mm.reset()
print("reset", mm.host_resets, mm.interface_version)
import xdm.numba
xdm.numba.use()
print("use", managers == [cls], xdm.numba._per_thread_default_stream())
config.CUDA_PER_THREAD_DEFAULT_STREAM = 1
print("ptds", xdm.numba._per_thread_default_stream())
"""


def test_numba_plugin(tmp_path, key):
    conf = tmp_path / "numba.conf"
    # credit=0: free is the limit less the block, to the byte.
    conf.write_text("platform = host\n[device 0]\n"
                    "stack = budget key=%s limit=1M credit=0 | pool | host\n" % key)
    out = run_python(NUMBA_STUB + NUMBA_TEST, env={"XDM_CONFIG": str(conf)})
    assert out.splitlines() == [
        "alloc 4096 numba-array True",
        "info True True",
        "refused %d %d" % (2 << 20, (1 << 20) - 4096),
        "freed 1",
        "collected 2 0",
        "reset 1 1",
        "use True False",
        "ptds True",
    ]
