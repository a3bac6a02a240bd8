#!/bin/sh
# tree_overhead.sh - what reading the whole introspection tree costs a
# running xdm-bench.
#
#   tests/tree_overhead.sh TRIALS BENCH-ARGS...     (from the build directory)
#
# Runs xdm-bench TRIALS times with its tree mounted and nobody reading it,
# and TRIALS times with tests/fuse_walk reading every file of the tree every
# 10 ms (100 walks a second when a walk fits in 10 ms), alternating the two
# so that drift hits both alike.  Prints, per bench result, the median over
# trials of the bench's own medians, quiet and read, and their ratio; and how
# many walks a second the reader really made.  Not a test: no timing is
# asserted anywhere; BENCHMARKS.md quotes its output.
#
# BENCH_CPUS and READER_CPUS, when set, are taskset CPU lists for the bench
# (and so its FUSE server thread) and for the reader, to keep the reader off
# the cores, and the hyperthread siblings, the bench runs on.
set -eu

if [ $# -lt 1 ]; then
	echo "usage: $0 TRIALS BENCH-ARGS..." >&2
	exit 2
fi
trials=$1
shift
top=${XDM_TOP_BUILDDIR:-$(pwd)}
walk=$top/tests/fuse_walk
mnt=$(mktemp -d /tmp/xdm-overhead.XXXXXX)
out=$(mktemp -d /tmp/xdm-overhead-out.XXXXXX)
trap 'rm -rf "$out"; rmdir "$mnt" 2>/dev/null || true' EXIT

i=1
while [ "$i" -le "$trials" ]; do
	for mode in quiet read; do
		wpid=
		if [ "$mode" = read ]; then
			(
				while [ ! -e "$mnt/version" ]; do sleep 0.01; done
				exec ${READER_CPUS:+taskset -c "$READER_CPUS"} \
					"$walk" --duration-s 3600 --interval-ms 10 "$mnt"
			) > "$out/walk-$i.txt" 2>&1 &
			wpid=$!
		fi
		${BENCH_CPUS:+taskset -c "$BENCH_CPUS"} \
			"$top/xdm-uninstalled" "$top/tools/xdm-bench" "$@" --mount "$mnt" --json \
			> "$out/$mode-$i.json" 2> "$out/$mode-$i.err" || {
			cat "$out/$mode-$i.err" >&2
			exit 1
		}
		if [ -n "$wpid" ]; then
			# The walker prints its summary on SIGTERM.
			kill -TERM "$wpid" 2>/dev/null || true
			wait "$wpid" 2>/dev/null || true
		fi
	done
	i=$((i + 1))
done

python3 - "$out" "$trials" <<'PY'
import json, statistics, sys, re
out, trials = sys.argv[1], int(sys.argv[2])
runs = {"quiet": [], "read": []}
for mode in runs:
    for i in range(1, trials + 1):
        with open(f"{out}/{mode}-{i}.json") as f:
            runs[mode].append(json.load(f))
def key(r):
    return (r["subject"], r["workload"], r["param"], r["threads"])
keys = [key(r) for r in runs["quiet"][0]["results"]]
print(f"{'subject':10} {'workload':8} {'param':>6} {'thr':>3} "
      f"{'quiet ns/op':>12} {'read ns/op':>12} {'read/quiet':>10}")
for k in keys:
    med = {}
    for mode in runs:
        vals = [r["median_ns"] for run in runs[mode] for r in run["results"] if key(r) == k]
        med[mode] = statistics.median(vals)
    print(f"{k[0]:10} {k[1]:8} {k[2]:>6} {k[3]:>3} {med['quiet']:12.1f} "
          f"{med['read']:12.1f} {med['read'] / med['quiet']:10.3f}")
for i in range(1, trials + 1):
    with open(f"{out}/walk-{i}.txt") as f:
        text = f.read().strip().splitlines()
    print(f"reader, trial {i}: {text[-1] if text else '(no summary)'}")
    for line in text[:-1][:3]:
        print(f"  {line}")
PY
