# SPDX-License-Identifier: MIT
"""cupy_probe.py - which CuPy (and Numba) feature hangs or kills a process
under xdm.cupy.use(): each in a process of its own, with a deadline and a
faulthandler dump before it, printing one line as each ends (a probe run by
hand on the GPU machine, not a test; its cases become tests once each
passes).  The arguments are stacks; each gets a config of its own.

    ./xdm-uninstalled python3 tests/gpu/probes/cupy_probe.py "pool | cuda_vmm" cupy

(the stack "cupy" is the control: the same cases on CuPy's own pool)
"""
import concurrent.futures, os, subprocess, sys, time

CASES = {
    "arrays": "x = cp.arange(1 << 20, dtype=cp.float32); assert float((x * 2).sum()) == float(x.sum() * 2)",
    "fft": "a = cp.random.random(1 << 16).astype(cp.complex64); b = cp.fft.ifft(cp.fft.fft(a)); assert cp.allclose(a, b, atol=1e-3)",
    "cublas": "m = cp.random.random((512, 512), dtype=cp.float32); r = m @ m; cp.cuda.Device().synchronize(); assert r.shape == (512, 512)",
    "nonblocking_stream": "s = cp.cuda.Stream(non_blocking=True)\nwith s:\n    y = cp.ones(1 << 20); z = y + 1\ns.synchronize(); assert float(z[0]) == 2.0",
    "stream_null": "with cp.cuda.Stream.null:\n    y = cp.ones(1 << 20) * 3\ncp.cuda.Stream.null.synchronize(); assert float(y[5]) == 3.0",
    "stream_ptds": "with cp.cuda.Stream.ptds:\n    y = cp.ones(1 << 20) * 4\ncp.cuda.Stream.ptds.synchronize(); assert float(y[5]) == 4.0",
    "oom_10tib": "try:\n    cp.empty(10 << 40, dtype=cp.uint8)\n    raise SystemExit('no OOM')\nexcept cp.cuda.memory.OutOfMemoryError as e:\n    print('OOM ok:', type(e).__name__, str(e)[:200])",
    "ipc_handle": "x = cp.arange(1 << 20)\ntry:\n    h = cp.cuda.runtime.ipcGetMemHandle(x.data.ptr)\n    print('handle', len(h))\nexcept Exception as e:\n    print('ipcGetMemHandle raised', type(e).__name__, e)",
    "numba_ipc": "import xdm.numba\nfrom numba import cuda\nxdm.numba.use()\na = cuda.device_array(1 << 20)\ntry:\n    h = a.get_ipc_handle(); print('numba handle', type(h).__name__)\nexcept Exception as e:\n    print('get_ipc_handle raised', type(e).__name__, str(e)[:300])",
    "dlpack": "x = cp.arange(1000); cap = x.toDlpack(); y = cp.from_dlpack(cap); assert int(y[999]) == 999\nimport torch\nt = torch.from_dlpack(x); assert int(t[999]) == 999",
}

PRE = """
import sys, faulthandler; faulthandler.dump_traceback_later(%d, exit=True)
import cupy as cp, xdm.cupy
if %r:
    xdm.cupy.use()
print('used', flush=True)
"""

def run_case(stack, conf, use_xdm, name, body, deadline=30):
    code = PRE % (deadline - 5, use_xdm) + body + "\nprint('done')\n"
    env = dict(os.environ, XDM_CONFIG=conf)
    t0 = time.time()
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=deadline, env=env)
        out = (p.stdout + p.stderr).strip().replace("\n", " | ")
        return "%-22s %-18s rc=%s %.1fs %s" % (stack, name, p.returncode, time.time() - t0,
                                                out[-600:])
    except subprocess.TimeoutExpired:
        return "%-22s %-18s TIMEOUT %.1fs" % (stack, name, time.time() - t0)


# The cases of a stack run side by side (a hang costs one deadline, not ten);
# the stacks one after the other.
for i, stack in enumerate(sys.argv[1:] or ["pool | cuda_vmm"]):
    # "cupy" is the control: CuPy's own pool, the same cases.
    use_xdm = stack != "cupy"
    conf = "/tmp/cupy-probe-%d.conf" % i
    with open(conf, "w") as f:
        f.write("platform = cuda\n[device *]\nstack = %s\n" % stack)
    with concurrent.futures.ThreadPoolExecutor(len(CASES)) as pool:
        runs = [pool.submit(run_case, stack, conf, use_xdm, name, body)
                for name, body in CASES.items()]
        for run in runs:
            print(run.result(), flush=True)
