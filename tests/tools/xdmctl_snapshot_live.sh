#!/bin/sh
# SPDX-License-Identifier: MIT
#
# xdmctl_snapshot_live.sh - xdmctl snapshot of a live process, from its
# tree's chunks files: a holder (tests/tools/chunks_holder) keeps blocks of
# a pool and of plain host memory, some freed, with its tree mounted; the
# pickle of --pid must hold every chunk of both runtimes as a segment, its
# pieces as blocks that tile it, each live block inside exactly one
# active_allocated block and each freed one in an inactive block, the
# pool's reserved bytes as the sum of its segments; --chunks FILE must say
# the same of one file.  Then files that are not chunks files, each refused
# with FILE:LINE and exit 2 and nothing written, a few hundred random
# mangles of a good file that must never crash xdmctl, a FIFO and a stopped
# process that cost a timeout and not a hang, a file without end refused at
# its bound, and command lines that mix the sources.
#
# Exit 0 pass, 1 fail, 77 skip (no /dev/fuse or fusefs.so, or no python3).
# Run by make check with XDM_TOP_SRCDIR and XDM_TOP_BUILDDIR set.

set -u

name_of_test=xdmctl-snapshot-live
. "${XDM_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/tools/xdmctl_live_test.sh"

if [ "$tree" != yes ]; then
	echo "SKIP: no /dev/fuse or no fusefs.so: no tree to read"
	exit 77
fi
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3 to read the pickles"; exit 77; }
holder=$top/tests/tools/chunks_holder

# run NAME ARGS...: xdmctl, stdout to $tmp/NAME.out, stderr to $tmp/NAME.err,
# its exit status in $rc.
run() {
	name=$1
	shift
	"$ctl" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
	rc=$?
}

# ---- a holder with its tree ---------------------------------------------
mkfifo "$tmp/holder.in" || fail "mkfifo"
"$holder" "pool chunk=1M tcache=0 | host" "$tmp/mnt" <"$tmp/holder.in" \
	>"$tmp/holder.out" 2>"$tmp/holder.err" &
hpid=$!
pids="$pids $hpid"
exec 3>"$tmp/holder.in"
wait_for "$tmp/holder.out" ready
[ -r "$tmp/mnt/0/chunks" ] || fail "the holder's tree has no 0/chunks"

run live snapshot --pid "$hpid" -o "$tmp/live.pickle"
[ "$rc" -eq 0 ] || fail "snapshot --pid $hpid exited $rc"
[ -s "$tmp/live.out" ] && fail "snapshot --pid -o also wrote on stdout"
[ -s "$tmp/live.err" ] && fail "snapshot --pid wrote to stderr"
run one snapshot --chunks "$tmp/mnt/0/chunks" --device 2 -o "$tmp/one.pickle"
[ "$rc" -eq 0 ] || fail "snapshot --chunks exited $rc"
reserved=$(cat "$tmp/mnt/0/pool/reserved") || fail "no 0/pool/reserved"

python3 - "$tmp/live.pickle" "$tmp/one.pickle" "$tmp/holder.out" "$reserved" <<'PY' ||
import pickle
import pickletools
import sys

live_path, one_path, holder_path, reserved = sys.argv[1:]
reserved = int(reserved)


def check(cond, what):
    if not cond:
        print("FAIL: %s" % what, file=sys.stderr)
        sys.exit(1)


def load(path):
    raw = open(path, "rb").read()
    # Only what the viewer's JavaScript unpickler reads (as xdmctl_snapshot.sh).
    known = {"PROTO", "EMPTY_DICT", "EMPTY_LIST", "MARK", "SETITEMS", "APPENDS",
             "BINUNICODE", "BININT1", "BININT2", "BININT", "LONG1", "NEWFALSE", "NEWTRUE",
             "BINPUT", "LONG_BINPUT", "BINGET", "LONG_BINGET", "STOP"}
    ops = {op.name for op, _, _ in pickletools.genops(raw)}
    check(ops <= known, "%s: opcodes the viewer cannot read: %r" % (path, ops - known))
    return pickle.loads(raw)


blocks = []
for line in open(holder_path):
    w = line.split()
    if w[0] in ("live", "freed"):
        blocks.append((w[0], int(w[1], 16), int(w[2]), int(w[3]), w[4]))

snap = load(live_path)
check(set(snap) == {"segments", "device_traces"}, "keys %r" % sorted(snap))
check(snap["device_traces"] == [[]], "device_traces %r" % snap["device_traces"])
segs = snap["segments"]
seg_keys = {"device", "address", "total_size", "allocated_size", "active_size",
            "requested_size", "stream", "segment_type", "is_expandable", "frames", "blocks"}
last = None
for s in segs:
    check(set(s) == seg_keys, "a segment's keys %r" % sorted(s))
    check(s["device"] == 0 and s["is_expandable"] is False and s["frames"] == [], repr(s))
    check(last is None or last <= s["address"], "segments out of order")
    last = s["address"] + s["total_size"]
    at = s["address"]
    for b in s["blocks"]:
        check(set(b) == {"address", "size", "requested_size", "state", "frames"},
              "a block's keys %r" % sorted(b))
        check(b["address"] == at and b["size"] > 0, "segment %#x is not tiled" % s["address"])
        check(b["state"] in ("active_allocated", "inactive"), "state %r" % b["state"])
        at += b["size"]
    check(at == s["address"] + s["total_size"], "segment %#x is not tiled" % s["address"])
    active = sum(b["size"] for b in s["blocks"] if b["state"] == "active_allocated")
    check(s["allocated_size"] == s["active_size"] == s["requested_size"] == active,
          "segment %#x's sums" % s["address"])
    check(s["segment_type"] == ("large" if s["total_size"] > 2 << 20 else "small"),
          "segment %#x of %d bytes is %s" % (s["address"], s["total_size"], s["segment_type"]))


def holding(ptr):
    return [(s, b) for s in segs for b in s["blocks"]
            if b["address"] <= ptr < b["address"] + b["size"]]


pool_bytes = 0
for state, ptr, size, stream, runtime in blocks:
    h = holding(ptr)
    if state == "live":
        check(len(h) == 1, "live block %#x is in %d blocks" % (ptr, len(h)))
        s, b = h[0]
        check(b["state"] == "active_allocated", "live block %#x is %s" % (ptr, b["state"]))
        check(ptr + size <= b["address"] + b["size"], "live block %#x spills" % ptr)
        check(s["stream"] == stream, "live block %#x: stream %d" % (ptr, s["stream"]))
        if runtime != "0":
            # The plain host runtime: a segment of the block alone.
            check((s["address"], s["total_size"]) == (ptr, size), "block %#x alone" % ptr)
    else:
        check(len(h) == 1 and h[0][1]["state"] == "inactive", "freed %#x: %r" % (ptr, h))
active_blocks = [b for s in segs for b in s["blocks"] if b["state"] == "active_allocated"]
check(len(active_blocks) == sum(1 for b in blocks if b[0] == "live"),
      "%d active blocks for %d live ones" % (len(active_blocks),
                                             sum(1 for b in blocks if b[0] == "live")))
alone = [b[1] for b in blocks if b[4] != "0"]
check(sum(s["total_size"] for s in segs if s["address"] not in alone) == reserved,
      "the pool's segments are not its %d reserved bytes" % reserved)

one = load(one_path)
check(one["device_traces"] == [[], [], []], "--device 2: %r" % one["device_traces"])
pool_segs = [dict(s, device=2) for s in segs if s["address"] not in alone]
check(one["segments"] == pool_segs, "--chunks does not give the pool's segments")
PY
	fail "the live snapshot is wrong (above)"

# ---- a stopped process: a timeout, not a hang ----------------------------
kill -STOP "$hpid"
run stopped snapshot --pid "$hpid" --timeout 300 -o "$tmp/stopped.pickle"
kill -CONT "$hpid"
[ "$rc" -eq 1 ] || fail "snapshot --pid of a stopped process exited $rc, not 1"
grep -q "does not answer" "$tmp/stopped.err" ||
	fail "a stopped process: $(cat "$tmp/stopped.err")"
[ -e "$tmp/stopped.pickle" ] && fail "a stopped process left $tmp/stopped.pickle"
run nopid snapshot --pid 999999999 -o "$tmp/nopid.pickle"
[ "$rc" -eq 3 ] || fail "snapshot --pid of no tree exited $rc, not 3"
exec 3>&-
wait "$hpid" || fail "the holder exited $?: $(cat "$tmp/holder.err")"

# ---- files that are not chunks files -------------------------------------
good=$(printf 'chunk 0x10000 4096 stream 1\n  active 0x10000 1024\n  inactive 0x10400 3072\n')
bad() { # bad NAME LINE TEXT...: printf's TEXT into NAME, which must be refused at LINE
	file=$1
	line=$2
	shift 2
	# shellcheck disable=SC2059 # the format is the file
	printf "$@" >"$tmp/$file"
	run "bad-$file" snapshot --chunks "$tmp/$file" -o "$tmp/bad.pickle"
	[ "$rc" -eq 2 ] || fail "$file exited $rc, not 2"
	grep -q "^xdmctl: snapshot: $tmp/$file:$line: " "$tmp/bad-$file.err" ||
		fail "$file is not refused at line $line: $(cat "$tmp/bad-$file.err")"
	[ -e "$tmp/bad.pickle" ] && fail "$file left $tmp/bad.pickle behind"
}
bad words 1 'hello\n'
bad short 1 'chunk 0x10000 4096 stream 0\n  active 0x10000 1024\n  inactive 0x10400 2048\n'
bad gap 3 'chunk 0x10000 4096 stream 0\n  active 0x10000 1024\n  inactive 0x10500 3072\n'
bad past 2 'chunk 0x10000 4096 stream 0\n  active 0x10000 8192\n'
bad orphan 1 '  active 0x10000 1024\n'
bad empty 1 'chunk 0x10000 4096 stream 0\nchunk 0x20000 4096 stream 0\n  active 0x20000 4096\n'
bad cut 2 'chunk 0x10000 4096 stream 0\n  active 0x10000 4096'
bad upper 1 'chunk 0x1000A 4096 stream 0\n  active 0x1000A 4096\n'
bad huge 1 'chunk 0x10000 99999999999999999999 stream 0\n'
bad long_hex 1 'chunk 0x00000000000010000 4096 stream 0\n'
bad wrap 1 'chunk 0xfffffffffffff000 8192 stream 0\n'
bad zero 2 'chunk 0x10000 4096 stream 0\n  active 0x10000 0\n'
bad blank 2 'chunk 0x10000 4096 stream 0\n  active  0x10000 4096\n'
bad stream 1 'chunk 0x10000 4096 stream 4294967296\n'
bad nul 2 'chunk 0x10000 4096 stream 0\n  act\000ve 0x10000 4096\n'
bad trailing 3 "$good"' \n'
python3 -c 'print("chunk 0x10000 4096 stream 0 " + "x" * 500)' >"$tmp/long"
run long snapshot --chunks "$tmp/long" -o "$tmp/bad.pickle"
[ "$rc" -eq 2 ] && grep -q "$tmp/long:1: " "$tmp/long.err" || fail "a long line: rc $rc"

# An empty file is a runtime that holds nothing: no segment.
: >"$tmp/nothing"
run nothing snapshot --chunks "$tmp/nothing" -o "$tmp/nothing.pickle"
[ "$rc" -eq 0 ] || fail "an empty chunks file exited $rc"

# A few hundred mangles of a good file: refused (2) or read (0), never a crash.
python3 - "$tmp" <<'PY' || fail "mangled files (above)"
import os
import random
import subprocess
import sys

tmp = sys.argv[1]
ctl = os.path.join(os.environ["XDM_TOP_BUILDDIR"], "tools/xdmctl/xdmctl")
good = (b"chunk 0x10000 4096 stream 1\n  active 0x10000 1024\n  inactive 0x10400 3072\n"
        b"chunk 0x20000 8192 stream 0\n  inactive 0x20000 8192\n")
rng = random.Random(7)
for i in range(300):
    b = bytearray(good)
    for _ in range(rng.randint(1, 4)):
        kind = rng.randrange(4)
        at = rng.randrange(len(b))
        if kind == 0:
            b[at] = rng.randrange(256)
        elif kind == 1:
            del b[at:at + rng.randint(1, 8)]
        elif kind == 2:
            b[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        else:
            b = b[:at]
        if not b:
            b = bytearray(b"\n")
    path = os.path.join(tmp, "mangled")
    open(path, "wb").write(b)
    r = subprocess.run([ctl, "snapshot", "--chunks", path, "-o", path + ".pickle"],
                       capture_output=True, timeout=60)
    if r.returncode not in (0, 2):
        sys.exit("FAIL: %r: exit %d\n%s" % (bytes(b), r.returncode, r.stderr.decode()))
    if r.returncode == 2 and not r.stderr.startswith(("xdmctl: snapshot: %s:" % path).encode()):
        sys.exit("FAIL: %r: %s" % (bytes(b), r.stderr.decode()))
PY

# A FIFO that no one writes: a timeout, not a hang.
mkfifo "$tmp/fifo" || fail "mkfifo"
run fifo snapshot --chunks "$tmp/fifo" --timeout 300 -o "$tmp/fifo.pickle"
[ "$rc" -eq 1 ] && grep -q "not read within 300 ms" "$tmp/fifo.err" ||
	fail "a FIFO: rc $rc: $(cat "$tmp/fifo.err")"

# A regular file past the bound: refused by its size, before a byte moves
# (sparse: it takes no disk).
truncate -s 300M "$tmp/huge" || fail "truncate"
run huge snapshot --chunks "$tmp/huge" --timeout 5000 -o "$tmp/huge.pickle"
[ "$rc" -eq 2 ] && grep -q "huge: more than 256 MiB" "$tmp/huge.err" ||
	fail "a 300 MiB file: rc $rc: $(cat "$tmp/huge.err")"

# A file without end: refused at the bound, not read until memory runs out.
# 256 MiB go through a pipe and a buffer for it; a sanitizer's shadow
# memory makes that take minutes on a loaded machine, so the sanitizer
# builds leave this case to the plain one.
bin=$ctl
[ -f "$(dirname "$ctl")/.libs/xdmctl" ] && bin=$(dirname "$ctl")/.libs/xdmctl
if ldd "$bin" 2>/dev/null | grep -q 'lib[at]san'; then
	echo "note: /dev/zero case left to the build without sanitizers"
else
	run zero snapshot --chunks /dev/zero --timeout 120000 -o "$tmp/zero.pickle"
	[ "$rc" -eq 2 ] && grep -q "/dev/zero: more than 256 MiB" "$tmp/zero.err" ||
		fail "/dev/zero: rc $rc: $(cat "$tmp/zero.err")"
fi

# ---- command lines ------------------------------------------------------
printf '%s\n' "$good" >"$tmp/good"
for args in "--pid 1 --chunks $tmp/good" "$tmp/log.csv --pid 1" "--pid x" "--pid 0" \
	"--device 1" "--device 1 --pid 1" "--chunks $tmp/good --device 4096" "--timeout 5 $tmp/x.csv" \
	"--chunks"; do
	# shellcheck disable=SC2086 # split on purpose
	run usage snapshot $args -o "$tmp/usage.pickle"
	[ "$rc" -eq 2 ] || fail "snapshot $args exited $rc, not 2"
	[ -s "$tmp/usage.err" ] || fail "snapshot $args said nothing on stderr"
done
run good snapshot --chunks "$tmp/good" -o "$tmp/good.pickle"
[ "$rc" -eq 0 ] || fail "the good file exited $rc"

echo "PASS: xdmctl snapshot of a live process"
exit 0
