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
        self._owner = owner
        if finalizer is not None:
            self._finalizer = weakref.finalize(self, finalizer)
    def free(self):
        self._finalizer()
    @property
    def owner(self):
        return self if self._owner is None else self._owner
    @property
    def device_pointer_value(self):
        p = self.device_pointer
        return int(getattr(p, "value", p) or 0) or None
    def own(self):
        return OwnedPointer(self)
    def view(self, start, stop=None):
        size = self.size - start if stop is None else stop - start
        view = MemoryPointer(self.context, self.device_pointer_value + start, size,
                             owner=self.owner)
        return OwnedPointer(self.owner, view)

class OwnedPointer:
    # Numba's: the view's attributes, keeping its owner alive.
    def __init__(self, memptr, view=None):
        self._mem, self._view = memptr, memptr if view is None else view
    def __getattr__(self, name):
        return getattr(self._view, name)

class IpcHandle:
    def __init__(self, base, handle, size, source_info=None, offset=0):
        self.base, self.handle, self.size = base, handle, size
        self.source_info, self.offset, self._impl = source_info, offset, None

managers = []
def set_memory_manager(cls):
    if cls(context=None).interface_version != 1:
        raise RuntimeError("EMM interface version")
    managers.append(cls)

cuda.BaseCUDAMemoryManager = BaseCUDAMemoryManager
cuda.HostOnlyCUDAMemoryManager = HostOnlyCUDAMemoryManager
cuda.GetIpcHandleMixin = GetIpcHandleMixin
cuda.MemoryPointer = MemoryPointer
cuda.IpcHandle = IpcHandle
cuda.MemoryInfo = collections.namedtuple("MemoryInfo", "free,total")
cuda.set_memory_manager = set_memory_manager
"""

NUMBA_TEST = r"""
import gc, importlib, types
import xdm
# What numba does with NUMBA_CUDA_MEMORY_MANAGER=xdm.numba:
cls = importlib.import_module("xdm.numba")._numba_memory_manager
assert issubclass(cls, cuda.HostOnlyCUDAMemoryManager)
# IPC handles are xdm's own, not the driver's (Numba's mixin).
assert not issubclass(cls, cuda.GetIpcHandleMixin)
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


NUMBA_IPC_TEST = r"""
import ctypes, pickle, subprocess, sys, types
import xdm, xdm.numba
cls = xdm.numba.manager_class()
device = types.SimpleNamespace(id=0, get_device_identity=lambda: {"bus": 0})
mm = cls(context=types.SimpleNamespace(device=device))
mm.initialize()
mp = mm.memalloc(65536)
base = mp.device_pointer.value
ctypes.memset(base, 0x11, 65536)
view = mp.view(4096, 4096 + 8192)
h = mm.get_ipc_handle(view)
print("handle", type(h).__name__, len(h.handle), h.offset, h.size)
try:
    h.open(mm.context)
except ValueError as e:
    print("own", e)
out = subprocess.run([sys.executable, "-c", CHILD, pickle.dumps(h).hex()],
                     capture_output=True, text=True, timeout=120)
sys.stdout.write(out.stdout)
sys.stderr.write(out.stderr)
data = ctypes.string_at(base, 65536)
print("after", sorted(set(data[:4096])), sorted(set(data[4096:4096 + 8192])),
      sorted(set(data[4096 + 8192:])))
"""

NUMBA_IPC_CHILD = r"""
import ctypes, pickle, sys, types
h = pickle.loads(bytes.fromhex(sys.argv[1]))
ctx = types.SimpleNamespace(device=types.SimpleNamespace(id=0))
mem = h.open(ctx)
ptr = mem.device_pointer_value
seen = set(ctypes.string_at(ptr, mem.size))
ctypes.memset(ptr, 0x22, mem.size)
try:
    h.open(ctx)
except ValueError as e:
    print("twice", e)
h.close()
print("child", type(h).__name__, mem.size, sorted(seen))
"""


def test_numba_ipc_handle_is_xdms(tmp_path, key):
    """A Numba array view's get_ipc_handle() carries xdm's handle of its
    block and the view's offset; pickled to another process, it opens there
    through xdm.ipc (host memory that can be shared stands in for the GPU's),
    sees the sender's bytes and writes into the view alone."""
    conf = tmp_path / "numba-ipc.conf"
    conf.write_text("platform = host\n[device 0]\nstack = pool | host ipc=true\n")
    child = NUMBA_STUB + NUMBA_IPC_CHILD
    out = run_python(NUMBA_STUB + NUMBA_IPC_TEST.replace("CHILD,", repr(child) + ","),
                     env={"XDM_CONFIG": str(conf)})
    assert out.splitlines() == [
        "handle XdmIpcHandle 256 4096 8192",
        "own opening IpcHandle from original process",
        "twice IpcHandle is already opened",
        "child XdmIpcHandle 8192 [17]",
        "after [17] [34] [17]",
    ], out


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


TORCH_REDUCTION_TEST = r"""
import sys, types
from multiprocessing.reduction import ForkingPickler

# Only what xdm.torch's reduction touches: torch.Tensor, Parameter, the
# reductions module with torch's reduce and rebuild, and the storage's
# release of a reference counter.
torch = types.ModuleType("torch")
torch.Tensor = type("Tensor", (), {})
nn = types.ModuleType("torch.nn"); param = types.ModuleType("torch.nn.parameter")
param.Parameter = type("Parameter", (torch.Tensor,), {})
torch.nn, nn.parameter = nn, param
mp = types.ModuleType("torch.multiprocessing")
red = types.ModuleType("torch.multiprocessing.reductions")
released = []
class UntypedStorage:
    @staticmethod
    def _release_ipc_counter_cuda(handle, offset):
        released.append((handle, offset))
torch.UntypedStorage = UntypedStorage
def rebuild_cuda_tensor(tensor_cls, tensor_size, tensor_stride, tensor_offset,
                        storage_cls, dtype, storage_device, storage_handle,
                        storage_size_bytes, storage_offset_bytes, requires_grad,
                        ref_counter_handle, ref_counter_offset, event_handle,
                        event_sync_required):
    return ("rebuilt", storage_handle)
def rebuild_tensor(*args):
    return ("cpu", args)
def reduce_tensor(t):
    if getattr(t, "is_cuda", False):
        return rebuild_cuda_tensor, (type(t), (4,), (1,), 0, None, "f32", 0,
                                     b"xdm-handle", 16, 0, False, b"counter", 8,
                                     b"event", True)
    return rebuild_tensor, (1, 2)
red.rebuild_cuda_tensor, red.reduce_tensor = rebuild_cuda_tensor, reduce_tensor
torch.multiprocessing, mp.reductions = mp, red
sys.modules.update({"torch": torch, "torch.nn": nn, "torch.nn.parameter": param,
                    "torch.multiprocessing": mp,
                    "torch.multiprocessing.reductions": red})

import xdm.torch
xdm.torch._mark_sent_tensors(torch)
reducer = ForkingPickler._extra_reducers[torch.Tensor]
cuda = torch.Tensor(); cuda.is_cuda = True
fn, args = reducer(cuda)
print("cuda", fn is xdm.torch._rebuild_cuda_tensor, args[0] is rebuild_cuda_tensor)
print("cpu", reducer(torch.Tensor()) == (rebuild_tensor, (1, 2)))
print("param", ForkingPickler._extra_reducers[param.Parameter] is reducer)
try:
    fn(*args)
except RuntimeError as e:
    print("refused", "xdm.torch.use()" in str(e), released)
xdm.torch._state["allocator"] = True      # as use() leaves it
print("switched", fn(*args), released)
"""


def test_torch_tensor_to_a_process_that_did_not_switch(tmp_path):
    """CUDA tensors a process under xdm.torch sends are rebuilt by xdm's
    function: in a receiver whose torch allocates through xdm it is torch's
    rebuild; in one that does not, a RuntimeError naming xdm.torch.use(),
    after releasing the reference torch's sender counted for it.  CPU
    tensors keep torch's own reduction.  (torch is a stand-in here; the GPU
    test sends a real tensor to a real child.)"""
    out = run_python(TORCH_REDUCTION_TEST)
    assert out.splitlines() == [
        "cuda True True",
        "cpu True",
        "param True",
        "refused True [(b'counter', 8)]",
        "switched ('rebuilt', b'xdm-handle') [(b'counter', 8)]",
    ], out
