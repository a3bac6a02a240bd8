#!/bin/sh
# SPDX-License-Identifier: MIT
#
# bench_smoke.sh - xdm-bench runs every workload on the host stack, prints
# valid JSON and a table, leaves nothing outstanding, and says no clearly.
# On the host platform no driver anchors join the run (--anchors auto and
# off), and --anchors on says no, naming the driver, where there is none.
# The replay workload replays a log that a logging stack writes here, and
# the fragmentation figure is checked on a pool stack where pool.so exists.
# --devices spreads the threads workload over two host devices
# ("host devices=2"), each with its own runtime, and says no to what it
# cannot do.  --native runs the pair workload through the framework entry
# and refuses a handle it does not know or another workload.  -w ipc
# shares blocks with a second process of the bench, and says why where the
# stack's memory cannot be shared.
#
# Exit 0 pass, 1 fail, 77 skip (the binary was not built).  Run by make
# check from the build directory, with XDM_TOP_BUILDDIR, XDM_MODULE_PATH
# and XDM_CONFIG (a host-platform config) set by the harness.

set -u

top=${XDM_TOP_BUILDDIR:-.}
bench=$top/tools/bench/xdm-bench
if [ ! -x "$bench" ]; then
	echo "SKIP: $bench is not built"
	exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench_smoke.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

fail() {
	echo "FAIL: $*" >&2
	for f in "$tmp"/err*; do
		[ -s "$f" ] && { echo "--- $f" >&2; cat "$f" >&2; }
	done
	exit 1
}

# run NAME ARGS...: runs the bench, stdout to $tmp/NAME, stderr to
# $tmp/err.NAME, and leaves its exit status in $rc.
run() {
	name=$1
	shift
	"$bench" "$@" >"$tmp/$name" 2>"$tmp/err.$name"
	rc=$?
}

# ---- the main job, as JSON ---------------------------------------------
# Few iterations: the smoke test checks that every workload runs and
# accounts, not how fast (a 16 MiB pair under ThreadSanitizer takes ms).
iters=200
run all.json --stack host --platform host --workload all --iterations $iters --repeat 2 --json
[ "$rc" -eq 0 ] || fail "--workload all --json exited $rc, not 0"

if command -v python3 >/dev/null 2>&1; then
	python3 - "$tmp/all.json" "$iters" <<'PY' || fail "the JSON of --workload all is wrong (above)"
import json, sys

with open(sys.argv[1]) as f:
    doc = json.load(f)
iters = int(sys.argv[2])

def check(cond, what):
    if not cond:
        print("FAIL:", what, file=sys.stderr)
        sys.exit(1)

res = doc["results"]
for w, n in (("pair", 5), ("random", 1), ("threads", 3), ("streams", 1), ("cross", 1),
             ("replay", 0)):
    rows = [r for r in res if r["workload"] == w]
    check(len(rows) == n, "%d %s results, expected %d" % (len(rows), w, n))
for r in res:
    check(r["subject"] == "xdm", "subject %r" % r["subject"])
    check(r["ops"] > 0 and r["runs"] == 2, "ops/runs of %r" % r)
    check(r["median_ns"] > 0 and 0 < r["min_ns"] <= r["median_ns"], "times of %r" % r)
    check(r["ops_per_s"] > 0, "ops_per_s of %r" % r)
pair = [r for r in res if r["workload"] == "pair"]
check([r["bytes"] for r in pair] == [256, 4096, 65536, 1 << 20, 16 << 20],
      "pair sizes %r" % [r["bytes"] for r in pair])
check(all(r["ops"] == iters for r in pair), "--iterations %d not obeyed by pair" % iters)
rnd = [r for r in res if r["workload"] == "random"][0]
check(rnd["ops"] == iters, "random ops %r" % rnd["ops"])
check(256 <= rnd["peak_live_bytes"] and 1 <= rnd["peak_live_blocks"] <= iters,
      "random peak %r" % rnd)
thr = [r for r in res if r["workload"] == "threads"]
check([r["threads"] for r in thr] == [1, 4, 16], "thread counts %r" % thr)
check(all(r["ops"] == iters * r["threads"] for r in thr), "threads ops")
# no pool layer in a host stack: no fragmentation figure, and no complaint
check(rnd["peak_asked_bytes"] >= 256, "random peak_asked_bytes %r" % rnd)
check(rnd["peak_reserved_bytes"] is None and rnd["peak_reserved_over_live"] is None,
      "random reserved figure without a pool %r" % rnd)
stm = [r for r in res if r["workload"] == "streams"][0]
check(stm["streams"] == 16 and stm["param"] == "16 streams", "streams row %r" % stm)
check(stm["bytes"] == 65536 and stm["ops"] == iters * 16, "streams ops %r" % stm)
crs = [r for r in res if r["workload"] == "cross"][0]
check(crs["ops"] == iters and crs["from_stream"] == 0 and crs["to_stream"] == 1,
      "cross row %r" % crs)
check(crs["event_edge_ratio"] is None, "cross ratio without event_edge %r" % crs)
check(doc["skipped"] == [], "skipped on host %r" % doc["skipped"])
check(doc["replay"] is None, "replay without --replay %r" % doc["replay"])
check(doc["options"]["streams"] is None and doc["options"]["replay"] is None,
      "options %r" % doc["options"])

check(doc["device"]["platform"] == "host", "platform %r" % doc["device"])
# host platform, --anchors left at auto: the runtime alone, nothing to divide by
check(doc["options"]["anchors"] == "auto", "options.anchors %r" % doc["options"])
subj = doc["subjects"]
check(len(subj) == 1 and subj[0]["name"] == "xdm" and subj[0]["anchor"] is False,
      "subjects %r" % subj)
check(doc["ratios"] == [], "ratios on host %r" % doc["ratios"])
check(doc["event_edge"] is None, "event_edge on host %r" % doc["event_edge"])
check("host" in doc["stack"], "stack %r" % doc["stack"])
after = [c["after"] for c in doc["counters"]]
check(after == ["pair", "random", "threads", "streams", "cross"], "counters rows %r" % after)

fin = doc["final"]
check(len(fin) == 1 and fin[0]["subject"] == "xdm", "final %r" % fin)
c = fin[0]
check(c["blocks_outstanding"] == 0, "blocks_outstanding %d" % c["blocks_outstanding"])
check(c["bytes_outstanding"] == 0, "bytes_outstanding %d" % c["bytes_outstanding"])
check(c["xdm_bytes_outstanding"] == 0, "xdm_bytes_outstanding %d" % c["xdm_bytes_outstanding"])
check(c["allocs"] == c["frees"], "allocs %d != frees %d" % (c["allocs"], c["frees"]))
# warm-up + 2 runs of every pair size, every thread count, 16 streams, cross
least = 3 * iters * 5 + 3 * iters * (1 + 4 + 16) + 3 * iters * 16 + 3
check(c["allocs"] >= least, "allocs %d < %d" % (c["allocs"], least))
check(c["failures"] == 0, "failures %d" % c["failures"])
check(c["bytes_peak"] >= 16 << 20, "bytes_peak %d" % c["bytes_peak"])
check(doc["leak"] is False, "leak flag")
PY
else
	# Without python3: the same facts, by pattern.
	for w in pair random threads streams cross; do
		grep -q "\"workload\": \"$w\"" "$tmp/all.json" || fail "no $w result in the JSON"
	done
	final=$(sed -n '/"final"/{n;p;}' "$tmp/all.json")
	echo "$final" | grep -q '"bytes_outstanding": 0,' || fail "final bytes_outstanding: $final"
	echo "$final" | grep -q '"blocks_outstanding": 0,' || fail "final blocks_outstanding: $final"
	echo "$final" | grep -q '"xdm_bytes_outstanding": 0}' || fail "final xdm_bytes_outstanding: $final"
	allocs=$(echo "$final" | sed -n 's/.*"allocs": \([0-9]*\).*/\1/p')
	frees=$(echo "$final" | sed -n 's/.*"frees": \([0-9]*\).*/\1/p')
	[ -n "$allocs" ] && [ "$allocs" = "$frees" ] || fail "allocs $allocs != frees $frees"
	grep -q '"leak": false' "$tmp/all.json" || fail "leak flag"
	grep -q '"anchors": "auto"' "$tmp/all.json" || fail "options.anchors"
	grep -q '"ratios": \[\],' "$tmp/all.json" || fail "ratios on host"
	grep -q '"event_edge": null,' "$tmp/all.json" || fail "event_edge on host"
	grep -q '"anchor": true' "$tmp/all.json" && fail "an anchor subject on host"
fi
[ -s "$tmp/err.all.json" ] && fail "the JSON run wrote to stderr"

# ---- the same seed replays the same random workload --------------------
run seed1 --stack host --platform host --workload random --iterations 3000 --repeat 1 --seed 7 --json
[ "$rc" -eq 0 ] || fail "random --seed 7 exited $rc"
run seed2 --stack host --platform host --workload random --iterations 3000 --repeat 1 --seed 7 --json
[ "$rc" -eq 0 ] || fail "random --seed 7 (again) exited $rc"
p1=$(grep -o '"peak_live_bytes": [0-9]*, "peak_live_blocks": [0-9]*' "$tmp/seed1")
p2=$(grep -o '"peak_live_bytes": [0-9]*, "peak_live_blocks": [0-9]*' "$tmp/seed2")
[ -n "$p1" ] && [ "$p1" = "$p2" ] || fail "--seed 7 twice gave '$p1' and '$p2'"

# ---- the human table ---------------------------------------------------
run table --stack host --platform host --workload pair --sizes 4K,1M --iterations 1000 --repeat 1
[ "$rc" -eq 0 ] || fail "table mode exited $rc"
grep -q '^subject  *workload  *param  *ops  *median ns/op  *min ns/op  *ops/s (median)' "$tmp/table" ||
	fail "no table header in: $(cat "$tmp/table")"
grep -q '^xdm  *pair  *4K  *1000 ' "$tmp/table" || fail "no 4K row in: $(cat "$tmp/table")"
grep -q '^xdm  *pair  *1M  *1000 ' "$tmp/table" || fail "no 1M row in: $(cat "$tmp/table")"
grep -q '^stack  *host' "$tmp/table" || fail "no stack line in: $(cat "$tmp/table")"
grep -q '^xdm  *pair  *0  *0 ' "$tmp/table" || fail "no zero counters row in: $(cat "$tmp/table")"

# ---- streams and cross in the table; their skips -------------------------
run streams3 --stack host --platform host --workload streams,cross --streams 3 --iterations 300 \
	--repeat 1
[ "$rc" -eq 0 ] || fail "--workload streams,cross --streams 3 exited $rc"
grep -q '^xdm  *streams  *3 streams  *900 ' "$tmp/streams3" ||
	fail "no 3-stream row in: $(cat "$tmp/streams3")"
grep -q '^xdm  *cross  *0->1  *300 ' "$tmp/streams3" || fail "no cross row in: $(cat "$tmp/streams3")"
grep -q '^note: streams: ' "$tmp/streams3" || fail "no streams note in: $(cat "$tmp/streams3")"
grep -q '^note: xdm cross: ' "$tmp/streams3" || fail "no cross note in: $(cat "$tmp/streams3")"
[ -s "$tmp/err.streams3" ] && fail "streams,cross wrote to stderr"

# ---- --compare: a second stack beside the first, with its difference --------
run compare --stack host --platform host --compare "logging sink=null | host" --workload pair \
	--sizes 4K --iterations 300 --repeat 1
[ "$rc" -eq 0 ] || fail "--compare exited $rc"
grep -q '^xdm2  *pair  *4K  *300 ' "$tmp/compare" || fail "no xdm2 row in: $(cat "$tmp/compare")"
grep -q '^pair  *4K  *xdm2  *xdm ' "$tmp/compare" || fail "no xdm2/xdm ratio in: $(cat "$tmp/compare")"
grep -q '^note: xdm2 - xdm, pair 4K: [+-][0-9]' "$tmp/compare" ||
	fail "no difference note in: $(cat "$tmp/compare")"
run comparebad --stack host --platform host --compare "nosuchlayer | host" --workload pair \
	--iterations 10 --repeat 1
[ "$rc" -eq 1 ] || fail "--compare with a bad stack exited $rc, not 1"
grep -q 'compare' "$tmp/err.comparebad" || fail "a bad --compare stack was not named"

# ---- --native: pairs through the framework entry (host: NULL is its default stream)
run native --stack host --platform host --workload pair --sizes 4K --iterations 300 --repeat 1 \
	--native null
[ "$rc" -eq 0 ] || fail "--native null exited $rc"
grep -q '^native .* on the null handle' "$tmp/native" || fail "no native line in: $(cat "$tmp/native")"
grep -q '^xdm  *pair  *4K  *300 ' "$tmp/native" || fail "no xdm pair row in: $(cat "$tmp/native")"
run nativebad --stack host --platform host --workload pair --native sideways
[ "$rc" -eq 2 ] || fail "--native sideways exited $rc, not 2"
grep -q "'sideways' is not one of" "$tmp/err.nativebad" || fail "a bad --native was not named"
run nativerandom --stack host --platform host --workload random --native null
[ "$rc" -eq 2 ] || fail "--native with the random workload exited $rc, not 2"
grep -q 'pair workload only' "$tmp/err.nativerandom" || fail "--native -w random was not refused"

# free=sync answers no block-use tracking: cross is skipped with a note, not failed
run crosssync --stack "host free=sync" --platform host --workload cross --iterations 100 --repeat 1
[ "$rc" -eq 0 ] || fail "cross on free=sync exited $rc"
grep -q '^note: xdm cross: not run: .*tracking' "$tmp/crosssync" ||
	fail "no skip note for cross on free=sync: $(cat "$tmp/crosssync")"
grep -q '^xdm  *cross  *0->1 ' "$tmp/crosssync" && fail "cross ran on free=sync"

# ---- ipc: export here, open and close in a second process of the bench ----
run ipc --stack "host ipc=true" --platform host --workload ipc --sizes 4K,64K --iterations 20
[ "$rc" -eq 0 ] || fail "-w ipc exited $rc"
for call in export open close; do
	for size in 4K 64K; do
		grep -q "^xdm  *ipc  *$call $size  *20 " "$tmp/ipc" ||
			fail "no ipc $call $size row in: $(cat "$tmp/ipc")"
	done
done
grep -q '^xdm  *ipc  *0 ' "$tmp/ipc" || fail "no counters row after ipc in: $(cat "$tmp/ipc")"
# A stack whose memory cannot be shared: a failure that says why, not a hang.
run ipcprivate --stack host --platform host --workload ipc --sizes 4K --iterations 5
[ "$rc" -eq 1 ] || fail "-w ipc on private memory exited $rc, not 1"
grep -q 'xdm_ipc_export .* failed: .*ipc=true' "$tmp/err.ipcprivate" ||
	fail "-w ipc on private memory did not say why: $(cat "$tmp/err.ipcprivate")"

# ---- replay: a log written here by the logging adaptor -------------------
log=$tmp/alloc.csv
run logged --stack "logging path=$log | host" --platform host --workload random,threads \
	--threads 1,2 --iterations 200 --repeat 1
[ "$rc" -eq 0 ] || fail "the logging run exited $rc"
[ -s "$log" ] || fail "the logging run wrote no log at $log"
rows=$(($(wc -l <"$log") - 1))
run replay.json --stack host --platform host --replay "$log" --repeat 2 --json
[ "$rc" -eq 0 ] || fail "--replay exited $rc"
[ -s "$tmp/err.replay.json" ] && fail "--replay wrote to stderr"
if command -v python3 >/dev/null 2>&1; then
	python3 - "$tmp/replay.json" "$rows" <<'PY' || fail "the JSON of --replay is wrong (above)"
import json, sys

with open(sys.argv[1]) as f:
    doc = json.load(f)
rows = int(sys.argv[2])

def check(cond, what):
    if not cond:
        print("FAIL:", what, file=sys.stderr)
        sys.exit(1)

check(doc["options"]["workload"] == "replay", "workload %r" % doc["options"])
res = doc["results"]
check(len(res) == 1 and res[0]["workload"] == "replay", "results %r" % res)
r = res[0]
rp = doc["replay"]
check(rp["rows"] == rows, "replay rows %r, the log has %d" % (rp, rows))
# the logging run freed every block it took, and nothing failed
check(rp["allocations"] == rp["frees"] == rows // 2, "replay counts %r" % rp)
check(rp["left_live"] == 0 and rp["allocate_failures_skipped"] == 0, "replay %r" % rp)
check(rp["threads"] >= 2, "replay threads %r" % rp)
check(r["ops"] == rows and r["runs"] == 2 and r["param"] == "alloc.csv", "replay row %r" % r)
check(r["median_ns"] > 0 and r["peak_live_blocks"] == rp["peak_blocks"] >= 1, "replay %r" % r)
check(r["peak_asked_bytes"] == rp["peak_asked_bytes"] <= r["peak_live_bytes"], "peaks %r" % r)
check(r["peak_reserved_over_live"] is None, "reserved figure without a pool %r" % r)
c = doc["final"][0]
check(c["allocs"] == c["frees"] == 3 * rows // 2, "final %r" % c)
check(doc["leak"] is False, "leak flag")
PY
else
	grep -q '"workload": "replay"' "$tmp/replay.json" || fail "no replay result in the JSON"
	grep -q "\"rows\": $rows," "$tmp/replay.json" || fail "replay rows, not $rows"
fi
run replay.table --stack host --platform host --replay "$log" --repeat 1
[ "$rc" -eq 0 ] || fail "--replay (table) exited $rc"
grep -q "^xdm  *replay  *alloc.csv  *$rows " "$tmp/replay.table" ||
	fail "no replay row in: $(cat "$tmp/replay.table")"
grep -q "^note: replay $log: $rows rows" "$tmp/replay.table" ||
	fail "no replay note in: $(cat "$tmp/replay.table")"

# bad logs: one sentence naming FILE:LINE, exit 2, nothing on stdout
head -n 1 "$log" >"$tmp/bad_free.csv"
echo '7,1,free,0x1000,256,0,0,x,0' >>"$tmp/bad_free.csv"
printf 'thread,time
' >"$tmp/bad_header.csv"
head -n 2 "$log" >"$tmp/bad_row.csv"
echo '7,1,allocate,0x1000,256,0,0' >>"$tmp/bad_row.csv"
for bad in bad_free.csv:2 bad_header.csv:1 bad_row.csv:3; do
	file=${bad%:*}
	run bad.replay --stack host --platform host --replay "$tmp/$file" --repeat 1
	[ "$rc" -eq 2 ] || fail "--replay $file exited $rc, not 2"
	grep -q "$tmp/$bad: " "$tmp/err.bad.replay" ||
		fail "--replay $file does not name $bad: $(cat "$tmp/err.bad.replay")"
	[ "$(wc -l <"$tmp/err.bad.replay")" -eq 1 ] ||
		fail "--replay $file said more than one line: $(cat "$tmp/err.bad.replay")"
	[ -s "$tmp/bad.replay" ] && fail "--replay $file printed on stdout"
done

# ---- the fragmentation figure, where the pool module is built ------------
run pool.json --stack "pool | host" --platform host --workload random,replay --replay "$log" \
	--iterations 2000 --repeat 1 --json
if [ "$rc" -eq 1 ] && grep -q "pool" "$tmp/err.pool.json"; then
	echo "note: no pool module here: the peak reserved figure is not checked"
else
	[ "$rc" -eq 0 ] || fail "the pool stack exited $rc"
	if command -v python3 >/dev/null 2>&1; then
		python3 - "$tmp/pool.json" <<'PY' || fail "the pool's reserved figure is wrong (above)"
import json, sys

with open(sys.argv[1]) as f:
    doc = json.load(f)
for r in doc["results"]:
    f = r["peak_reserved_over_live"]
    # a pool holds at least what is handed out, which is at least what was asked
    if f is None or f < 1 or r["peak_reserved_bytes"] < r["peak_asked_bytes"]:
        print("FAIL: %s peak reserved %r over live %r" %
              (r["workload"], r["peak_reserved_bytes"], r["peak_asked_bytes"]), file=sys.stderr)
        sys.exit(1)
PY
	fi
fi

# ---- the guard: its quarantine is no leak ---------------------------------
# The guard holds freed blocks back on purpose; the bench's reap empties
# that quarantine (checked), so nothing is left outstanding and no warning
# is printed, over the host backend and over a pool (xdm-guard(7)).
for stack in "guard | host" "guard | pool | host"; do
	run guard.json --stack "$stack" --platform host --workload pair,threads --sizes 4K \
		--threads 1,4 --iterations 500 --repeat 2 --json
	if [ "$rc" -eq 1 ] && grep -q "pool" "$tmp/err.guard.json"; then
		echo "note: no pool module here: $stack is not run"
		continue
	fi
	[ "$rc" -eq 0 ] || fail "$stack exited $rc, not 0"
	grep -q "warning" "$tmp/err.guard.json" && fail "$stack: $(cat "$tmp/err.guard.json")"
	grep -q '"leak": false' "$tmp/guard.json" || fail "$stack: leak flag"
	grep -q '"xdm_bytes_outstanding": [1-9]' "$tmp/guard.json" &&
		fail "$stack: the stack still holds bytes after the reap"
done

# ---- --devices: threads over two host devices, a runtime each ------------
# Thread i runs on the (i mod 2)-th device: 1 thread leaves device 1 idle,
# 4 threads put 2 on each.  Each runtime counts what it served itself, so
# its allocs are the pairs of its own threads, warm-up included.
run devices.json --platform "host devices=2" --stack host --workload threads --devices 0,1 \
	--threads 1,4 --iterations 500 --repeat 2 --json
[ "$rc" -eq 0 ] || fail "--devices 0,1 --json exited $rc"
[ -s "$tmp/err.devices.json" ] && fail "--devices 0,1 --json wrote to stderr"
if command -v python3 >/dev/null 2>&1; then
	python3 - "$tmp/devices.json" <<'PY' || fail "the JSON of --devices is wrong (above)"
import json, sys

with open(sys.argv[1]) as f:
    doc = json.load(f)

def check(cond, what):
    if not cond:
        print("FAIL:", what, file=sys.stderr)
        sys.exit(1)

check(doc["options"]["devices"] == [0, 1], "options.devices %r" % doc["options"])
devs = doc["devices"]
check([d["ordinal"] for d in devs] == [0, 1], "devices %r" % devs)
check([d["uuid"] for d in devs] == ["686f7374-0000-4000-8000-%012x" % i for i in (0, 1)],
      "device uuids %r" % devs)
check(all(d["platform"] == "host" and d["stack"] == "host" for d in devs), "devices %r" % devs)
check(doc["device"]["ordinal"] == 0, "device %r" % doc["device"])
subj = doc["subjects"]
check(len(subj) == 1 and subj[0]["name"] == "xdm" and subj[0]["parts"] == ["xdm@0", "xdm@1"],
      "subjects %r" % subj)
res = doc["results"]
check([(r["workload"], r["threads"]) for r in res] == [("threads", 1), ("threads", 4)],
      "results %r" % res)
served = {0: 0, 1: 0}
for r in res:
    per = r["per_device"]
    check([p["ordinal"] for p in per] == [0, 1], "per_device ordinals %r" % per)
    check([p["subject"] for p in per] == ["xdm@0", "xdm@1"], "per_device names %r" % per)
    check(sum(p["threads"] for p in per) == r["threads"], "per_device threads %r" % r)
    check(sum(p["ops"] for p in per) == r["ops"] == 500 * r["threads"], "per_device ops %r" % r)
    for p in per:
        check(p["ops"] == 500 * p["threads"], "a device's ops %r" % p)
        check(abs(p["share"] - p["ops"] / r["ops"]) < 1e-6, "a device's share %r" % p)
        if p["threads"]:
            check(p["median_ns"] > 0 and 0 < p["min_ns"] <= p["median_ns"], "times %r" % p)
            check(p["ops_per_s"] > 0, "ops_per_s %r" % p)
        else:
            check(p["median_ns"] is None and p["ops_per_s"] is None, "idle device %r" % p)
        served[p["ordinal"]] += 3 * p["ops"]	# warm-up + 2 runs
check([p["threads"] for p in res[0]["per_device"]] == [1, 0], "1 thread %r" % res[0])
check([p["threads"] for p in res[1]["per_device"]] == [2, 2], "4 threads %r" % res[1])
fin = doc["final"]
check([c["subject"] for c in fin] == ["xdm@0", "xdm@1"], "final %r" % fin)
for d, c in enumerate(fin):
    check(c["allocs"] > 0, "device %d's runtime served nothing: %r" % (d, c))
    check(c["allocs"] == c["frees"] == served[d], "device %d served %r, its threads made %d"
          % (d, c, served[d]))
    check(c["blocks_outstanding"] == 0 and c["bytes_outstanding"] == 0, "final %r" % c)
check(sum(c["allocs"] for c in fin) == 3 * sum(r["ops"] for r in res), "the total %r" % fin)
check([c["subject"] for c in doc["counters"]] == ["xdm@0", "xdm@1"], "counters %r" % doc["counters"])
check(doc["leak"] is False, "leak flag")
PY
else
	grep -q '"per_device": \[{"subject": "xdm@0", "ordinal": 0' "$tmp/devices.json" ||
		fail "no per_device of xdm@0 in the JSON"
	grep -q '{"subject": "xdm@1", "ordinal": 1, "threads": 2, "ops": 1000' "$tmp/devices.json" ||
		fail "no share of xdm@1 in the JSON"
	grep -q '"leak": false' "$tmp/devices.json" || fail "--devices: leak flag"
fi

# The table, "all" finding both devices: the header names each, and each
# device's share follows its row.
run devices --platform "host devices=2" --stack host --workload threads --devices all \
	--threads 2 --iterations 300 --repeat 1
[ "$rc" -eq 0 ] || fail "--devices all exited $rc"
grep -q '^devices  *0,1: ' "$tmp/devices" || fail "no devices line in: $(cat "$tmp/devices")"
for d in 0 1; do
	grep -q "^device  *$d: host" "$tmp/devices" || fail "device $d is not named: $(cat "$tmp/devices")"
	grep -q "^uuid  *686f7374-0000-4000-8000-00000000000$d\$" "$tmp/devices" ||
		fail "no uuid of device $d in: $(cat "$tmp/devices")"
	grep -q "^xdm@$d  *threads  *1 thread  *300 " "$tmp/devices" ||
		fail "no share row of device $d in: $(cat "$tmp/devices")"
	grep -Eq "^xdm@$d  *threads  *0  *0  *[0-9]+  *600  *600  *0  *0\$" "$tmp/devices" ||
		fail "device $d's counters are not 600 pairs: $(cat "$tmp/devices")"
done
grep -q '^xdm  *threads  *2 threads  *600 ' "$tmp/devices" || fail "no threads row in: $(cat "$tmp/devices")"
grep -q '^note: threads on 2 devices: ' "$tmp/devices" || fail "no devices note in: $(cat "$tmp/devices")"

# A device the platform lacks is the runtime's refusal, naming it, exit 1.
run devices.bad --platform "host devices=2" --stack host --workload threads --devices 0,5 \
	--threads 2 --iterations 10 --repeat 1
[ "$rc" -eq 1 ] || fail "--devices 0,5 with devices=2 exited $rc, not 1"
grep -q 'device 5' "$tmp/err.devices.bad" || fail "--devices 0,5 does not name device 5: $(cat "$tmp/err.devices.bad")"
[ -s "$tmp/devices.bad" ] && fail "--devices 0,5 printed on stdout"
run devices.both --platform "host devices=2" --stack host --device 1 --devices 0,1
[ "$rc" -eq 2 ] || fail "--device 1 --devices 0,1 exited $rc, not 2"
grep -q -- '--devices' "$tmp/err.devices.both" || fail "--device with --devices: $(cat "$tmp/err.devices.both")"

# ---- no anchors on the host platform -----------------------------------
# auto adds the driver anchors only beside a cuda runtime; off never does.
for mode in off auto; do
	run anchors.$mode --stack host --platform host --workload pair --sizes 4K --iterations 500 \
		--repeat 1 --anchors "$mode"
	[ "$rc" -eq 0 ] || fail "--anchors $mode exited $rc"
	grep -q '^xdm  *pair  *4K  *500 ' "$tmp/anchors.$mode" ||
		fail "--anchors $mode: no xdm row in: $(cat "$tmp/anchors.$mode")"
	grep -Eq '^(cuMemAlloc|cuMemAllocAsync) |^anchor |^ratios|event_edge' "$tmp/anchors.$mode" &&
		fail "--anchors $mode on host measured an anchor: $(cat "$tmp/anchors.$mode")"
	[ -s "$tmp/err.anchors.$mode" ] && fail "--anchors $mode wrote to stderr"
done

# libcuda_state: present, absent or unknown: can this machine dlopen
# libcuda.so.1, as the anchors do?  python3's ctypes asks the dynamic
# loader itself; the ldconfig cache and LD_LIBRARY_PATH are the fallback.
libcuda_state() {
	if command -v python3 >/dev/null 2>&1 && python3 -c 'import ctypes' 2>/dev/null; then
		if python3 -c 'import ctypes; ctypes.CDLL("libcuda.so.1")' 2>/dev/null; then
			echo present
		else
			echo absent
		fi
		return
	fi
	old_ifs=$IFS
	IFS=:
	for d in ${LD_LIBRARY_PATH:-}; do
		[ -n "$d" ] && [ -e "$d/libcuda.so.1" ] && { IFS=$old_ifs; echo present; return; }
	done
	IFS=$old_ifs
	for ldc in ldconfig /sbin/ldconfig /usr/sbin/ldconfig; do
		if command -v "$ldc" >/dev/null 2>&1; then
			if "$ldc" -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
				echo present
			else
				echo absent
			fi
			return
		fi
	done
	echo unknown
}

# --anchors on without a driver is a refusal that names it, not a quiet run.
state=$(libcuda_state)
if [ "$state" = absent ]; then
	run anchors.on --stack host --platform host --workload pair --sizes 4K --iterations 500 \
		--repeat 1 --anchors on
	[ "$rc" -eq 1 ] || fail "--anchors on without libcuda.so.1 exited $rc, not 1"
	grep -q 'driver' "$tmp/err.anchors.on" ||
		fail "--anchors on does not mention the driver: $(cat "$tmp/err.anchors.on")"
	[ -s "$tmp/anchors.on" ] && fail "--anchors on without a driver printed on stdout"
else
	echo "note: libcuda.so.1 is $state here: the --anchors on refusal is not checked"
fi

# ---- the configured runtime, through --config --------------------------
if [ -n "${XDM_CONFIG:-}" ]; then
	run config --config "$XDM_CONFIG" --workload pair --sizes 256 --iterations 500 --repeat 1 --json
	[ "$rc" -eq 0 ] || fail "--config $XDM_CONFIG exited $rc"
	grep -q '"platform": "host"' "$tmp/config" || fail "--config did not run on host"
fi

# ---- saying no ---------------------------------------------------------
run bad --no-such-option
[ "$rc" -eq 2 ] || fail "an unknown option exited $rc, not 2"
grep -q 'no-such-option' "$tmp/err.bad" || fail "the unknown option is not named"
for args in "--sizes 4X" "--iterations ten" "--repeat 0" "--workload nope" "--threads 1,,4" \
	    "--device -1" "--stack host --config /dev/null" "--anchors maybe" "--streams 0" \
	    "--streams 257" "--workload pair,nope" "--workload replay" "--workload pair --replay x.csv" \
	    "--replay $tmp/no-such-file.csv" "--devices 0,0" "--devices 0,x" "--devices 64" \
	    "--devices 0,1 --workload pair" "--devices all --workload threads,cross"; do
	# shellcheck disable=SC2086 # split on purpose
	run bad $args
	[ "$rc" -eq 2 ] || fail "'$args' exited $rc, not 2"
	[ -s "$tmp/err.bad" ] || fail "'$args' said nothing on stderr"
done

run nomod --stack nosuchmodule
[ "$rc" -eq 1 ] || fail "--stack nosuchmodule exited $rc, not 1"
grep -q nosuchmodule "$tmp/err.nomod" || fail "the missing module is not named: $(cat "$tmp/err.nomod")"
[ -s "$tmp/nomod" ] && fail "--stack nosuchmodule printed on stdout"

run help --help
[ "$rc" -eq 0 ] && grep -q -- '--workload' "$tmp/help" || fail "--help"
run version --version
[ "$rc" -eq 0 ] && grep -q 'xdm-bench' "$tmp/version" || fail "--version"

echo "PASS: xdm-bench smoke"
exit 0
