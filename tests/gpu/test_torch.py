"""torch allocates through xdm (xdm.torch.use): the same training as under
torch's own allocator (plain, under cuDNN's benchmark mode, and compiled
with CUDA graphs), budget refusals as torch.OutOfMemoryError, the
record_stream, empty_cache and memory-fraction hooks, and the refusal of a
late switch.  Each program runs in a python of its own (conftest.Child).
"""

import pytest

from conftest import run

# Deterministic cuBLAS, for the training runs (read at CUDA's start).
DETERMINISTIC = {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}

# What every training program starts with: xdm installed (MODE "xdm")
# before torch touches CUDA, a fixed seed, deterministic kernels, no TF32.
TRAIN_PRELUDE = '''
if MODE == "xdm":
    import xdm.torch
    xdm.torch.use(stack=STACK, ordinal=0)
import torch

torch.manual_seed(0)
torch.use_deterministic_algorithms(True)
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
'''

TRAIN = TRAIN_PRELUDE + '''width, classes, steps = 512, 16, 300
model = torch.nn.Sequential(
    torch.nn.Linear(64, width), torch.nn.LayerNorm(width), torch.nn.GELU(),
    torch.nn.Linear(width, width), torch.nn.LayerNorm(width), torch.nn.GELU(),
    torch.nn.Linear(width, width), torch.nn.GELU(),
    torch.nn.Linear(width, classes)).cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
gen = torch.Generator().manual_seed(1)
losses = []
for step in range(steps):
    # A batch size of its own each step: allocations of many sizes.
    batch = int(torch.randint(32, 512, (1,), generator=gen))
    x = torch.randn(batch, 64, generator=gen).cuda()
    y = torch.randint(0, classes, (batch,), generator=gen).cuda()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    losses.append(loss.item())
fields = {"losses": losses}
if MODE == "xdm":
    s = xdm.runtime(0).stats()
    fields.update(allocs=s.allocs, frees=s.frees, stats=xdm.torch.memory_stats(0),
                  budget_peak=int(xdm.tree.show("0/budget/peak")))
report("RESULT", **fields)
'''


# The training under cuDNN's benchmark mode: a small convolution net, each
# batch of one of a few sizes, so that each shape is benchmarked once (its
# forward, data gradient and weight gradient) and then reused.  Benchmark
# mode times cuDNN's candidate algorithms and keeps the fastest; with
# deterministic=True the candidates are deterministic ones only, but two
# processes may still keep different ones: the timing decides, and so does
# the workspace cap (the allocator's largest cached block, cacheInfo), which
# differs between allocators by design.  Different algorithms round
# differently, so bit-identical losses can be asked only of runs that kept
# the same algorithms.  The probe tells: before training, one forward and
# backward of every batch size benchmarks every convolution the training
# will run (same shapes, same cache keys), and the exact bits of its output
# and gradients fingerprint the algorithms kept.
CONV_TRAIN = '''
if MODE == "xdm":
    import xdm.torch
    xdm.torch.use(stack=STACK, ordinal=0)
import torch

if not torch.backends.cudnn.is_available():
    report("RESULT", cudnn=None)
    sys.exit(0)
torch.manual_seed(0)
torch.use_deterministic_algorithms(True)
torch.backends.cudnn.benchmark = True
torch.backends.cudnn.deterministic = True
# One candidate per convolution: the first, in cuDNN's heuristic order,
# whose workspace fits the cap (cacheInfo).  The choice then depends on
# the cap alone, the allocator's answer, never on timing noise between
# candidates that run equally fast.
torch.backends.cudnn.benchmark_limit = 1
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
# Batches of 64 are left out: there torch's own allocator kept different
# algorithms from one run to the next on the H200 (two runs of it gave two
# fingerprints, while xdm's runs gave one), so no run can be asked to
# match it bit for bit.
classes, steps, sizes = 10, 300, (16, 32, 48)


class SpatialMean(torch.nn.Module):
    # Not AdaptiveAvgPool2d, whose backward has no deterministic kernel.
    def forward(self, x):
        return x.mean((2, 3))


model = torch.nn.Sequential(
    torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(),
    torch.nn.Conv2d(32, 64, 3, stride=2, padding=1), torch.nn.ReLU(),
    torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.ReLU(),
    torch.nn.Conv2d(64, 128, 3, stride=2, padding=1), torch.nn.ReLU(),
    SpatialMean(), torch.nn.Linear(128, classes)).cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)


def fingerprint(t):
    """An integer of t's exact bits (wrapping int64 sums do not depend on
    the order of the reduction)."""
    bits = t.detach().float().contiguous().view(torch.int32).flatten().to(torch.int64)
    weights = torch.arange(1, bits.numel() + 1, device=bits.device) % 1000003
    return int((bits * weights).sum())


# A large idle block in both allocators before the first convolution, so
# that the workspace cap benchmark mode reads is large under both and does
# not make the candidate sets differ (torch's caching allocator caches the
# freed block; the pool over cuda_async keeps it, having no trimmer).
torch.empty(256 << 20, dtype=torch.uint8, device="cuda")     # freed at once
probe_gen = torch.Generator().manual_seed(2)
algorithms = []
for batch in sizes:
    x = torch.randn(batch, 3, 32, 32, generator=probe_gen).cuda()
    out = model(x)
    out.square().sum().backward()
    algorithms.append([fingerprint(out)] + [fingerprint(p.grad) for p in model.parameters()])
    model.zero_grad(set_to_none=True)

gen = torch.Generator().manual_seed(1)
losses = []
for step in range(steps):
    batch = sizes[int(torch.randint(len(sizes), (1,), generator=gen))]
    x = torch.randn(batch, 3, 32, 32, generator=gen).cuda()
    y = torch.randint(0, classes, (batch,), generator=gen).cuda()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    losses.append(loss.item())
fields = {"losses": losses, "algorithms": algorithms, "cudnn": torch.backends.cudnn.version(),
          "benchmark": torch.backends.cudnn.benchmark}
if MODE == "xdm":
    fields.update(allocs=xdm.runtime(0).stats().allocs)
report("RESULT", **fields)
'''

# The training of TRAIN with the model under torch.compile's reduce-overhead
# mode: CUDA graph trees warm each graph up once, record it into a private
# memory pool (under xdm a private runtime, frameworks/torch/pools.cpp),
# then replay it.  One batch size, so that one path of the tree (forward
# then backward) is recorded and replayed every step; each step marks a new
# generation, as torch asks of a training loop.  The program counts the
# captures and replays of torch.cuda.CUDAGraph, and the graphs inductor
# skipped, to show the steps ran as graphs.
COMPILED_TRAIN = TRAIN_PRELUDE + '''
import torch._dynamo.utils

width, classes, steps, batch = 512, 16, 300, 256
model = torch.nn.Sequential(
    torch.nn.Linear(64, width), torch.nn.LayerNorm(width), torch.nn.GELU(),
    torch.nn.Linear(width, width), torch.nn.LayerNorm(width), torch.nn.GELU(),
    torch.nn.Linear(width, width), torch.nn.GELU(),
    torch.nn.Linear(width, classes)).cuda()
fast = torch.compile(model, mode="reduce-overhead")
opt = torch.optim.Adam(model.parameters(), lr=1e-3)

graph_calls = {"capture_begin": 0, "replay": 0}


def counting(name):
    inner = getattr(torch.cuda.CUDAGraph, name)

    def call(self, *args, **kwargs):
        graph_calls[name] += 1
        return inner(self, *args, **kwargs)
    return call


for name in graph_calls:
    setattr(torch.cuda.CUDAGraph, name, counting(name))

gen = torch.Generator().manual_seed(1)
losses = []
for step in range(steps):
    x = torch.randn(batch, 64, generator=gen).cuda()
    y = torch.randint(0, classes, (batch,), generator=gen).cuda()
    torch.compiler.cudagraph_mark_step_begin()
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(fast(x), y)
    loss.backward()
    opt.step()
    losses.append(loss.item())
fields = {"losses": losses, "captures": graph_calls["capture_begin"],
          "replays": graph_calls["replay"],
          "skips": torch._dynamo.utils.counters["inductor"]["cudagraph_skips"]}
if MODE == "xdm":
    # The graphs' private pools: runtimes of device 0 beside its own.
    private = [n for n in xdm.tree.list("") if n.startswith("0.")
               and xdm.tree.show(n + "/singleton").strip() == "0"]
    fields.update(private=len(private),
                  private_allocs=sum(int(xdm.tree.show(n + "/allocs")) for n in private))
report("RESULT", **fields)
'''


def train(mode, stack="", program=TRAIN, env=None, timeout=300):
    code = "MODE, STACK = %r, %r\n" % (mode, stack) + program
    return run(code, env=dict(DETERMINISTIC, **(env or {})), timeout=timeout)


def first_difference(ours, theirs):
    """The first step whose losses differ, or None."""
    return next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), None)


def test_import_does_not_import_torch():
    r = run('''
        import xdm.torch
        report("RESULT", torch="torch" in sys.modules, installed=xdm.torch.installed())
    ''')
    assert r == {"torch": False, "installed": False}


def test_training_losses_equal_torch_allocator(budget_key):
    stack = "budget key=%s limit=4G | pool | cuda_async" % budget_key
    ours = train("xdm", stack)
    theirs = train("torch")
    assert len(ours["losses"]) == len(theirs["losses"]) == 300
    diff = first_difference(ours["losses"], theirs["losses"])
    assert diff is None, "losses differ from step %d on: xdm %r, torch %r" % (
        diff, ours["losses"][diff], theirs["losses"][diff])
    # The memory was xdm's: thousands of blocks through the budget and the pool.
    assert ours["allocs"] > 3000, ours
    assert ours["budget_peak"] > 0
    assert ours["stats"]["reserved_bytes.all.peak"] >= ours["stats"]["allocated_bytes.all.peak"]
    assert ours["stats"]["allocation.all.allocated"] == ours["allocs"]



# Pairs of runs tried before the cuDNN test gives up asking for identical
# algorithms (see CONV_TRAIN): each pair takes some 20 s.
BENCHMARK_ATTEMPTS = 3


def test_training_losses_equal_torch_allocator_with_cudnn_benchmark(budget_key):
    stack = "budget key=%s limit=4G | pool | cuda_async" % budget_key
    for attempt in range(BENCHMARK_ATTEMPTS):
        ours = train("xdm", stack, CONV_TRAIN)
        if ours["cudnn"] is None:
            pytest.skip("torch has no cuDNN here")
        theirs = train("torch", program=CONV_TRAIN)
        if ours["algorithms"] == theirs["algorithms"]:
            break
    assert ours["benchmark"] and theirs["benchmark"]
    assert len(ours["losses"]) == len(theirs["losses"]) == 300
    # The memory was xdm's.
    assert ours["allocs"] > 3000, ours
    # With one candidate per convolution (benchmark_limit=1) only the
    # workspace cap can make the algorithms differ: xdm's cacheInfo then
    # answered differently from torch's allocator.
    assert ours["algorithms"] == theirs["algorithms"], \
        "cuDNN kept other algorithms under xdm than under torch's allocator in %d " \
        "attempts: %r and %r" % (BENCHMARK_ATTEMPTS, ours["algorithms"], theirs["algorithms"])
    diff = first_difference(ours["losses"], theirs["losses"])
    assert diff is None, "losses differ from step %d on (attempt %d, same algorithms): " \
        "xdm %r, torch %r" % (diff, attempt + 1, ours["losses"][diff], theirs["losses"][diff])


def test_training_losses_equal_torch_allocator_under_reduce_overhead(budget_key, tmp_path):
    stack = "budget key=%s limit=4G | pool | cuda_async" % budget_key
    # Both runs share inductor's cache: the second loads the kernels the
    # first compiled, so that the same code runs under both allocators
    # (inductor may choose a kernel's configuration by timing it, which
    # would change how it rounds), and it compiles only once.
    env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    ours = train("xdm", stack, COMPILED_TRAIN, env=env, timeout=600)
    theirs = train("torch", program=COMPILED_TRAIN, env=env, timeout=600)
    for r in (ours, theirs):
        assert len(r["losses"]) == 300
        # The steps ran as CUDA graphs: none skipped, the forward and the
        # backward recorded, and both replayed at (nearly) every step after
        # the warm-up and the recording.
        assert r["skips"] == 0, r
        assert r["captures"] >= 2, r
        assert r["replays"] >= 2 * 280, r
    # The graphs' memory was xdm's: private runtimes that allocated.
    assert ours["private"] >= 1 and ours["private_allocs"] > 0, ours
    diff = first_difference(ours["losses"], theirs["losses"])
    assert diff is None, "losses differ from step %d on: xdm %r, torch %r" % (
        diff, ours["losses"][diff], theirs["losses"][diff])


def test_budget_refusal_is_torch_oom_and_the_process_goes_on(budget_key):
    r = run('''
        import xdm.torch
        xdm.torch.use(stack="budget key=%s limit=160M | pool chunk=8M | cuda_async",
                      ordinal=0)
        import torch
        with xdm.tag("weights"):
            # 32M of weights: fits the budget, with their gradients.
            model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                                        torch.nn.Linear(4096, 1024)).cuda()
        tags = tagged()
        refused = kind = None
        try:
            # 16384 rows: 256M of activations alone, past the 160M budget.
            big = torch.randn(16384, 1024, device="cuda")
            model(big).sum().backward()
        except torch.OutOfMemoryError as e:
            refused, kind = str(e), type(e).__name__
        big = None
        model.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        used_after = int(xdm.tree.show("0/budget/used"))
        # The process goes on: a smaller batch trains, kernels still run.
        small = torch.randn(256, 1024, device="cuda")
        loss = model(small).square().mean()
        loss.backward()
        torch.cuda.synchronize()
        report("RESULT", refused=refused, kind=kind, tags=tags, used_after=used_after,
               finite=bool(torch.isfinite(loss).item()),
               grad=float(model[0].weight.grad.abs().sum().item()),
               stats=xdm.torch.memory_stats(0),
               refusals=int(xdm.tree.show("0/budget/refusals")))
    ''' % budget_key)
    assert r["refused"] is not None, "a 256M activation fit a 160M budget"
    assert r["kind"] == "OutOfMemoryError"
    # xdm's sentence, as the budget wrote it.
    assert "out of budget" in r["refused"], r["refused"]
    assert "bytes requested" in r["refused"] and "remaining of limit" in r["refused"], r
    assert r["refusals"] >= 1 and r["stats"]["num_ooms"] >= 1
    # What the failed step held was given back: only the weights (and what
    # torch keeps, such as cuBLAS's workspace) stay counted.
    assert r["used_after"] < 64 << 20, r
    assert r["tags"].get("weights", 0) >= 32 << 20, r["tags"]
    assert r["finite"] and r["grad"] > 0


def test_switch_after_torch_allocated_is_refused():
    r = run('''
        import torch
        torch.zeros(1, device="cuda")
        import xdm.torch
        try:
            xdm.torch.use()
            err = None
        except xdm.InvalidArgument as e:
            err = str(e)
        report("RESULT", err=err, installed=xdm.torch.installed())
    ''')
    assert r["err"] and "before torch's first CUDA allocation" in r["err"], r
    assert r["installed"] is False


def test_bad_stack_is_refused_at_use():
    r = run('''
        import xdm.torch
        try:
            xdm.torch.use(stack="pool | no_such_module", ordinal=0)
            err = None
        except xdm.XdmError as e:
            err = (type(e).__name__, str(e))
        report("RESULT", err=err, installed=xdm.torch.installed())
    ''')
    assert r["err"] is not None and "no_such_module" in r["err"][1], r
    assert r["installed"] is False


def test_record_stream_keeps_memory_from_early_reuse():
    """A side stream reads a tensor after a long sleep; the tensor is freed
    and its memory filled with 7s on the default stream meanwhile.  With
    record_stream the fill waits for the side stream (it must read 1s);
    without it (the control) the reuse is seen, which shows the test would
    catch a missing hook."""
    r = run('''
        import xdm.torch
        xdm.torch.use(stack="pool | cuda_async", ordinal=0)
        import torch
        n = 4 << 20
        cycles = 1_000_000_000  # about half a second

        def trial(record, cycles):
            side = torch.cuda.Stream()
            x = torch.ones(n, device="cuda")
            address = x.data_ptr()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                torch.cuda._sleep(cycles)
                low, high = torch.aminmax(x)
            if record:
                x.record_stream(side)
            del x
            y = torch.empty(n, device="cuda")
            y.fill_(7.0)
            reused = y.data_ptr() == address
            torch.cuda.synchronize()
            return {"reused": reused, "low": low.item(), "high": high.item()}

        # Every kernel loaded first: CUDA loads a module at its first launch
        # (lazy loading), which waits for the device and would hide the race.
        trial(True, 1000)
        control = trial(False, cycles)
        recorded = trial(True, cycles)
        report("RESULT", hooks=xdm.torch.hooks(), control=control, recorded=recorded,
               waits=xdm.runtime(0).stats().waits_queued)
    ''')
    assert r["hooks"] is True, r["hooks"]
    # The control shows the race the hook must close.
    assert r["control"]["reused"] and r["control"]["high"] == 7.0, r["control"]
    assert r["recorded"]["low"] == 1.0 and r["recorded"]["high"] == 1.0, r["recorded"]
    assert r["waits"] > 0


def test_memory_fraction_sets_the_pool_max_and_empty_cache_trims():
    r = run('''
        import xdm.torch
        xdm.torch.use(stack="pool chunk=64M | cuda_async", ordinal=0)
        import torch
        rt = xdm.runtime(0)
        total = rt.device().total_bytes
        torch.cuda.set_per_process_memory_fraction(0.01)
        bounded = int(rt.layer_attr(0, "max"))
        refused = None
        try:
            torch.empty(int(total * 0.02), dtype=torch.uint8, device="cuda")
        except torch.OutOfMemoryError as e:
            refused = str(e)
        torch.cuda.set_per_process_memory_fraction(1.0)
        x = torch.empty(int(total * 0.02), dtype=torch.uint8, device="cuda")
        x.fill_(1)
        del x
        torch.cuda.synchronize()
        before = xdm.torch.memory_reserved(0)
        torch.cuda.empty_cache()
        after = xdm.torch.memory_reserved(0)
        report("RESULT", total=total, bounded=bounded, refused=refused,
               unbounded=int(rt.layer_attr(0, "max")), before=before, after=after,
               peak=xdm.torch.max_memory_reserved(0))
    ''')
    assert r["bounded"] == int(r["total"] * 0.01), r
    assert r["refused"] and "pool:" in r["refused"] and "max" in r["refused"], r
    assert r["unbounded"] == r["total"], r
    assert r["before"] >= int(r["total"] * 0.02) and r["after"] == 0, r
    assert r["peak"] >= int(r["total"] * 0.02)
