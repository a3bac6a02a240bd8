#!/bin/sh
# SPDX-License-Identifier: MIT
#
# xdmctl_ps.sh - xdmctl ps and budget against live processes on one budget:
# two workers holding known bytes (one mounting its tree), an xdm-bench
# holding its runtime, then one worker stopped and one killed; --set with
# good and bad sizes, read back from the segment and from a tree; segments
# that are not budgets.
#
# Every process uses a budget key of this run only, and every check looks at
# that key only: other tests run beside this one and have budgets of their
# own.  Checks of trees are made only where /dev/fuse and fusefs.so exist.
#
# Exit 0 pass, 1 fail.  Run by make check from the build directory, with
# XDM_TOP_BUILDDIR, XDM_TOP_SRCDIR, XDM_MODULE_PATH and XDM_CONFIG set by
# the harness.

set -u

name_of_test=xdmctl-ps
. "${XDM_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/tools/xdmctl_live_test.sh"

MiB=1048576
start_worker a $((8 * MiB)) 3 "$tmp/mnt-%p"
a=$wpid
start_worker b $((4 * MiB)) 4
b=$wpid

# ---- two live workers --------------------------------------------------
check "two workers" "
assert b['limit'] == 64 * 2**20, b['limit']
assert b['used'] == 12 * 2**20, b['used']
assert b['nprocesses'] == 2
assert p[$a]['bytes'] == 8 * 2**20 and p[$b]['bytes'] == 4 * 2**20
assert p[$a]['state'] == 'live' and p[$b]['state'] == 'live'
assert p[$a]['command'] == 'budget_worker', p[$a]['command']
# Of xdmctl's own pid namespace: here, and the same pid here.
assert p[$a]['here'] is True and p[$a]['pid_here'] == $a, p[$a]
assert p[$b]['here'] is True and p[$b]['pid_here'] == $b, p[$b]
assert p[$a]['group'] is None and b['groups'] == [], b
assert p[$b]['mount'] is None
assert all(t['path'].startswith('$tmp/') for t in doc['trees']), doc['trees']
if '$tree' == 'yes':
    assert p[$a]['mount'] == '$tmp/mnt-$a', p[$a]['mount']
    t = [t for t in doc['trees'] if t['path'] == '$tmp/mnt-$a']
    assert t and t[0]['pid'] == $a and t[0]['budget'] is True, doc['trees']
"
"$ctl" ps >"$tmp/ps.txt" 2>&1 || fail "xdmctl ps exited $?"
grep -q "^budget $key: limit 64.0 MiB, used 12.0 MiB" "$tmp/ps.txt" ||
	fail "ps does not sum up the budget: $(cat "$tmp/ps.txt")"
# PID, then HERE: the same pid, the workers being of this pid namespace.
grep -Eq "^ +$a +$a +live +8.0 MiB +xdm +budget_worker +- +" "$tmp/ps.txt" ||
	fail "ps has no row for $a: $(cat "$tmp/ps.txt")"

# ---- an xdm-bench on the same budget ------------------------------------
if [ "$tree" = yes ]; then
	"$bench" --platform host --stack "$stack" -w pair -n 100 -r 1 --mount "$tmp/mnt-bench" \
		--hold 3600 >"$tmp/bench.out" 2>"$tmp/bench.err" &
else
	"$bench" --platform host --stack "$stack" -w pair -n 100 -r 1 \
		--hold 3600 >"$tmp/bench.out" 2>"$tmp/bench.err" &
fi
c=$!
pids="$pids $c"
wait_for "$tmp/bench.err" "holding the runtime"
check "a bench" "
assert b['nprocesses'] == 3
assert p[$c]['state'] == 'live' and p[$c]['bytes'] == 0, p[$c]
assert 'xdm-bench' in p[$c]['command'], p[$c]['command']
if '$tree' == 'yes':
    assert p[$c]['mount'] == '$tmp/mnt-bench', p[$c]['mount']
"

# ---- budget and --set ----------------------------------------------------
"$ctl" budget "$key" >"$tmp/budget.txt" 2>&1 || fail "xdmctl budget exited $?"
grep -q "limit *67108864" "$tmp/budget.txt" || fail "budget: $(cat "$tmp/budget.txt")"
grep -q "device *686f7374-0000-4000-8000-000000000000" "$tmp/budget.txt" ||
	fail "budget names no device: $(cat "$tmp/budget.txt")"
grep -q "processes *3: 3 live, 0 stopped, 0 dead" "$tmp/budget.txt" ||
	fail "budget: $(cat "$tmp/budget.txt")"
# A unique start of the key names it too.
"$ctl" budget --set 32M "${key%?}" >"$tmp/set.out" 2>&1 || fail "--set 32M exited $?"
grep -q "limit 64.0 MiB -> 32.0 MiB" "$tmp/set.out" || fail "--set said: $(cat "$tmp/set.out")"
check "--set 32M" "assert b['limit'] == 32 * 2**20, b['limit']"
if [ "$tree" = yes ]; then
	[ "$(cat "$tmp/mnt-$a/0/budget/limit")" = $((32 * MiB)) ] ||
		fail "the tree of $a says limit $(cat "$tmp/mnt-$a/0/budget/limit")"
fi
for bad in 12Q -1 "" 1.5.5G 100000000T "32M junk"; do
	"$ctl" budget "$key" --set "$bad" >"$tmp/bad.out" 2>"$tmp/bad.err"
	rc=$?
	[ "$rc" -eq 2 ] || fail "--set '$bad' exited $rc, not 2"
	grep -q "is not a size" "$tmp/bad.err" || fail "--set '$bad' said: $(cat "$tmp/bad.err")"
done
check "bad sizes change nothing" "assert b['limit'] == 32 * 2**20, b['limit']"
"$ctl" --json budget "$key" --set 50% >"$tmp/set.json" 2>&1 || fail "--set 50% exited $?"
check "--set 50%" "
want = b['device_total'] * 50 // 100
assert b['device_total'] > 0
# The host platform's device 0: 'host' in hex, then the ordinal.
assert b['device'] == '686f7374-0000-4000-8000-000000000000', b['device']
assert abs(b['limit'] - want) <= 1, (b['limit'], want)
s = json.load(open('$tmp/set.json'))
assert s == {'key': '$key', 'limit_before': 32 * 2**20, 'limit': b['limit']}, s
"
"$ctl" budget "$key" --set max >/dev/null 2>&1 || fail "--set max exited $?"
check "--set max" "assert b['limit'] == 2**64 - 1, b['limit']"
"$ctl" budget "$key" --set 64M >/dev/null 2>&1 || fail "--set 64M exited $?"
# A check word that garbage overwrote: --set refuses to mend the segment.
# The word is found by its value (~limit), not by an offset.
flip() {
	python3 - "/dev/shm/xdm-budget-$key" <<'PY' || fail "cannot find the check word"
import mmap, struct, sys
with open(sys.argv[1], "r+b") as f, mmap.mmap(f.fileno(), 0) as m:
    word = struct.pack("<Q", ~(64 << 20) & (2**64 - 1))
    at = m.find(word)
    if at < 0:
        word = struct.pack("<Q", ~(64 << 20) & (2**64 - 1) ^ 1)
        at = m.find(word)
    assert at >= 0 and m.find(word, at + 1) < 0
    m[at:at + 8] = struct.pack("<Q", struct.unpack("<Q", word)[0] ^ 1)
PY
}
flip
"$ctl" budget "$key" --set 16M >/dev/null 2>"$tmp/corrupt.err"
[ $? -eq 1 ] || fail "--set on a segment with a bad check word does not exit 1"
grep -q "does not match its check word" "$tmp/corrupt.err" || fail "$(cat "$tmp/corrupt.err")"
check "a corrupt segment is not changed" "assert b['limit'] == 64 * 2**20, b['limit']"
flip
"$ctl" budget "$key" --set 64M >/dev/null 2>&1 || fail "--set after the repair exited $?"

# ---- a stopped worker, a killed one --------------------------------------
kill -STOP "$a"
check "stopped" "assert p[$a]['state'] == 'stopped' and p[$a]['bytes'] == 8 * 2**20, p[$a]"
if [ "$tree" = yes ]; then
	grep -q "does not answer" "$tmp/ps.json" || fail "the stopped tree is not said to hang"
fi
kill -CONT "$a"
kill -9 "$b"
wait "$b" 2>/dev/null
check "killed" "
assert p[$b]['state'] == 'dead' and p[$b]['pid_here'] is None, p[$b]
assert p[$b]['bytes'] == 4 * 2**20 and p[$b]['mount'] is None, p[$b]
assert p[$a]['state'] == 'live'
assert b['used'] == 12 * 2**20, b['used']
"
"$ctl" ps >"$tmp/ps.txt" 2>&1 || fail "xdmctl ps exited $?"
# The command a dead process recorded in its slot stays readable.
grep -Eq "^ +$b +- +dead +4.0 MiB +xdm +budget_worker" "$tmp/ps.txt" ||
	fail "ps does not show $b dead: $(cat "$tmp/ps.txt")"
"$ctl" budget "$key" >"$tmp/budget.txt" 2>&1 || fail "xdmctl budget exited $?"
grep -q "processes *3: 2 live, 0 stopped, 1 dead" "$tmp/budget.txt" ||
	fail "budget: $(cat "$tmp/budget.txt")"

# ---- usage and what is not there -----------------------------------------
"$ctl" budget "no-such-key-$$" >/dev/null 2>"$tmp/none.err"
[ $? -eq 3 ] || fail "an unknown key does not exit 3"
grep -q "no budget has the key 'no-such-key-$$'" "$tmp/none.err" || fail "$(cat "$tmp/none.err")"
"$ctl" ps extra >/dev/null 2>&1
[ $? -eq 2 ] || fail "ps with an argument does not exit 2"
"$ctl" --bogus >/dev/null 2>&1
[ $? -eq 2 ] || fail "an unknown option does not exit 2"
"$ctl" frobnicate >/dev/null 2>&1
[ $? -eq 2 ] || fail "an unknown command does not exit 2"
"$ctl" --version | grep -q "^xdmctl (xdm) " || fail "--version"
"$ctl" help budget | grep -q -- "--set SIZE" || fail "help budget"

# A directory of segments that are not budgets (XDMCTL_SHM_DIR stands for
# /dev/shm): listed with the reason, never read as a budget, never changed.
mkdir "$tmp/shm"
head -c 100 /dev/zero >"$tmp/shm/xdm-budget-short"
: >"$tmp/shm/not-a-budget"
# A FIFO is never opened: the open would wait for a writer forever.
mkfifo "$tmp/shm/xdm-budget-fifo" || fail "mkfifo"
XDMCTL_SHM_DIR=$tmp/shm "$ctl" ps >"$tmp/shm.out" 2>&1 || fail "ps over bad segments exited $?"
grep -q "budget short: /xdm-budget-short is a file of 100 bytes, not a segment" "$tmp/shm.out" ||
	fail "ps over a bad segment said: $(cat "$tmp/shm.out")"
grep -q "budget fifo: /xdm-budget-fifo is no plain file" "$tmp/shm.out" ||
	fail "ps over a FIFO said: $(cat "$tmp/shm.out")"
rm -f "$tmp/shm/xdm-budget-fifo"
grep -q "not-a-budget" "$tmp/shm.out" && fail "ps listed a file that is no budget's"
XDMCTL_SHM_DIR=$tmp/shm "$ctl" budget short --set 1M >/dev/null 2>"$tmp/shm.err"
[ $? -eq 1 ] || fail "--set on a bad segment does not exit 1"
[ "$(wc -c <"$tmp/shm/xdm-budget-short")" -eq 100 ] || fail "--set changed a bad segment"
XDMCTL_SHM_DIR=$tmp/shm "$ctl" budget >/dev/null 2>&1
[ $? -eq 1 ] || fail "budget of an unreadable segment does not exit 1"
XDMCTL_SHM_DIR=$tmp/empty "$ctl" ps >/dev/null 2>&1
[ $? -eq 1 ] || fail "a missing segment directory does not exit 1"
echo "xdmctl_ps: pass (trees checked: $tree)"
exit 0
