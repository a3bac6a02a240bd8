"""xdm.rmm on the host platform, against a stand-in for the part of RMM's
Python API it calls (the GPU machine has no RMM package; the C++ side is
tested there with RMM's own headers): rmm.mr.CallbackMemoryResource(
allocate_func, deallocate_func) with allocate_func(size, stream) -> ptr
and deallocate_func(ptr, size, stream), rmm.mr.get_per_device_resource and
rmm.mr.set_per_device_resource, and streams that speak the
__cuda_stream__ protocol ((version, handle))."""

import sys
import types

import pytest

import xdm
import xdm.rmm

from conftest import run_python


class FakeStream:
    def __init__(self, handle):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


def fake_rmm():
    state = types.SimpleNamespace(per_device={0: "rmm's own"})

    class CallbackMemoryResource:
        def __init__(self, allocate_func, deallocate_func):
            self.allocate, self.deallocate = allocate_func, deallocate_func

    def get_per_device_resource(device):
        return state.per_device.get(device)

    def set_per_device_resource(device, mr):
        state.per_device[device] = mr

    rmm = types.ModuleType("rmm")
    rmm.__path__ = []
    mr = types.ModuleType("rmm.mr")
    mr.CallbackMemoryResource = CallbackMemoryResource
    mr.get_per_device_resource = get_per_device_resource
    mr.set_per_device_resource = set_per_device_resource
    rmm.mr = mr
    rmm.state = state
    return rmm


@pytest.fixture
def rmm(monkeypatch):
    mod = fake_rmm()
    monkeypatch.setitem(sys.modules, "rmm", mod)
    monkeypatch.setitem(sys.modules, "rmm.mr", mod.mr)
    return mod


def test_import_imports_no_rmm_and_says_why_when_missing():
    out = run_python(
        "import sys, xdm.rmm\n"
        "print('rmm' in sys.modules, xdm.rmm.available())\n"
        "print(xdm.rmm.why_unavailable())\n")
    first, why = out.splitlines()[:2]
    assert first == "False False"       # no RMM on the CPU machine
    assert "rmm" in why and "not importable" in why


def test_use_sets_the_device_resource_and_restore_puts_it_back(rmm, budget_rt):
    mr = xdm.rmm.use(runtime=budget_rt)
    assert rmm.state.per_device[0] is mr
    assert isinstance(mr, rmm.mr.CallbackMemoryResource)
    xdm.rmm.restore()
    assert rmm.state.per_device[0] == "rmm's own"


def test_allocations_are_blocks_of_the_runtime_on_rmms_stream(rmm, budget_rt):
    mr = xdm.rmm.use(runtime=budget_rt)
    default = mr.allocate(4096, FakeStream(0))
    with xdm.tag("cudf-column"):
        tagged = mr.allocate(8192, None)
    assert budget_rt.lookup(default).bytes == 4096
    blk = budget_rt.lookup(tagged)
    assert blk.bytes == 8192 and blk.tag == "cudf-column"
    # Handle 0 and None are both the legacy default stream.
    assert budget_rt.lookup(default).stream == blk.stream == budget_rt.stream_id(None)
    assert budget_rt.stats().blocks_outstanding == 2
    mr.deallocate(default, 4096, FakeStream(0))
    mr.deallocate(tagged, 8192, None)
    assert budget_rt.stats().blocks_outstanding == 0
    xdm.rmm.restore()


def test_a_refusal_is_memory_error_and_out_of_budget(rmm, budget_rt):
    mr = xdm.rmm.use(runtime=budget_rt)
    with pytest.raises(MemoryError) as info:
        mr.allocate(4 << 20, None)          # the budget is 1 MiB
    assert isinstance(info.value, xdm.OutOfBudget)
    assert info.value.requested >= 4 << 20
    assert info.value.remaining <= 1 << 20
    assert budget_rt.stats().blocks_outstanding == 0
    xdm.rmm.restore()


def test_resource_refuses_what_is_not_a_runtime(rmm):
    with pytest.raises(TypeError):
        xdm.rmm.resource(runtime="not a runtime")
