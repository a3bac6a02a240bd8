#!/bin/sh
# SPDX-License-Identifier: MIT
#
# xdmctl_snapshot.sh - xdmctl snapshot writes what PyTorch's memory viewer
# reads, checked without PyTorch: Python's pickle loads it, only opcodes
# that the viewer's own JavaScript unpickler knows are in it, and the
# snapshot is consumed the way the viewer consumes it.  Its "Active Memory
# Timeline" adds each alloc and takes away each free (a free_requested
# with its free_completed): that must reach the true peak that
# tests/tools/timeline_gen.py computed while simulating the program.  Its
# "Allocator State History" starts from the segments and undoes the
# events backwards: that must find every block it frees, inside a
# segment, and end with nothing.  Bad logs exit 2 naming FILE:LINE.
#
# Exit 0 pass, 1 fail, 77 skip (no xdmctl built, or no python3).  Run by
# make check with XDM_TOP_SRCDIR and XDM_TOP_BUILDDIR set.

set -u

name_of_test=xdmctl_snapshot
. "${XDM_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/tools/xdmctl_log_test.sh"

"$python" "$gen" "$tmp/log.csv" "$tmp/log.json" --rows 3000 --tags 6 --seed 5 ||
	fail "timeline_gen.py could not write log.csv"
header=$(head -n 1 "$tmp/log.csv")
run log.out snapshot "$tmp/log.csv" -o "$tmp/log.pickle"
[ "$rc" -eq 0 ] || fail "snapshot log.csv exited $rc"
[ -s "$tmp/log.out" ] && fail "snapshot -o also wrote on stdout"
[ -s "$tmp/err.log.out" ] && fail "snapshot wrote to stderr"

"$python" - "$tmp/log.pickle" "$tmp/log.json" <<'PY' || fail "the snapshot of log.csv is wrong (above)"
import json
import pickle
import pickletools
import sys

path, facts_path = sys.argv[1:]
with open(facts_path, encoding="utf-8") as f:
    facts = json.load(f)
with open(path, "rb") as f:
    raw = f.read()
snap = pickle.loads(raw)


def check(cond, what):
    if not cond:
        print("FAIL: %s: %s" % (path, what), file=sys.stderr)
        sys.exit(1)


# Only what MemoryViz.js's unpickler reads, and no batch of more than 1000.
known = {"PROTO", "EMPTY_DICT", "EMPTY_LIST", "MARK", "SETITEMS", "APPENDS", "BINUNICODE",
         "BININT1", "BININT2", "BININT", "LONG1", "NEWFALSE", "NEWTRUE", "BINPUT",
         "LONG_BINPUT", "BINGET", "LONG_BINGET", "STOP"}
ops = [op.name for op, _, _ in pickletools.genops(raw)]
check(set(ops) <= known, "opcodes the viewer cannot read: %r" % (set(ops) - known))
check(ops[0] == "PROTO" and ops[-1] == "STOP", "not a whole pickle")
check(set(snap) == {"segments", "device_traces"}, "keys %r" % sorted(snap))
traces = snap["device_traces"]
check(len(traces) == 1, "%d device traces for a log of device 0" % len(traces))
trace = traces[0]
actions = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "oom"}
tags = set()
last = 0
for e in trace:
    check(e["action"] in actions, "action %r" % e["action"])
    want = {"action", "size", "stream", "time_us", "frames",
            "device_free" if e["action"] == "oom" else "addr"}
    check(set(e) == want, "an event's keys %r" % sorted(e))
    check(e["time_us"] >= last, "time goes back at %r" % e)
    last = e["time_us"]
    check(len(e["frames"]) == 1 and set(e["frames"][0]) == {"filename", "line", "name"},
          "frames %r" % e["frames"])
    tags.add(e["frames"][0]["name"])
check(tags <= set(facts["tags"]), "frames name tags the log does not have: %r"
      % (tags - set(facts["tags"])))
check(sum(1 for e in trace if e["action"] == "oom") == sum(facts["failures"].values()),
      "oom events")

# The Active Memory Timeline: a free_requested and the free_completed
# right after it are one free; allocs add, frees take away.
events = []
for e in trace:
    if e["action"] == "free_completed" and events and \
       events[-1]["action"] == "free_requested" and events[-1]["addr"] == e["addr"]:
        events[-1] = dict(events[-1], action="free")
        continue
    events.append(e)
live, total, peak, allocs, frees = {}, 0, 0, 0, 0
for e in events:
    if e["action"] == "alloc":
        check(e["addr"] not in live, "alloc of a live address %#x" % e["addr"])
        live[e["addr"]] = e["size"]
        total += e["size"]
        peak = max(peak, total)
        allocs += 1
    elif e["action"] in ("free", "free_completed"):
        check(live.pop(e["addr"], None) == e["size"], "free of %#x does not match" % e["addr"])
        total -= e["size"]
        frees += 1
check(peak == facts["peak_bytes"], "the viewer's peak %d, the program's %d"
      % (peak, facts["peak_bytes"]))
check(allocs == facts["allocations"] and frees == facts["frees"],
      "%d allocs and %d frees, the program made %d and %d"
      % (allocs, frees, facts["allocations"], facts["frees"]))

# The segments: what was live at the end, each block in one of its own,
# adding up as the viewer's summary asserts.
segs = snap["segments"]
check(len(segs) == facts["live_blocks"], "%d segments, %d blocks left live"
      % (len(segs), facts["live_blocks"]))
check(sum(s["total_size"] for s in segs) == facts["live_end"], "the segments' bytes")
for s in segs:
    check(sum(b["size"] for b in s["blocks"]) == s["total_size"] == s["allocated_size"],
          "segment %r does not add up" % s)
    check(all(b["state"] == "active_allocated" for b in s["blocks"]), "block states")
check([(s["device"], s["address"]) for s in segs] ==
      sorted((s["device"], s["address"]) for s in segs), "segments out of order")

# The Allocator State History: from the segments, undo the events last
# first; every block undone was live, inside a segment; nothing is left.
blocks = {b["address"]: b["size"] for s in segs for b in s["blocks"]}
seg_at = {s["address"]: s["total_size"] for s in segs}
for e in reversed(trace):
    a = e.get("addr")
    if e["action"] == "alloc":
        check(blocks.pop(a, None) == e["size"], "undoing alloc %#x: not live" % a)
        check(seg_at.get(a) == e["size"], "undoing alloc %#x: no segment" % a)
    elif e["action"] == "free_completed":
        check(a not in blocks, "undoing free %#x: live already" % a)
        blocks[a] = e["size"]
    elif e["action"] == "segment_alloc":
        check(seg_at.pop(a, None) == e["size"], "undoing segment_alloc %#x" % a)
    elif e["action"] == "segment_free":
        seg_at[a] = e["size"]
check(not blocks and not seg_at, "%d blocks and %d segments before the first event"
      % (len(blocks), len(seg_at)))
PY

# ---- devices: a list per ordinal up to the last; a tag that is not UTF-8 --
printf '%s\n1,10,allocate,0x1000,256,0,2,a\377b,0\n1,11,allocate,0x2000,512,3,0,t,7\n1,12,free,0x1000,256,0,2,x,0\n' \
	"$header" >"$tmp/dev.csv"
run dev.out snapshot "$tmp/dev.csv" -o "$tmp/dev.pickle"
[ "$rc" -eq 0 ] || fail "snapshot dev.csv exited $rc"
"$python" - "$tmp/dev.pickle" <<'PY' || fail "the snapshot of dev.csv is wrong (above)"
import pickle
import sys

with open(sys.argv[1], "rb") as f:
    snap = pickle.load(f)
t = snap["device_traces"]
acts = [[e["action"] for e in d] for d in t]
ok = (acts == [["segment_alloc", "alloc"], [],
               ["segment_alloc", "alloc", "free_requested", "free_completed", "segment_free"]]
      and t[2][1]["frames"][0]["name"] == "a\ufffdb"
      and t[0][1]["frames"][0] == {"filename": "xdm", "line": 7, "name": "t"}
      and t[0][1]["stream"] == 3
      and [(s["device"], s["address"]) for s in snap["segments"]] == [(0, 0x2000)])
if not ok:
    print("FAIL: %r" % snap, file=sys.stderr)
    sys.exit(1)
PY

# ---- bad logs and outputs ------------------------------------------------
printf '%s\n1,10,allocate,0x1000,256,0,0,t,0\n1,11,free,0x2000,256,0,0,t,0\n' "$header" \
	>"$tmp/bad_free.csv"
printf 'thread,time\n' >"$tmp/bad_header.csv"
for bad in bad_free.csv:3 bad_header.csv:1; do
	file=${bad%:*}
	run bad snapshot "$tmp/$file" -o "$tmp/bad.pickle"
	[ "$rc" -eq 2 ] || fail "snapshot $file exited $rc, not 2"
	grep -q "^xdmctl: snapshot: $tmp/$bad: " "$tmp/err.bad" ||
		fail "snapshot $file does not name $bad: $(cat "$tmp/err.bad")"
	[ -e "$tmp/bad.pickle" ] && fail "snapshot $file left $tmp/bad.pickle behind"
done
run nodir snapshot "$tmp/log.csv" -o "$tmp/no/such/dir/s.pickle"
[ "$rc" -eq 1 ] || fail "-o into a missing directory exited $rc, not 1"
grep -q "cannot write $tmp/no/such/dir/s.pickle: " "$tmp/err.nodir" ||
	fail "-o into a missing directory: $(cat "$tmp/err.nodir")"
for args in "" "--nope $tmp/log.csv" "$tmp/log.csv $tmp/dev.csv" "$tmp/log.csv -o"; do
	# shellcheck disable=SC2086 # split on purpose
	run usage snapshot $args
	[ "$rc" -eq 2 ] || fail "snapshot $args exited $rc, not 2"
	[ -s "$tmp/err.usage" ] || fail "snapshot $args said nothing on stderr"
done

echo "PASS: xdmctl snapshot"
exit 0
