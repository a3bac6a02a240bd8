"""CuPy and Numba on xdm memory: a Numba kernel through the EMM plugin
(NUMBA_CUDA_MEMORY_MANAGER=xdm.numba), and a CuPy computation on two
streams whose blocks are each bound to the stream that allocated them.
Each in a python of its own, under a budget of its own; both frameworks
again in per-thread default stream mode, from several threads.
"""

import pytest

from conftest import run


def needs(module):
    """Skip when the GPU machine's python lacks a framework."""
    r = run('''
        import importlib.util
        report("RESULT", found=importlib.util.find_spec(%r) is not None)
    ''' % module)
    if not r["found"]:
        pytest.skip("python has no %s" % module)


def test_numba_kernel_on_xdm_memory(budget_key, config_file):
    needs("numba")
    stack = "budget key=%s limit=1G | pool | cuda_async" % budget_key
    r = run('''
        import numpy as np
        if not hasattr(np, "row_stack"):
            # numba-cuda 0.30 names np.row_stack, which numpy 2.4 removed;
            # nothing of xdm's is involved.
            np.row_stack = np.vstack
        from numba import cuda

        @cuda.jit
        def axpy(out, a, x, y):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = a * x[i] + y[i]

        n = 1 << 22
        with xdm.tag("numba"):
            x = cuda.to_device(np.arange(n, dtype=np.float32))
            y = cuda.to_device(np.ones(n, dtype=np.float32))
            out = cuda.device_array(n, dtype=np.float32)
        axpy[(n + 255) // 256, 256](out, 2.0, x, y)
        host = out.copy_to_host()
        rt = xdm.runtime(0)
        block = rt.lookup(out.device_ctypes_pointer.value)
        ok = bool(np.array_equal(host, 2.0 * np.arange(n, dtype=np.float32) + 1.0))
        manager = type(cuda.current_context().memory_manager).__module__
        report("RESULT", ok=ok, bytes=block.bytes, tag=block.tag, manager=manager,
               tags=tagged(), used=int(xdm.tree.show("0/budget/used")),
               allocs=rt.stats().allocs)
    ''', env={"NUMBA_CUDA_MEMORY_MANAGER": "xdm.numba", "XDM_CONFIG": config_file(stack)})
    assert r["manager"] == "xdm.numba", r
    assert r["ok"], "the kernel's result is wrong"
    assert r["bytes"] >= (1 << 22) * 4 and r["tag"] == "numba", r
    assert r["tags"].get("numba", 0) >= 3 * (1 << 22) * 4, r["tags"]
    assert r["used"] >= 3 * (1 << 22) * 4
    assert r["allocs"] >= 3


def test_cupy_on_two_streams(budget_key, config_file):
    needs("cupy")
    stack = "budget key=%s limit=1G | pool | cuda_async" % budget_key
    r = run('''
        import cupy, xdm.cupy
        xdm.cupy.use()
        n = 1 << 20     # every value below 2**24: exact in float32
        s1 = cupy.cuda.Stream(non_blocking=True)
        s2 = cupy.cuda.Stream(non_blocking=True)
        with s1:
            a = cupy.arange(n, dtype=cupy.float32)
            b = a * 2
        with s2:
            c = cupy.arange(n, dtype=cupy.float32) + 1
            d = c * 3
        s1.synchronize()
        s2.synchronize()
        e = b + d
        cupy.cuda.get_current_stream().synchronize()
        expect = cupy.arange(n, dtype=cupy.float32) * 5 + 3
        rt = xdm.runtime(0)
        streams = {"b": rt.lookup(b.data.ptr).stream, "d": rt.lookup(d.data.ptr).stream,
                   "s1": rt.stream_id(s1.ptr), "s2": rt.stream_id(s2.ptr)}
        report("RESULT", ok=bool(cupy.array_equal(e, expect)), streams=streams,
               allocs=rt.stats().allocs, used=int(xdm.tree.show("0/budget/used")))
    ''', env={"XDM_CONFIG": config_file(stack)})
    assert r["ok"], "the two-stream computation is wrong"
    s = r["streams"]
    # Each block lives on the stream that allocated it.
    assert s["b"] == s["s1"] and s["d"] == s["s2"] and s["s1"] != s["s2"], s
    assert r["allocs"] >= 6 and r["used"] >= 5 * (1 << 20) * 4


def test_cupy_per_thread_default_stream(budget_key, config_file):
    """CuPy's per-thread default stream mode (CUPY_CUDA_PER_THREAD_DEFAULT_STREAM,
    read when cupy is imported: hence its own python): threads allocate,
    compute and drop arrays on their own per-thread streams.  xdm serves
    them from the legacy stream, each free marking the freeing thread's
    work there, and the per-thread stream has no stream id of its own."""
    needs("cupy")
    stack = "budget key=%s limit=2G | pool | cuda_async" % budget_key
    r = run('''
        import numpy as np
        import cupy, xdm.cupy
        xdm.cupy.use()
        results, errors, streams = {}, [], set()

        def work(k):
            try:
                ok = True
                for i in range(25):
                    n = (1 << 18) + 4096 * k     # every value below 2**24
                    streams.add(cupy.cuda.get_current_stream().ptr)
                    a = cupy.arange(n, dtype=cupy.float32)
                    b = a * (k + 1) + i
                    c = cupy.empty_like(b)
                    c[...] = b               # a copy queued on the thread's stream
                    expect = np.arange(n, dtype=np.float32) * (k + 1) + i
                    ok = ok and bool(np.array_equal(cupy.asnumpy(c), expect))
                    del a, b, c          # freed on this thread's stream
                results[k] = ok
            except Exception as e:
                errors.append(repr(e))

        alive = run_threads(work, 4)
        rt = xdm.runtime(0)
        cupy.cuda.runtime.deviceSynchronize()
        rt.reap()
        st = rt.stats()
        try:
            rt.stream_id(2)
            refused = ""
        except xdm.StreamMisuse as e:
            refused = str(e)
        report("RESULT", ok=len(results) == 4 and all(results.values()), errors=errors,
               alive=alive, streams=sorted(streams), refused=refused,
               allocs=st.allocs, frees=st.frees,
               failures=st.failures)
    ''', env={"CUPY_CUDA_PER_THREAD_DEFAULT_STREAM": "1",
              "XDM_CONFIG": config_file(stack)})
    assert r["alive"] == 0, "a thread did not end: hung in a free or its exit?"
    assert not r["errors"], r["errors"]
    assert r["streams"] == [2], "CuPy did not run on its per-thread stream: %r" % r
    assert r["ok"], "a computation on a per-thread stream is wrong"
    assert "no id of its own" in r["refused"], r
    assert r["allocs"] >= 4 * 25 * 3 and r["failures"] == 0, r
    assert r["frees"] >= 4 * 25 * 3, r


def test_numba_per_thread_default_stream(budget_key, config_file):
    """Numba's per-thread default stream mode (NUMBA_CUDA_PER_THREAD_DEFAULT_STREAM):
    the EMM plugin allocates on handle 2, and kernels from several threads
    compute right."""
    needs("numba")
    stack = "budget key=%s limit=2G | pool | cuda_async" % budget_key
    r = run('''
        import numpy as np
        if not hasattr(np, "row_stack"):
            np.row_stack = np.vstack     # numba-cuda 0.30 against numpy 2.4
        from numba import cuda
        import xdm.numba

        @cuda.jit
        def axpy(out, a, x, y):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = a * x[i] + y[i]

        results, errors = {}, []

        def work(k):
            try:
                ok = True
                for i in range(10):
                    n = (1 << 18) + 1024 * k
                    x = cuda.to_device(np.arange(n, dtype=np.float32))
                    y = cuda.to_device(np.full(n, i, dtype=np.float32))
                    out = cuda.device_array(n, dtype=np.float32)
                    axpy[(n + 255) // 256, 256](out, float(k + 1), x, y)
                    expect = np.arange(n, dtype=np.float32) * (k + 1) + i
                    ok = ok and bool(np.array_equal(out.copy_to_host(), expect))
                    del x, y, out
                results[k] = ok
            except Exception as e:
                errors.append(repr(e))

        # Numba's driver is set up lazily and not safely from several
        # threads at once: the main thread makes its context first.
        cuda.current_context()
        alive = run_threads(work, 4)
        cuda.current_context().deallocations.clear()
        cuda.synchronize()
        rt = xdm.runtime(0)
        rt.reap()
        st = rt.stats()
        manager = type(cuda.current_context().memory_manager).__module__
        report("RESULT", ok=len(results) == 4 and all(results.values()), errors=errors,
               alive=alive, ptds=xdm.numba._per_thread_default_stream(),
               manager=manager, allocs=st.allocs, frees=st.frees, failures=st.failures)
    ''', env={"NUMBA_CUDA_MEMORY_MANAGER": "xdm.numba",
              "NUMBA_CUDA_PER_THREAD_DEFAULT_STREAM": "1",
              "XDM_CONFIG": config_file(stack)})
    assert r["alive"] == 0, "a thread did not end: hung in a free or its exit?"
    assert not r["errors"], r["errors"]
    assert r["manager"] == "xdm.numba" and r["ptds"], r
    assert r["ok"], "a kernel on a per-thread stream computed wrong"
    assert r["allocs"] >= 4 * 10 * 3 and r["failures"] == 0, r
    assert r["frees"] >= 4 * 10 * 3, r


NUMBA_IPC_CHILD = '''
import numpy as np


def work(handles, answers):
    try:
        h = handles.get(timeout=120)
        with h as arr:
            seen = float(arr.copy_to_host().astype(np.float64).sum())
            arr.copy_to_device(np.arange(arr.size, dtype=np.float32) + 7)
        answers.put(("ok", seen, type(h._ipc_handle).__name__))
    except BaseException as e:
        answers.put(("raised", type(e).__name__ + ": " + str(e)[:300], ""))
'''


@pytest.mark.parametrize("stack", ["pool | cuda_vmm", "pool | cuda_async ipc=true"])
def test_numba_ipc_handle_of_a_view_reaches_a_spawned_child(stack, config_file):
    """An array view's get_ipc_handle() sent to a spawned child, which reads
    it and writes into it: under Numba's own memory manager (the control,
    the driver's cuIpcGetMemHandle on cuMemAlloc memory) and under xdm.numba
    on stacks whose memory the driver's IPC cannot export.  The sender sees
    the child's write in both."""
    needs("numba")
    out = {}
    for mode in ("numba", "xdm"):
        env = {"XDM_CONFIG": config_file(stack), "XDM_TEST_CHILD": NUMBA_IPC_CHILD}
        if mode == "xdm":
            env["NUMBA_CUDA_MEMORY_MANAGER"] = "xdm.numba"
        out[mode] = run('''
            import os, sys, tempfile
            import multiprocessing as mp
            import numpy as np
            if not hasattr(np, "row_stack"):
                np.row_stack = np.vstack     # numba-cuda 0.30 against numpy 2.4
            from numba import cuda
            where = tempfile.mkdtemp()
            with open(os.path.join(where, "numba_ipc_child.py"), "w") as f:
                f.write(os.environ["XDM_TEST_CHILD"])
            sys.path.insert(0, where)
            import numba_ipc_child
            n = 1 << 20
            whole = cuda.to_device(np.arange(n, dtype=np.float32))
            view = whole[4096:]
            ctx = mp.get_context("spawn")
            handles, answers = ctx.Queue(), ctx.Queue()
            child = ctx.Process(target=numba_ipc_child.work, args=(handles, answers))
            child.start()
            try:
                h = view.get_ipc_handle()
                handles.put(h)
                answer = answers.get(timeout=180)
            except Exception as e:
                answer = ("sender raised", type(e).__name__ + ": " + str(e)[:300], "")
            child.join(120)
            host = whole.copy_to_host()
            want = np.concatenate([np.arange(4096, dtype=np.float32),
                                   np.arange(n - 4096, dtype=np.float32) + 7])
            manager = type(cuda.current_context().memory_manager).__module__
            report("RESULT", answer=list(answer), exitcode=child.exitcode,
                   written=bool(np.array_equal(host, want)), manager=manager)
        ''', env=env)
    ctrl, xdm = out["numba"], out["xdm"]
    assert ctrl["manager"] != "xdm.numba" and xdm["manager"] == "xdm.numba", (ctrl, xdm)
    n, skip = 1 << 20, 4096
    want_seen = float(sum(range(skip, n)))
    for r in (ctrl, xdm):
        assert r["answer"][0] == "ok" and r["exitcode"] == 0, r
        assert r["answer"][1] == want_seen, r
        assert r["written"], r
    assert xdm["answer"][2] == "XdmIpcHandle", xdm
