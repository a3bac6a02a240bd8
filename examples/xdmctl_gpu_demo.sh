#!/bin/bash
# SPDX-License-Identifier: MIT
#
# xdmctl_gpu_demo.sh OUTDIR - xdmctl on a GPU, with real processes: a
# PyTorch "server" holding its weights (serving its tree), a PyTorch
# training run logging every allocation with tags, and an xdm-bench, all
# on the one budget of the GPU (keyed by its UUID).  While they run it
# saves `xdmctl ps`, its JSON and two frames of `xdmctl top`; after, the
# training run's log as `xdmctl timeline` SVG and HTML.
#
# Run from a configured and built tree on a machine with a GPU and torch:
#   bash ../examples/xdmctl_gpu_demo.sh /tmp/demo
set -u

out=${1:?usage: xdmctl_gpu_demo.sh OUTDIR}
rm -rf "$out"
mkdir -p "$out"
top=$(pwd)
src=${XDM_TOP_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
export XDM_MODULE_PATH=$top/backends/.libs:$top/adaptors/.libs:$top/fusefs/.libs
export PYTHONPATH=$src/python XDM_LIBRARY=$top/.libs/libxdm.so
export XDM_TORCH_LIBRARY=$top/frameworks/torch/.libs/libxdm-torch.so
unset XDM_CONFIG
pids=
trap 'kill $pids 2>/dev/null; wait 2>/dev/null' EXIT

# The server: 6 GiB of weights, held until killed; its tree at /tmp/xdm-server.
XDM_MOUNT=/tmp/xdm-server python3 - >"$out/server.log" 2>&1 <<'PY' &
import time, xdm, xdm.torch
xdm.torch.use(stack="budget limit=90% | pool | cuda_async")
import torch
with xdm.tag("weights"):
    w = [torch.empty(256 << 20, dtype=torch.uint8, device="cuda") for _ in range(24)]
print("ready", flush=True)
time.sleep(600)
PY
pids="$pids $!"

# The training run: a small MLP, its phases tagged, every allocation logged;
# its tree at /tmp/xdm-train.
XDM_MOUNT=/tmp/xdm-train python3 - "$out" >"$out/train.log" 2>&1 <<'PY' &
import sys, time, xdm, xdm.torch
out = sys.argv[1]
xdm.torch.use(stack="budget limit=90%% | logging path=%s/train-%%p.csv | pool | cuda_async" % out)
import torch
torch.manual_seed(0)
with xdm.tag("parameters"):
    model = torch.nn.Sequential(*[m for _ in range(8) for m in
                                  (torch.nn.Linear(4096, 4096), torch.nn.GELU())]).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(40):
    with xdm.tag("data"):
        x = torch.randn(2048 + 256 * (step % 4), 4096, device="cuda")
    with xdm.tag("forward"):
        loss = model(x).square().mean()
    with xdm.tag("backward"):
        loss.backward()
    with xdm.tag("optimizer"):
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    if step == 2:
        print("training", flush=True)
    time.sleep(0.05)
print("trained, loss %.6g" % loss.item(), flush=True)
PY
train=$!
pids="$pids $train"

# The bench: random churn on the same budget, its tree at /tmp/xdm-bench.
tools/bench/xdm-bench --stack "budget limit=90% | pool | cuda_async" -w random -n 1000000 -r 600 \
	--anchors off --mount /tmp/xdm-bench >"$out/bench.log" 2>&1 &
pids="$pids $!"

until grep -q ready "$out/server.log" 2>/dev/null; do sleep 0.2; done
until grep -q training "$out/train.log" 2>/dev/null; do sleep 0.2; done
tools/xdmctl/xdmctl ps >"$out/ps.txt" 2>&1
tools/xdmctl/xdmctl --json ps >"$out/ps.json" 2>&1
tools/xdmctl/xdmctl top -n 2 -d 1 >"$out/top.txt" 2>&1
tools/xdmctl/xdmctl budget >"$out/budget.txt" 2>&1
wait "$train"
for f in "$out"/train-*.csv; do
	/usr/bin/time -f "timeline: %e s, %M KiB" tools/xdmctl/xdmctl timeline "$f" -o "$out/timeline.svg" \
		2>"$out/timeline.time"
	tools/xdmctl/xdmctl timeline "$f" --html -o "$out/timeline.html"
	wc -l "$f" >"$out/rows.txt"
	gzip -c "$f" >"$out/train.csv.gz"
done
cat "$out/ps.txt" "$out/top.txt" "$out/timeline.time" "$out/rows.txt"
