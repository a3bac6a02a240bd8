"""xdm.ipc on the host platform's memfd twin: a handle made here is opened
by another Python process, the bytes go both ways, a held block's free
waits for the importer (its close or its death), and bad handles raise."""

import ctypes
import subprocess
import sys
import time

import pytest

import xdm

from conftest import run_python

# free=sync: a free that is not held back is done when free() returns, so
# bytes_outstanding says at once whether the block went back.
STACK = "host ipc=true free=sync"

IMPORTER = (
    "import ctypes, sys, xdm\n"
    "rt = xdm.Runtime.create(0, stack=%r, platform='host')\n"
    "shared = xdm.ipc.open(bytes.fromhex(sys.argv[1]), runtime=rt)\n"
    "print(shared.nbytes, flush=True)\n"
) % STACK


def wait_outstanding(rt, want):
    """A hold goes back on the exporter's server thread: wait for it (the
    deadline only turns a hang into a failure)."""
    deadline = time.monotonic() + 120
    while rt.bytes_outstanding != want and time.monotonic() < deadline:
        time.sleep(0.01)
    assert rt.bytes_outstanding == want


def importer(handle, then):
    """A Python process that opens handle, says its size, then runs then."""
    return subprocess.Popen([sys.executable, "-c", IMPORTER + then, handle.hex()],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def test_bytes_travel_both_ways(make_runtime):
    rt = make_runtime(STACK)
    n = 10000
    ptr = rt.allocate(n)
    ctypes.memset(ptr, 0x11, n)
    handle = xdm.ipc.export(ptr, runtime=rt)
    assert isinstance(handle, bytes) and len(handle) == xdm.ipc.HANDLE_SIZE
    assert xdm.ipc.export(ptr, runtime=rt) == handle
    # The handle travels as hex in the child's program text.
    out = run_python(IMPORTER.replace("sys.argv[1]", repr(handle.hex())) + (
        "assert ctypes.string_at(shared.ptr, shared.nbytes) == b'\\x11' * shared.nbytes\n"
        "ctypes.memset(shared.ptr, 0x22, shared.nbytes)\n"
        "with shared:\n"
        "    pass\n"
        "print(shared.closed)\n"))
    assert out.split() == [str(n), "True"]
    assert ctypes.string_at(ptr, n) == b"\x22" * n
    rt.free(ptr)
    wait_outstanding(rt, 0)


@pytest.mark.parametrize("how", ["close", "kill"])
def test_free_waits_for_the_importer(make_runtime, how):
    rt = make_runtime(STACK)
    n = 4096
    ptr = rt.allocate(n)
    child = importer(xdm.ipc.export(ptr, runtime=rt), "sys.stdin.readline()\nshared.close()\n")
    try:
        assert child.stdout.readline().strip() == str(n)
        rt.free(ptr)
        # Freed by its owner, held by the importer: still there.
        assert rt.bytes_outstanding == n
        if how == "close":
            child.stdin.write("go\n")
            child.stdin.flush()
            assert child.wait(timeout=300) == 0
        else:
            child.kill()
            child.wait(timeout=300)
        wait_outstanding(rt, 0)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_bad_handles_raise_and_map_nothing(make_runtime):
    rt = make_runtime(STACK)
    ptr = rt.allocate(4096)
    handle = xdm.ipc.export(ptr, runtime=rt)
    with pytest.raises(xdm.InvalidArgument, match="mark"):
        xdm.ipc.open(b"x" * xdm.ipc.HANDLE_SIZE, runtime=rt)
    with pytest.raises(xdm.InvalidArgument, match="256 bytes"):
        xdm.ipc.open(handle[:100], runtime=rt)
    damaged = bytearray(handle)
    damaged[40] ^= 1
    with pytest.raises(xdm.InvalidArgument, match="checksum"):
        xdm.ipc.open(damaged, runtime=rt)
    with pytest.raises(TypeError):
        xdm.ipc.open(handle.hex(), runtime=rt)
    # Inside a block, not at its start.
    with pytest.raises(xdm.InvalidArgument):
        xdm.ipc.export(ptr + 8, runtime=rt)
    rt.free(ptr)
    # Freed and never opened: the exporter refuses it.
    with pytest.raises(xdm.UseAfterFree, match="freed since"):
        xdm.ipc.open(handle, runtime=rt)
    assert xdm.tree.show(rt.tree_path + "/imports") == "none\n"


def test_a_private_stack_says_how_to_share(make_runtime):
    rt = make_runtime("host")
    ptr = rt.allocate(4096)
    with pytest.raises(xdm.NotSupported, match="ipc=true"):
        xdm.ipc.export(ptr, runtime=rt)
    rt.free(ptr)


def test_a_closed_block_closes_once(make_runtime):
    rt = make_runtime(STACK)
    ptr = rt.allocate(4096)
    # Opened by the exporting process itself: one more importer.
    shared = xdm.ipc.open(xdm.ipc.export(ptr, runtime=rt), runtime=rt)
    assert shared.nbytes == 4096 and shared.ptr != ptr
    ctypes.memset(ptr, 0x5a, 4096)
    assert ctypes.string_at(shared.ptr, 4096) == b"\x5a" * 4096
    shared.close()
    with pytest.raises(xdm.InvalidArgument, match="closed already"):
        shared.close()
    rt.free(ptr)
    wait_outstanding(rt, 0)
