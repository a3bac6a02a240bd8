"""Unmodified programs under xdm-run (libxdm-preload.so) on a GPU: a plain
CUDA program, torch with its own caching allocator, CuPy's default pool and
JAX, each held to the device's budget and refused with its own
out-of-memory error; two programs held to one budget; xdmctl showing them;
and torch with xdm's one-line switch under the shim, charged once.

Every test has a budget directory of its own (XDM_BUDGET_DIR), so its
segment is the device's, by UUID, as in production, without meeting
another test's.
"""

import json
import os
import shutil
import subprocess
import tempfile

import pytest

from conftest import Child, run

MIB = 1 << 20
TOP = os.environ.get("XDM_TOP_BUILDDIR", ".")
SRC = os.environ.get("XDM_TOP_SRCDIR", ".")
XDM_RUN = os.path.join(TOP, "tools", "xdm-run", "xdm-run")
XDMCTL = os.path.join(TOP, "tools", "xdmctl", "xdmctl")
SHIM = os.path.join(TOP, "preload", ".libs", "libxdm-preload.so")


@pytest.fixture
def budget_dir():
    d = tempfile.mkdtemp(prefix="xdm-preload-gpu-")
    old = os.environ.get("XDM_BUDGET_DIR")
    os.environ["XDM_BUDGET_DIR"] = d
    os.environ["XDM_PRELOAD_LIBRARY"] = SHIM
    yield d
    if old is None:
        del os.environ["XDM_BUDGET_DIR"]
    else:
        os.environ["XDM_BUDGET_DIR"] = old
    shutil.rmtree(d, ignore_errors=True)


def xdm_run(limit, *more):
    return [XDM_RUN, "--limit", limit] + list(more) + ["--"]


def budgets(d):
    """The budgets of directory d, as xdmctl --json ps shows them."""
    out = subprocess.run([XDMCTL, "--json", "--dir", d, "ps"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)["budgets"]


def held_by(d, pid):
    """(bytes, via) of process pid in d's one budget."""
    [b] = budgets(d)
    [p] = [p for p in b["processes"] if p["pid"] == pid]
    return p["bytes"], p["via"]


def assert_given_back(d):
    """After the programs exit, nothing is held: the segment is gone."""
    assert budgets(d) == [] or all(b["used"] == 0 for b in budgets(d)), budgets(d)


@pytest.fixture(scope="module")
def rt_user(tmp_path_factory):
    """tests/gpu/preload_rt_user.c, built by nvcc."""
    nvcc = os.environ.get("NVCC") or shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not os.path.exists(nvcc) and not shutil.which(nvcc):
        pytest.skip("no nvcc to build the plain CUDA program")
    exe = str(tmp_path_factory.mktemp("rt") / "preload_rt_user")
    subprocess.run([nvcc, "-o", exe, os.path.join(SRC, "tests/gpu/preload_rt_user.c"),
                    "-lcuda"], check=True)
    return exe


# ---- a plain CUDA program -------------------------------------------------

@pytest.mark.parametrize("kind,error", [("malloc", "cudaErrorMemoryAllocation"),
                                        ("async", "cudaErrorMemoryAllocation"),
                                        ("create", "CUDA_ERROR_OUT_OF_MEMORY")])
def test_c_program_refused_at_the_limit(budget_dir, rt_user, kind, error):
    out = subprocess.run(xdm_run("256M") + [rt_user, "fill", kind, "16"], check=True,
                         capture_output=True, text=True)
    words = out.stdout.split("\n")[0].split()
    assert words[:2] == ["filled", kind] and words[3] == error, (out.stdout, out.stderr)
    # 16 blocks of 16M fill 256M exactly, less what the runtime took itself.
    assert 14 <= int(words[2]) <= 16, out.stdout
    assert "xdm-preload: " in out.stderr and "requested" in out.stderr, out.stderr
    assert_given_back(budget_dir)


def test_c_program_sees_the_budget_as_its_memory(budget_dir, rt_user):
    out = subprocess.run(xdm_run("256M") + [rt_user, "info"], check=True,
                         capture_output=True, text=True).stdout.split()
    assert out[:2] == ["info", "cudaSuccess"], out
    assert int(out[3]) == 256 * MIB and 0 < int(out[2]) <= 256 * MIB, out


def test_two_programs_one_budget(budget_dir, rt_user):
    holder = subprocess.Popen(xdm_run("256M") + [rt_user, "hold", "200"], text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline().split() == ["holding", "cudaSuccess"]
        held, via = held_by(budget_dir, holder.pid)
        assert via == "preload" and 200 * MIB <= held < 216 * MIB, (held, via)
        out = subprocess.run(xdm_run("256M") + [rt_user, "fill", "malloc", "16"],
                             check=True, capture_output=True, text=True).stdout.split()
        # What the holder leaves: at most 56M, three blocks of 16M.
        assert out[:2] == ["filled", "malloc"] and int(out[2]) <= 3, out
    finally:
        holder.communicate("\n", timeout=60)
    assert holder.returncode == 0
    assert_given_back(budget_dir)
    out = subprocess.run(xdm_run("256M") + [rt_user, "fill", "malloc", "16"], check=True,
                         capture_output=True, text=True).stdout.split()
    assert int(out[2]) >= 14, out


# ---- frameworks, unmodified -------------------------------------------------

TORCH_FILL = '''
import torch
free, total = torch.cuda.mem_get_info()
blocks = []
try:
    while True:
        blocks.append(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"))
except torch.cuda.OutOfMemoryError as e:
    oom = type(e).__name__
report("FILLED", blocks=len(blocks), oom=oom, total=total,
       reserved=torch.cuda.memory_reserved())
sys.stdin.readline()
'''


def test_torch_caching_allocator_refused(budget_dir):
    child = Child(TORCH_FILL, prefix=xdm_run("1G"))
    try:
        r = child.expect("FILLED")
        assert r["oom"] == "OutOfMemoryError" and r["total"] == 1024 * MIB, r
        # torch's context and kernels take some; 64M blocks fill the rest.
        assert 10 <= r["blocks"] <= 16, r
        held, via = held_by(budget_dir, child.proc.pid)
        assert via == "preload" and r["reserved"] <= held <= 1024 * MIB, (held, r)
        child.finish()
    finally:
        child.kill()
    assert "xdm-preload: " in child.stderr()
    assert_given_back(budget_dir)


CUPY_FILL = '''
import cupy
blocks = []
try:
    while True:
        blocks.append(cupy.empty(64 << 20, dtype=cupy.uint8))
except cupy.cuda.memory.OutOfMemoryError as e:
    oom = type(e).__name__
free, total = cupy.cuda.runtime.memGetInfo()
report("RESULT", blocks=len(blocks), oom=oom, total=total)
'''


def test_cupy_default_pool_refused(budget_dir):
    pytest.importorskip("cupy")
    r = run(CUPY_FILL, prefix=xdm_run("1G"))
    assert r["oom"] == "OutOfMemoryError" and r["total"] == 1024 * MIB, r
    assert 10 <= r["blocks"] <= 16, r
    assert_given_back(budget_dir)


JAX_FILL = '''
import jax, jax.numpy as jnp
blocks = []
error = None
try:
    while len(blocks) < 64:
        blocks.append(jnp.ones((16 << 20,), dtype=jnp.float32))
        blocks[-1].block_until_ready()
except Exception as e:
    error = str(e)
report("RESULT", blocks=len(blocks), error=(error or "")[:300],
       device=str(jax.devices()[0]))
'''


@pytest.mark.parametrize("preallocate", ["false", "true"])
def test_jax_refused(budget_dir, preallocate):
    pytest.importorskip("jax")
    env = {"XLA_PYTHON_CLIENT_PREALLOCATE": preallocate}
    r = run(JAX_FILL, env=env, prefix=xdm_run("1G"))
    assert "cuda" in r["device"].lower() or "gpu" in r["device"].lower(), r
    assert "RESOURCE_EXHAUSTED" in r["error"] or "out of memory" in r["error"].lower(), r
    # 64M arrays in a 1G budget: XLA's own allocator keeps some room.
    assert 4 <= r["blocks"] <= 16, r
    assert_given_back(budget_dir)


# ---- the one-line switch and the shim at once --------------------------------

TORCH_SWITCH = '''
import ctypes
import xdm.torch
xdm.torch.use(stack="budget | pool | cuda_async", ordinal=0)
import torch
x = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
# A driver allocation beside xdm, as a library under torch might make.
driver = ctypes.CDLL("libcuda.so.1")
ptr = ctypes.c_uint64()
rc = driver.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(32 << 20))
report("HELD", rc=rc, budget_used=int(xdm.tree.show("0/budget/used")))
sys.stdin.readline()
'''


def test_torch_switch_under_the_shim_charged_once(budget_dir):
    glue = os.environ.get("XDM_TORCH_LIBRARY")
    if not glue or not os.path.exists(glue):
        pytest.skip("the torch glue is not built")
    child = Child(TORCH_SWITCH, prefix=xdm_run("4G"))
    try:
        r = child.expect("HELD")
        assert r["rc"] == 0, r
        held, via = held_by(budget_dir, child.proc.pid)
        # The 256M block once, through xdm's budget layer (whose own driver
        # calls the shim lets pass), and the 32M beside xdm once, through
        # the shim: one slot, charged by both.
        assert via == "xdm+preload", via
        assert 288 * MIB <= held < 320 * MIB, (held, r)
        assert r["budget_used"] == held, (held, r)
        child.finish()
    finally:
        child.kill()
    # xdm's runtimes live until the process ends, so its budget layer does
    # not leave: the slot is a dead process's, given back by the next
    # process to attach.
    assert all(p["state"] == "dead" for b in budgets(budget_dir) for p in b["processes"])
    run("import torch\ntorch.cuda.mem_get_info()\nreport('RESULT')\n",
        prefix=xdm_run("4G"))
    assert_given_back(budget_dir)
