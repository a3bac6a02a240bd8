"""Everyday torch features under xdm, each beside a control under torch's
own caching allocator: the same program runs twice (MODE "torch" and MODE
"xdm"), each in a python of its own (conftest.Child), and the answers are
compared.  A feature that raised under xdm's earlier pluggable glue (memory
statistics, cuDNN's benchmark mode, CUDA graphs and their private pools,
MemPool, torch.compile's reduce-overhead, memory history and snapshots)
fails here if it raises, or answers differently from torch's allocator.
"""

import os
import subprocess
import textwrap

import pytest

from conftest import run

PREAMBLE = '''
MODE = %r
if MODE == "xdm":
    import xdm.torch
    xdm.torch.use(stack=%r, ordinal=0)
import torch
'''

STACK = "pool | cuda_async"
MB = 1 << 20


def xdm_only(code, stack=STACK, env=None, timeout=300):
    """The program's RESULT fields under xdm alone, for what has no
    counterpart under torch's allocator (a budget)."""
    return run((PREAMBLE % ("xdm", stack)) + textwrap.dedent(code), env=env, timeout=timeout)


def torch_only(code, env=None, timeout=300):
    """The program's RESULT fields under torch's allocator alone (a control)."""
    return run((PREAMBLE % ("torch", STACK)) + textwrap.dedent(code), env=env, timeout=timeout)


def both(code, stack=STACK, env=None, timeout=300):
    """The program's RESULT fields under torch's allocator and under xdm."""
    out = {}
    for mode in ("torch", "xdm"):
        program = (PREAMBLE % (mode, stack)) + textwrap.dedent(code)
        out[mode] = run(program, env=env, timeout=timeout)
    return out["torch"], out["xdm"]


def test_memory_statistics_answer_as_under_torch():
    """memory_allocated and its peak, reset_peak_memory_stats, the counts
    and memory_summary, after known allocations; under xdm the figures
    equal xdm's own counters."""
    ctrl, xdm = both('''
        base = torch.cuda.memory_allocated()
        xs = [torch.empty(MB_, dtype=torch.uint8, device="cuda") for _ in range(3)]
        grown = torch.cuda.memory_allocated() - base
        peak_before = torch.cuda.max_memory_allocated()
        del xs[0]
        after_free = torch.cuda.memory_allocated() - base
        torch.cuda.reset_peak_memory_stats()
        peak_after_reset = torch.cuda.max_memory_allocated() - base
        stats = torch.cuda.memory_stats()
        torch.cuda.reset_accumulated_memory_stats()
        again = torch.cuda.memory_stats()
        summary = torch.cuda.memory_summary()
        fields = dict(grown=grown, after_free=after_free, peak_before=peak_before - base,
                      peak_after_reset=peak_after_reset,
                      reserved=torch.cuda.memory_reserved(),
                      count=stats["allocation.all.current"],
                      allocated_total=stats["allocation.all.allocated"],
                      allocated_after_reset=again["allocation.all.allocated"],
                      stat_bytes=stats["allocated_bytes.all.current"] - base,
                      stat_active=stats["active_bytes.all.current"] - base,
                      summary_lines=len(summary.splitlines()),
                      accel=torch.accelerator.memory_allocated(0) - base)
        if MODE == "xdm":
            s = xdm.runtime(0).stats()
            fields.update(xdm_bytes=s.bytes_outstanding, xdm_blocks=s.blocks_outstanding,
                          torch_bytes=torch.cuda.memory_allocated(),
                          torch_blocks=stats["allocation.all.current"],
                          has_xdm_keys=sorted(k for k in stats if k.startswith("xdm.")))
        report("RESULT", **fields)
    '''.replace("MB_", str(MB)))
    for r in (ctrl, xdm):
        assert r["grown"] == 3 * MB, r
        assert r["after_free"] == 2 * MB, r
        assert r["peak_before"] >= 3 * MB, r
        assert r["peak_after_reset"] == 2 * MB, r
        assert r["reserved"] >= 2 * MB, r
        assert r["allocated_after_reset"] == 0, r
        assert r["accel"] == 2 * MB, r
        assert r["summary_lines"] > 10, r
    # The dictionary's keys are torch's own making under both; its values
    # are what xdm computes.
    assert xdm["stat_bytes"] == ctrl["stat_bytes"] == 2 * MB, (ctrl, xdm)
    assert xdm["stat_active"] == ctrl["stat_active"] == 2 * MB, (ctrl, xdm)
    assert xdm["torch_bytes"] == xdm["xdm_bytes"], xdm
    assert xdm["torch_blocks"] == xdm["xdm_blocks"], xdm


def test_budget_keys_in_memory_stats(budget_key):
    xdm = xdm_only('''
        x = torch.empty(8 << 20, dtype=torch.uint8, device="cuda")
        s = torch.cuda.memory_stats()
        report("RESULT", limit=s.get("xdm.budget.limit_bytes"),
               used=s.get("xdm.budget.used_bytes"), left=s.get("xdm.budget.remaining_bytes"))
    ''', stack="budget key=%s limit=64M | pool | cuda_async" % budget_key)
    assert xdm["limit"] == 64 * MB, xdm
    assert xdm["used"] >= 8 * MB and xdm["left"] == xdm["limit"] - xdm["used"], xdm


def test_cudnn_benchmark_conv_forward_and_backward():
    ctrl, xdm = both('''
        torch.manual_seed(0)
        torch.backends.cudnn.benchmark = True
        conv = torch.nn.Conv2d(16, 32, 3, padding=1).cuda()
        x = torch.randn(8, 16, 64, 64, device="cuda", requires_grad=True)
        y = conv(x)
        y.sum().backward()
        report("RESULT", out=float(y.double().sum()), grad=float(x.grad.double().sum()))
    ''')
    assert xdm["out"] == pytest.approx(ctrl["out"], rel=1e-3)
    assert xdm["grad"] == pytest.approx(ctrl["grad"], rel=1e-3)


GRAPHS = '''
def captured(pool=None):
    static_in = torch.ones(1 << 20, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            (static_in * 2 + 1).sum()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, pool=pool):
        tmp = static_in * 3
        tmp2 = tmp + 1
        static_out = (tmp2 * 2).sum()
    return g, static_in, static_out
'''


def test_graph_capture_and_replay():
    ctrl, xdm = both(GRAPHS + textwrap.dedent('''
        g, x, out = captured()
        x.fill_(2.0)
        g.replay()
        torch.cuda.synchronize()
        first = float(out)
        x.fill_(5.0)
        g.replay()
        torch.cuda.synchronize()
        in_pool = [(s["address"], s["total_size"])
                   for s in torch.cuda.memory.memory_snapshot(g.pool())]
        report("RESULT", first=first, second=float(out), pool=list(g.pool()),
               pool_segments=len(in_pool),
               out_in_pool=any(a <= out.data_ptr() < a + n for a, n in in_pool))
    '''))
    assert ctrl["first"] == xdm["first"] == 14.0 * (1 << 20)
    assert ctrl["second"] == xdm["second"] == 32.0 * (1 << 20)
    for r in (ctrl, xdm):
        # The capture's memory came from the graph's private pool.
        assert r["pool"] != [0, 0] and r["pool_segments"] >= 1 and r["out_in_pool"], r


def test_concurrent_replay_of_graphs_in_their_own_pools():
    """Two graphs captured in pools of their own, replayed concurrently on
    two streams, must not share scratch memory."""
    ctrl, xdm = both('''
        n = 1 << 22
        a = torch.zeros(n, device="cuda")
        b = torch.zeros(n, device="cuda")
        graphs = []
        for src, value in ((a, 3.0), (b, 7.0)):
            g = torch.cuda.CUDAGraph()
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                with torch.cuda.graph(g):
                    scratch = torch.full((n,), value, device="cuda")
                    for _ in range(20):
                        scratch = scratch * 1.0 + 0.0
                    src.copy_(scratch)
            torch.cuda.current_stream().wait_stream(s)
            graphs.append(g)
        s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
        for _ in range(10):
            with torch.cuda.stream(s1):
                graphs[0].replay()
            with torch.cuda.stream(s2):
                graphs[1].replay()
        torch.cuda.synchronize()
        report("RESULT", a=float(a.double().sum()), b=float(b.double().sum()),
               pools=[list(g.pool()) for g in graphs])
    ''')
    n = 1 << 22
    for r in (ctrl, xdm):
        assert r["a"] == 3.0 * n and r["b"] == 7.0 * n, r


def test_empty_cache_gives_back_at_once():
    """After empty_cache, memory_reserved is back where it was and a new
    peak starts there, as torch's own test_memory_stats expects; over
    cuda_vmm too, where only the pool's trimmer gave granules back
    before."""
    for stack in ("pool | cuda_async", "pool | cuda_vmm"):
        ctrl, xdm = both('''
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_reserved()
            x = torch.randn(8 << 20, device="cuda")
            grown = torch.cuda.memory_reserved() - base
            del x
            torch.cuda.empty_cache()
            after = torch.cuda.memory_reserved() - base
            torch.cuda.reset_peak_memory_stats()
            peak = torch.cuda.max_memory_reserved() - base
            report("RESULT", grown=grown, after=after, peak=peak)
        ''', stack=stack)
        for r in (ctrl, xdm):
            assert r["grown"] >= 32 << 20, (stack, r)
            assert r["after"] == 0 and r["peak"] == 0, (stack, r)


def test_oom_message_reads_as_torchs():
    """A request past the device, and one past 1 EiB, raise OutOfMemoryError
    with the words torch's allocator uses (what scripts and torch's own
    tests match), and the process goes on."""
    ctrl, xdm = both('''
        import re
        x = torch.zeros(1024, device="cuda")
        texts, kinds = [], []
        for n in (1024 * 1024 * 1024 * 800000000, 1024 * 1024 * 1024 * 8000000000):
            try:
                torch.empty(n, dtype=torch.int8, device="cuda")
            except RuntimeError as e:
                texts.append(str(e))
                kinds.append(type(e).__name__)
        x.fill_(1)
        report("RESULT", texts=texts, kinds=kinds, ok=bool((x == 1).all()),
               device=bool(re.search(r"Tried to allocate 800000000\.00 GiB\. GPU 0 has a "
                                     r"total capacity of", texts[0])),
               exa="Tried to allocate more than 1EB memory" in texts[1])
    ''')
    for r in (ctrl, xdm):
        assert r["kinds"] == ["OutOfMemoryError", "OutOfMemoryError"], r
        assert r["device"] and r["exa"] and r["ok"], r
    assert "xdm:" in xdm["texts"][0], xdm


def test_oom_inside_a_capture_raises_and_the_process_goes_on(budget_key):
    xdm = xdm_only('''
        s = torch.cuda.Stream()
        g = torch.cuda.CUDAGraph()
        err = None
        try:
            with torch.cuda.stream(s):
                with torch.cuda.graph(g):
                    torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
        except torch.OutOfMemoryError as e:
            err = str(e)
        except RuntimeError as e:
            err = "RuntimeError: " + str(e)
        torch.cuda.synchronize()
        g2 = torch.cuda.CUDAGraph()
        x = torch.ones(1024, device="cuda")
        with torch.cuda.stream(s):
            with torch.cuda.graph(g2):
                y = x * 2
        g2.replay()
        torch.cuda.synchronize()
        report("RESULT", err=err, after=float(y.sum()))
    ''', stack="budget key=%s limit=64M | pool | cuda_async" % budget_key)
    assert xdm["err"] and not xdm["err"].startswith("RuntimeError"), xdm
    assert xdm["after"] == 2048.0, xdm


def test_mempool_routes_allocations_and_counts_its_users():
    ctrl, xdm = both('''
        pool = torch.cuda.MemPool()
        with torch.cuda.use_mem_pool(pool):
            inside = torch.empty(4 << 20, dtype=torch.uint8, device="cuda")
            uses_inside = pool.use_count()
        outside = torch.empty(4 << 20, dtype=torch.uint8, device="cuda")
        seg = torch.cuda.memory.memory_snapshot(pool.id)
        addresses = [s["address"] for s in seg]
        in_pool = any(a <= inside.data_ptr() < a + s["total_size"]
                      for a, s in zip(addresses, seg))
        out_pool = any(a <= outside.data_ptr() < a + s["total_size"]
                       for a, s in zip(addresses, seg))
        report("RESULT", uses_inside=uses_inside, uses_after=pool.use_count(),
               in_pool=in_pool, out_pool=out_pool)
    ''')
    for r in (ctrl, xdm):
        assert r["in_pool"] and not r["out_pool"], r
    assert xdm["uses_inside"] == ctrl["uses_inside"]
    assert xdm["uses_after"] == ctrl["uses_after"]


FRACTION_OVER_A_MEMPOOL = '''
    free, total = torch.cuda.mem_get_info()
    if FRACTION:
        torch.cuda.set_per_process_memory_fraction((256 << 20) / total)
    held = torch.empty(192 << 20, dtype=torch.uint8, device="cuda")
    pool = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(pool):
        try:
            big = torch.empty(128 << 20, dtype=torch.uint8, device="cuda")
            big_outcome = "fits"
        except torch.OutOfMemoryError:
            big_outcome = "refused"
        try:
            small = torch.empty(32 << 20, dtype=torch.uint8, device="cuda")
            small_outcome = "fits"
        except torch.OutOfMemoryError:
            small_outcome = "refused"
    get = getattr(torch.cuda, "get_per_process_memory_fraction", None)
    report("RESULT", big=big_outcome, small=small_outcome,
           fraction_mib=round(get() * total / (1 << 20)) if get else None)
'''


def test_memory_fraction_bounds_mempools_too():
    """torch's memory fraction bounds every pool of the device together:
    with 256 MiB allowed and 192 MiB held by the device's pool, a MemPool
    is refused 128 MiB more and given 32 MiB, under both allocators; the
    control, without the fraction, gives the MemPool the 128 MiB."""
    ctrl, xdm = both("FRACTION = True\n" + textwrap.dedent(FRACTION_OVER_A_MEMPOOL))
    unbounded = xdm_only("FRACTION = False\n" + textwrap.dedent(FRACTION_OVER_A_MEMPOOL))
    assert ctrl["big"] == "refused" and ctrl["small"] == "fits", ctrl
    assert xdm["big"] == ctrl["big"] and xdm["small"] == ctrl["small"], (ctrl, xdm)
    assert xdm["fraction_mib"] == ctrl["fraction_mib"], (ctrl, xdm)
    assert unbounded["big"] == "fits" and unbounded["small"] == "fits", unbounded


def test_compile_reduce_overhead_gives_eager_answers():
    ctrl, xdm = both('''
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(),
                                    torch.nn.Linear(512, 256)).cuda()
        fast = torch.compile(model, mode="reduce-overhead")
        outs = []
        with torch.no_grad():
            for i in range(5):
                x = torch.full((64, 256), float(i) / 10, device="cuda")
                outs.append(float(fast(x).double().sum()))
            eager = float(model(x).double().sum())
        from torch._dynamo.utils import counters
        pools = sorted({tuple(s.get("segment_pool_id", (0, 0)))
                        for s in torch.cuda.memory._snapshot()["segments"]})
        report("RESULT", outs=outs, eager=eager,
               skips=sum(counters["inductor"].get(k, 0) for k in counters["inductor"]
                         if "cudagraph_skip" in k),
               private=[list(p) for p in pools if tuple(p) != (0, 0)])
    ''', timeout=600)
    for r in (ctrl, xdm):
        # cudagraph trees ran: nothing skipped, and memory in a graph pool.
        assert r["skips"] == 0 and r["private"], r
    assert xdm["outs"][-1] == pytest.approx(xdm["eager"], rel=1e-4)
    assert xdm["outs"] == pytest.approx(ctrl["outs"], rel=1e-4)


def test_graph_trees_switching_paths_restore_the_pool():
    """CUDA graph trees record f then g, replay f, then record h after it:
    a new path from a replayed node, where they put the graph pool back as
    the checkpoint after f found it (setCheckpointPoolState).  Counted, so
    the test fails if the restore stops being reached; every answer must
    equal eager's."""
    ctrl, xdm = both('''
        calls = {"restore": 0}
        real_restore = torch._C._cuda_setCheckpointPoolState

        def counting(*args, **kwargs):
            calls["restore"] += 1
            return real_restore(*args, **kwargs)

        torch._C._cuda_setCheckpointPoolState = counting

        def f(x):
            return x * 2 + 1

        def g(y):
            return y.sin() + 3

        def h(y):
            return y.cos() * 5

        cf, cg, ch = (torch.compile(fn, mode="reduce-overhead") for fn in (f, g, h))
        x = torch.randn(1024, 1024, device="cuda", generator=torch.Generator(
            device="cuda").manual_seed(0))
        got, want = [], []
        for second in (g, h, g, h):
            compiled = cg if second is g else ch
            for _ in range(3):
                # A new step each time: the outputs of the last are not kept.
                torch.compiler.cudagraph_mark_step_begin()
                got.append(float(compiled(cf(x)).double().sum()))
                want.append(float(second(f(x)).double().sum()))
        report("RESULT", got=got, want=want, restores=calls["restore"])
    ''', timeout=600)
    for r in (ctrl, xdm):
        assert r["got"] == pytest.approx(r["want"], rel=1e-5), r
        assert r["restores"] >= 1, r
    assert xdm["got"] == pytest.approx(ctrl["got"], rel=1e-6)


def test_memory_history_and_snapshot():
    ctrl, xdm = both('''
        torch.cuda.memory._record_memory_history(max_entries=1000)
        keep = torch.empty(3 << 20, dtype=torch.uint8, device="cuda")
        gone = torch.empty(5 << 20, dtype=torch.uint8, device="cuda")
        gone_ptr = gone.data_ptr()
        del gone
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        trace = snap["device_traces"][0]
        actions = [(e["action"], e["addr"]) for e in trace]
        blocks = [b for s in snap["segments"] for b in s["blocks"]
                  if b["state"] == "active_allocated"]
        live = any(s["address"] <= keep.data_ptr() < s["address"] + s["total_size"]
                   for s in snap["segments"])
        from torch.cuda import _memory_viz
        plot = _memory_viz.trace_plot(snap)
        frames = any(e.get("frames") for e in trace)
        report("RESULT", alloc=("alloc", keep.data_ptr()) in actions,
               freed=("free_requested", gone_ptr) in actions, live=live,
               frames=frames, plot=len(plot) > 1000, blocks=len(blocks) >= 1)
    ''')
    for r in (ctrl, xdm):
        assert r["alloc"] and r["freed"] and r["live"] and r["plot"] and r["blocks"], r
    assert xdm["frames"] == ctrl["frames"]


@pytest.mark.parametrize("stack", ["pool | cuda_async", "pool | cuda_vmm"])
def test_snapshot_shows_the_pools_chunks_with_their_free_pieces(stack):
    """A snapshot's segments are what the pool holds: three 3 MiB blocks
    with the middle one freed lie in one segment, with an inactive block
    between the two live ones, and the segments add up to the reserved
    bytes, under torch's allocator and under xdm; _memory_viz draws the
    segments.  Before, xdm showed each live block as a segment of its own,
    so the freed piece was nowhere (the test fails on that)."""
    ctrl, xdm = both('''
        MB = 1 << 20
        a = torch.empty(3 * MB, dtype=torch.uint8, device="cuda")
        b = torch.empty(3 * MB, dtype=torch.uint8, device="cuda")
        c = torch.empty(3 * MB, dtype=torch.uint8, device="cuda")
        del b
        torch.cuda.synchronize()
        snap = torch.cuda.memory._snapshot()
        def holding(ptr):
            return [s for s in snap["segments"]
                    if s["address"] <= ptr < s["address"] + s["total_size"]]
        seg_a, seg_c = holding(a.data_ptr()), holding(c.data_ptr())
        same = len(seg_a) == 1 and seg_a == seg_c
        states = []
        if same:
            lo, hi = sorted((a.data_ptr(), c.data_ptr()))
            at = seg_a[0]["address"]
            for blk in seg_a[0]["blocks"]:
                if lo < at + blk["size"] and at < hi:
                    states.append(blk["state"])
                at += blk["size"]
        tiled = all(sum(blk["size"] for blk in s["blocks"]) == s["total_size"]
                    for s in snap["segments"])
        from torch.cuda import _memory_viz
        plot = _memory_viz.segment_plot(snap)
        report("RESULT", same=same, between=states, tiled=tiled,
               total=sum(s["total_size"] for s in snap["segments"]),
               reserved=torch.cuda.memory_reserved(), plot=len(plot) > 1000)
    ''', stack=stack)
    for r in (ctrl, xdm):
        assert r["same"] and r["tiled"] and r["plot"], r
        assert r["between"][0] == "active_allocated" and "inactive" in r["between"], r
        assert r["total"] == r["reserved"], r


def test_snapshot_requested_sizes_skipped_actions_and_metadata():
    """A block asked for as an odd size shows that size as its requested
    size (its size may be larger); skip_actions leaves those actions out of
    the trace; every event carries torch's user metadata; the profiler
    hears of the allocations (its memory plot names the test)."""
    ctrl, xdm = both('''
        torch.cuda.memory._set_memory_metadata("xdm parity")
        torch.cuda.memory._record_memory_history("all", max_entries=1000,
                                                 skip_actions=["free_completed"])
        asked = 1000003
        odd = torch.empty(asked, dtype=torch.uint8, device="cuda")
        gone = torch.empty(4096, dtype=torch.uint8, device="cuda")
        del gone
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        torch.cuda.memory._set_memory_metadata("")
        trace = snap["device_traces"][0]
        requested = [b["requested_size"] for s in snap["segments"] for b in s["blocks"]
                     if b["state"] == "active_allocated" and b["size"] >= asked
                     and s["address"] <= odd.data_ptr() < s["address"] + s["total_size"]]
        with torch.profiler.profile(profile_memory=True, record_shapes=True) as prof:
            x = torch.rand(128, 128, device="cuda")
            y = x * x + x
            del x, y
        mem = [e for e in prof.events() if getattr(e, "cuda_memory_usage", 0)
               or getattr(e, "device_memory_usage", 0)]
        report("RESULT", requested=requested,
               skipped=[e["action"] for e in trace if e["action"] == "free_completed"],
               actions=sorted({e["action"] for e in trace}),
               metadata=sorted({e.get("user_metadata", "") for e in trace}),
               profiled=len(mem) > 0)
    ''')
    for r in (ctrl, xdm):
        assert 1000003 in r["requested"], r
        assert r["skipped"] == [], r
        assert "alloc" in r["actions"] and "free_requested" in r["actions"], r
        assert r["metadata"] == ["xdm parity"], r
        assert r["profiled"], r


def test_snapshot_carries_annotations_and_compile_context():
    """record_function's annotations reach the snapshot's
    external_annotations, and every event carries a compile_context (torch
    writes "N/A" outside torch.compile), under torch's allocator and under
    xdm; before, xdm kept no annotations and wrote an empty context."""
    ctrl, xdm = both('''
        # Annotations reach the allocator only with this on (torch's default is off).
        torch.cuda.memory._record_memory_history(max_entries=1000,
                                                 global_record_annotations=True)
        with torch.profiler.record_function("xdm_annotated_region"):
            x = torch.empty(1 << 20, device="cuda")
        del x
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        names = sorted({str(a.get("name")) for a in snap.get("external_annotations", [])})
        contexts = sorted({str(e.get("compile_context")) for e in snap["device_traces"][0]})
        report("RESULT", annotated="xdm_annotated_region" in names, contexts=contexts)
    ''')
    assert ctrl["annotated"], ctrl
    assert xdm["annotated"], xdm
    assert xdm["contexts"] == ctrl["contexts"], (ctrl, xdm)


def test_snapshot_allocator_settings_are_torchs_defaults_every_time():
    """The snapshot's allocator settings (its config_metadata) under xdm: the
    garbage-collection threshold, split limit and expandable flag read as
    torch's defaults do under torch's allocator, and every snapshot of a
    process gives the same settings (fields left uninitialized would carry
    whatever the stack held)."""
    ctrl, xdm = both('''
        keep = torch.empty(1 << 20, device="cuda")
        seen = []
        for i in range(20):
            junk = [float(j) * 1.5 for j in range(i * 50)]
            seen.append(torch.cuda.memory._snapshot().get("allocator_settings"))
        report("RESULT", first=seen[0], same=all(s == seen[0] for s in seen))
    ''')
    assert ctrl["first"], "torch's snapshot carries no allocator_settings: %r" % ctrl
    assert xdm["same"], xdm
    for key in ("garbage_collection_threshold", "max_split_size", "expandable_segments"):
        assert key in ctrl["first"], ctrl
        assert xdm["first"].get(key) == ctrl["first"][key], (key, ctrl, xdm)


def test_history_context_gathered_while_another_thread_snapshots():
    """Memory history with Python stacks: autograd's device thread allocates
    without the GIL (its context recorder then takes the GIL) while a thread
    holding the GIL takes snapshots.  Gathering the context under the glue's
    history lock would deadlock the two; both must go on.  The child dies
    with its stacks after 120 s rather than hang the test."""
    ctrl, xdm = both('''
        import faulthandler, threading, time
        faulthandler.dump_traceback_later(120, exit=True)
        torch.cuda.memory._record_memory_history("all", stacks="python", max_entries=10000)
        model = torch.nn.Sequential(*[torch.nn.Linear(512, 512) for _ in range(8)]).cuda()
        done = threading.Event()
        steps = [0]

        def train():
            while not done.is_set():
                loss = model(torch.randn(64, 512, device="cuda")).square().sum()
                loss.backward()
                steps[0] += 1

        t = threading.Thread(target=train)
        t.start()
        snaps = 0
        end = time.monotonic() + 10
        while time.monotonic() < end or steps[0] < 20:
            torch.cuda.memory._snapshot()
            snaps += 1
        done.set()
        t.join()
        torch.cuda.memory._record_memory_history(enabled=None)
        faulthandler.cancel_dump_traceback_later()
        report("RESULT", steps=steps[0], snaps=snaps)
    ''')
    for r in (ctrl, xdm):
        assert r["steps"] >= 20 and r["snaps"] >= 1, r


def test_oom_observer_hears_a_budget_refusal(budget_key):
    """The OOM observer hears xdm's budget refusal as it hears torch's own
    out-of-memory (the control: a memory fraction of 32 MiB under torch's
    allocator)."""
    ctrl, xdm = both('''
        if MODE == "torch":
            total = torch.cuda.get_device_properties(0).total_memory
            torch.cuda.set_per_process_memory_fraction((32 << 20) / total)
        heard = []
        torch._C._cuda_attach_out_of_memory_observer(
            lambda device, alloc, total, free: heard.append(device))
        try:
            torch.empty(128 << 20, dtype=torch.uint8, device="cuda")
        except torch.OutOfMemoryError:
            pass
        report("RESULT", heard=heard, ooms=torch.cuda.memory_stats()["num_ooms"])
    ''', stack="budget key=%s limit=32M | pool | cuda_async" % budget_key)
    for r in (ctrl, xdm):
        assert r["heard"] == [0], r
        assert r["ooms"] >= 1, r


IPC_CHILD = """
import os
import sys
if os.environ["XDM_TEST_MODE"] == "xdm" and "torch" not in sys.modules:
    import xdm.torch
    xdm.torch.use(stack=os.environ["XDM_TEST_STACK"], ordinal=0)
import torch


def work(tensors, answers):
    x = tensors.get()
    x.add_(1)
    torch.cuda.synchronize()
    answers.put(float(x.double().sum()))
    del x
    answers.put("closed")
"""


@pytest.mark.parametrize("stack", ["pool | cuda_vmm", "pool | cuda_async ipc=true"])
def test_tensor_sent_to_a_spawned_child_is_changed_in_place(stack):
    """torch.multiprocessing sends a CUDA tensor to a spawned child, which
    adds 1 to it in place: the sender sees the child's write, under torch's
    allocator and under xdm (both processes allocate through xdm, on a
    stack whose memory can be shared)."""
    ctrl, xdm = both('''
        import os, sys, tempfile
        import torch.multiprocessing as mp
        where = tempfile.mkdtemp()
        with open(os.path.join(where, "ipc_child.py"), "w") as f:
            f.write(CHILD)
        sys.path.insert(0, where)
        os.environ["XDM_TEST_MODE"] = MODE
        os.environ["XDM_TEST_STACK"] = STACK_
        import ipc_child
        ctx = mp.get_context("spawn")
        tensors, answers = ctx.Queue(), ctx.Queue()
        n = 1 << 20
        x = torch.arange(n, dtype=torch.float32, device="cuda")
        child = ctx.Process(target=ipc_child.work, args=(tensors, answers))
        child.start()
        tensors.put(x)
        seen = answers.get(timeout=120)
        closed = answers.get(timeout=120)
        child.join(120)
        torch.cuda.synchronize()
        want = torch.arange(n, dtype=torch.float32, device="cuda") + 1
        report("RESULT", seen=seen, closed=closed, exitcode=child.exitcode,
               same=bool(torch.equal(x, want)), sum=float(x.double().sum()))
    '''.replace("CHILD)", repr(IPC_CHILD) + ")").replace("STACK_", repr(stack)), stack=stack)
    for r in (ctrl, xdm):
        assert r["exitcode"] == 0 and r["closed"] == "closed", r
        assert r["same"], r
    assert xdm["seen"] == ctrl["seen"] == xdm["sum"] == ctrl["sum"], (ctrl, xdm)


UNSWITCHED_CHILD = """
import torch


def work(tensors, answers):
    try:
        x = tensors.get(timeout=120)
        x.add_(1)
        torch.cuda.synchronize()
        answers.put(("ok", float(x.double().sum())))
        del x
    except BaseException as e:
        answers.put(("raised", type(e).__name__ + ": " + str(e)))
"""


def test_tensor_sent_to_a_child_that_did_not_switch_is_refused_with_the_fix():
    """A child that never called xdm.torch.use() receives a CUDA tensor from
    a process that did: it gets an error naming xdm and the one-line fix, not
    torch's 'future version of torch', and the sender neither waits for ever
    nor keeps the memory once it drops the tensor.  Under torch's allocator
    in both (the control) the same child receives it and adds 1."""
    ctrl, xdm = both('''
        import os, sys, tempfile
        import torch.multiprocessing as mp
        where = tempfile.mkdtemp()
        with open(os.path.join(where, "unswitched_child.py"), "w") as f:
            f.write(CHILD)
        sys.path.insert(0, where)
        import unswitched_child
        ctx = mp.get_context("spawn")
        tensors, answers = ctx.Queue(), ctx.Queue()
        n = 1 << 20
        x = torch.zeros(n, dtype=torch.float32, device="cuda")
        child = ctx.Process(target=unswitched_child.work, args=(tensors, answers))
        child.start()
        tensors.put(x)
        answer = answers.get(timeout=180)
        child.join(120)
        torch.cuda.synchronize()
        del x
        torch.cuda.ipc_collect()
        report("RESULT", answer=list(answer), exitcode=child.exitcode,
               allocated=torch.cuda.memory_allocated())
    '''.replace("CHILD)", repr(UNSWITCHED_CHILD) + ")"), stack="pool | cuda_vmm")
    assert ctrl["answer"] == ["ok", float(1 << 20)] and ctrl["exitcode"] == 0, ctrl
    assert ctrl["allocated"] == 0, ctrl
    kind, message = xdm["answer"]
    assert kind == "raised" and xdm["exitcode"] == 0, xdm
    assert "xdm.torch.use()" in message and "future version" not in message, xdm
    assert xdm["allocated"] == 0, "the sender kept the refused tensor's memory: %r" % xdm


CAPTURE_CHILD = """
import os
import threading
import xdm.torch
xdm.torch.use(stack=os.environ["XDM_TEST_STACK"], ordinal=0)
import torch


def work(tensors, answers):
    try:
        mine = torch.cuda.Stream()
        with torch.cuda.stream(mine):
            x = tensors.get(timeout=120)
            seen = float(x.double().sum())
        torch.cuda.synchronize()
        a = torch.ones(1 << 16, device="cuda")
        g = torch.cuda.CUDAGraph()
        started, dropped, out, errors = threading.Event(), threading.Event(), [], []

        def capture():
            try:
                side = torch.cuda.Stream()
                with torch.cuda.graph(g, stream=side):
                    b = a * 3
                    started.set()
                    dropped.wait(60)
                    out.append(b + 1)
            except BaseException as e:
                errors.append(type(e).__name__ + ": " + str(e)[:300])
                started.set()

        t = threading.Thread(target=capture)
        t.start()
        started.wait(60)
        with torch.cuda.stream(mine):
            del x       # dropped while the other thread captures
        dropped.set()
        t.join(60)
        if errors:
            raise RuntimeError(errors[0])
        g.replay()
        torch.cuda.synchronize()
        y = tensors.get(timeout=120)
        seen_y = float(y.double().sum())
        del y
        answers.put(("ok", seen, float(out[0].sum()), seen_y))
    except BaseException as e:
        answers.put(("raised", type(e).__name__ + ": " + str(e)[:400]))
"""


def test_received_tensor_dropped_while_another_thread_captures():
    """A child drops a received CUDA tensor, on a stream of its own, while
    another of its threads captures a CUDA graph in torch's global mode.
    Closing the mapping must not synchronize the device (a call the capture
    forbids to every thread, which would end it): the capture succeeds and
    replays right, and a second tensor then opens and closes as usual."""
    stack = "pool | cuda_vmm"
    r = run((PREAMBLE % ("xdm", stack)) + textwrap.dedent('''
        import os, sys, tempfile
        import torch.multiprocessing as mp
        where = tempfile.mkdtemp()
        with open(os.path.join(where, "capture_child.py"), "w") as f:
            f.write(CHILD)
        sys.path.insert(0, where)
        os.environ["XDM_TEST_STACK"] = STACK_
        import capture_child
        ctx = mp.get_context("spawn")
        tensors, answers = ctx.Queue(), ctx.Queue()
        x = torch.full((1 << 20,), 2.0, device="cuda")
        y = torch.full((1 << 10,), 5.0, device="cuda")
        child = ctx.Process(target=capture_child.work, args=(tensors, answers))
        child.start()
        tensors.put(x)
        tensors.put(y)
        answer = answers.get(timeout=180)
        child.join(120)
        report("RESULT", answer=list(answer), exitcode=child.exitcode)
    ''').replace("CHILD)", repr(CAPTURE_CHILD) + ")").replace("STACK_", repr(stack)))
    assert r["answer"][0] == "ok", r
    assert r["answer"][1:] == [2.0 * (1 << 20), 4.0 * (1 << 16), 5.0 * (1 << 10)], r
    assert r["exitcode"] == 0, r

def test_two_gpu_copy_without_peers_written():
    ctrl, xdm = both('''
        if torch.cuda.device_count() < 2:
            report("RESULT", skip=True)
        else:
            x = torch.arange(1 << 20, dtype=torch.float32, device="cuda:0")
            y = x.to("cuda:1")
            z = y.to("cuda:0")
            report("RESULT", skip=False, same=bool(torch.equal(x, z)),
                   sum=float(y.double().sum()))
    ''')
    if ctrl["skip"]:
        pytest.skip("one GPU")
    assert xdm["same"] and xdm["sum"] == ctrl["sum"], xdm


def test_mempool_made_after_peer_access_is_reached_by_the_peer():
    """torch enables peer access once per pair of devices; a MemPool of
    device 1 made afterwards (over cuda_vmm, whose memory needs xdm's
    grant) is still reached from device 0: a kernel of
    device 0 (a strided copy, which torch runs as a kernel when peers
    may reach each other) reads and writes the pool's memory in place."""
    ctrl, xdm = both('''
        if torch.cuda.device_count() < 2 or not torch.cuda.can_device_access_peer(0, 1):
            report("RESULT", skip=True)
        else:
            # torch enables device 0's access to device 1 here, before the pool exists.
            warm = torch.ones(4, device="cuda:0").to("cuda:1")
            pool = torch.cuda.MemPool(device=1)
            with torch.cuda.use_mem_pool(pool, device=1):
                y = torch.zeros(1024, 1024, device="cuda:1")
            x = torch.arange(1 << 20, dtype=torch.float32, device="cuda:0").view(1024, 1024)
            with torch.cuda.device(0):
                y.t().copy_(x)
            torch.cuda.synchronize(0)
            torch.cuda.synchronize(1)
            report("RESULT", skip=False, same=bool(torch.equal(y.t().cpu(), x.cpu())))
    ''', stack="pool | cuda_vmm")
    if ctrl["skip"]:
        pytest.skip("fewer than two GPUs with peer access")
    assert ctrl["same"] and xdm["same"], (ctrl, xdm)


def test_caching_allocator_off_gives_memory_back_at_each_free():
    """torch.cuda.memory.caching_allocator_enable(False): each free gives
    the memory back to the driver at once (the device's free memory is
    back after del), under torch's allocator and under xdm; xdm still
    counts the live block in its budget.  The control, caching on, keeps
    the memory after the free under both."""
    code = '''
        MB = 1 << 20
        torch.empty(1, device="cuda")          # the context, before the first reading
        torch.cuda.synchronize()
        torch.cuda.memory.caching_allocator_enable(CACHING)
        free0, _ = torch.cuda.mem_get_info()
        x = torch.empty(256 * MB, dtype=torch.uint8, device="cuda")
        x.fill_(1)
        torch.cuda.synchronize()
        free1, _ = torch.cuda.mem_get_info()
        counted = torch.cuda.memory_allocated()
        side = torch.cuda.Stream()
        x.record_stream(side)
        del x
        torch.cuda.synchronize()
        free2, _ = torch.cuda.mem_get_info()
        report("RESULT", taken_mib=(free0 - free1) // MB, back_mib=(free2 - free1) // MB,
               counted_mib=counted // MB)
    '''
    for caching in (False, True):
        ctrl, xdm = both(("CACHING = %r\n" % caching) + textwrap.dedent(code))
        # xdm counts the block whichever way it was made (its budget does too).
        assert xdm["counted_mib"] >= 256, (caching, xdm)
        for r in (ctrl, xdm):
            assert r["taken_mib"] >= 256, (caching, r)
            if caching:
                assert r["back_mib"] < 8, (caching, r)
            else:
                assert r["back_mib"] >= 248, (caching, r)


OWN_ALLOCATOR_C = r"""
#include <stddef.h>
#include <cuda_runtime_api.h>

static size_t outstanding, calls;

void *xdm_test_alloc(size_t size, int device, cudaStream_t stream)
{
	void *ptr = NULL;

	(void)device;
	(void)stream;
	calls++;
	if (cudaMalloc(&ptr, size) != cudaSuccess)
		return NULL;
	outstanding += size;
	return ptr;
}

void xdm_test_free(void *ptr, size_t size, int device, cudaStream_t stream)
{
	(void)device;
	(void)stream;
	cudaFree(ptr);
	outstanding -= size;
}

size_t xdm_test_outstanding(void) { return outstanding; }
size_t xdm_test_calls(void) { return calls; }
"""

OWN_ALLOCATOR = '''
    import ctypes
    MB = 1 << 20
    own = torch.cuda.memory.CUDAPluggableAllocator(LIB, "xdm_test_alloc", "xdm_test_free")
    counts = ctypes.CDLL(LIB)
    counts.xdm_test_outstanding.restype = ctypes.c_size_t
    counts.xdm_test_calls.restype = ctypes.c_size_t
    pool = torch.cuda.MemPool(own.allocator())
    with torch.cuda.use_mem_pool(pool):
        x = torch.empty(8 * MB, dtype=torch.uint8, device="cuda")
        x.fill_(7)
    own_bytes = counts.xdm_test_outstanding()
    in_pool = any(s["address"] <= x.data_ptr() < s["address"] + s["total_size"]
                  for s in torch.cuda.memory.memory_snapshot(pool.id))
    used = torch.cuda.memory_stats().get("xdm.budget.used_bytes")
    calls_before = counts.xdm_test_calls()
    refused = False
    with torch.cuda.use_mem_pool(pool):
        try:
            y = torch.empty(100 * MB, dtype=torch.uint8, device="cuda")
        except torch.OutOfMemoryError:
            refused = True
    asked_again = counts.xdm_test_calls() - calls_before
    total = int(x.sum())
    del x, pool
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    report("RESULT", own_mib=own_bytes // MB, in_pool=in_pool, used=used, refused=refused,
           asked_again=asked_again, total=total, left=counts.xdm_test_outstanding())
'''


def own_allocator_library(tmp_path):
    """The test allocator above, built as a shared object; its path."""
    src = tmp_path / "own_allocator.c"
    lib = tmp_path / "libown_allocator.so"
    src.write_text(OWN_ALLOCATOR_C)
    cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src), "-I%s/include" % cuda,
                    "-L%s/lib64" % cuda, "-lcudart", "-Wl,-rpath,%s/lib64" % cuda], check=True)
    return str(lib)


def test_mempool_with_its_own_allocator_is_charged_to_the_budget(tmp_path, budget_key):
    """A MemPool with an allocator of its own: its memory comes from that
    allocator under both (the allocator holds at least the 8 MiB block and
    the block is in the pool's snapshot); under xdm the budget charges it
    and refuses 100 MiB past its 64 MiB limit without asking the
    allocator, where torch's allocator (the control) gives it."""
    lib = own_allocator_library(tmp_path)
    program = ("LIB = %r\n" % lib) + textwrap.dedent(OWN_ALLOCATOR)
    ctrl = torch_only(program)
    xdm = xdm_only(program, stack="budget key=%s limit=64M | pool | cuda_async" % budget_key)
    for r in (ctrl, xdm):
        assert r["own_mib"] >= 8 and r["in_pool"], r
        assert r["total"] == 7 * 8 * MB, r
    assert not ctrl["refused"] and ctrl["asked_again"] >= 1, ctrl
    assert xdm["used"] >= 8 * MB, xdm
    assert xdm["refused"] and xdm["asked_again"] == 0, xdm
    # Everything went back through the allocator once the pool went.
    assert xdm["left"] == 0, xdm
