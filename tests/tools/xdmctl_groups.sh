#!/bin/sh
# SPDX-License-Identifier: MIT
#
# xdmctl_groups.sh - xdmctl ps and budget against workers in groups and
# named containers, their budget in a directory of this run that both the
# workers and xdmctl find by $XDM_BUDGET_DIR (as containers sharing a
# directory do): ps shows each one's group and container; budget lists the
# groups, --group NAME shows one and --group NAME --set SIZE sets its
# limit (good sizes; bad ones and a group that is not there change
# nothing; a corrupt check word is not mended); a refusal by the group is
# counted; --dir, $XDMCTL_SHM_DIR and $XDM_BUDGET_DIR in their order.
# Where unshare(1) can make a pid namespace, a worker in one is shown with
# its own pid, found here by its namespace, and seen stopped.
#
# Exit 0 pass, 1 fail.  Run by make check from the build directory, with
# XDM_TOP_BUILDDIR, XDM_TOP_SRCDIR, XDM_MODULE_PATH and XDM_CONFIG set by
# the harness.

set -u

name_of_test=xdmctl-groups
. "${XDM_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/tools/xdmctl_live_test.sh"

# The segment is in a directory of this run (removed with $tmp), which
# xdmctl reads by $XDM_BUDGET_DIR when $XDMCTL_SHM_DIR is not set.
unset XDMCTL_SHM_DIR
XDM_BUDGET_DIR=$tmp/budgets
export XDM_BUDGET_DIR
mkdir "$XDM_BUDGET_DIR" || fail "mkdir"
segment=$XDM_BUDGET_DIR/xdm-budget-$key
MiB=1048576

# in_group GROUP GROUP_LIMIT CONTAINER: what the next worker is told ("" for
# none); start_worker's worker inherits it.
in_group() {
	unset XDM_BUDGET_GROUP XDM_BUDGET_GROUP_LIMIT XDM_BUDGET_CONTAINER
	[ -n "$1" ] && { XDM_BUDGET_GROUP=$1; export XDM_BUDGET_GROUP; }
	[ -n "$2" ] && { XDM_BUDGET_GROUP_LIMIT=$2; export XDM_BUDGET_GROUP_LIMIT; }
	[ -n "$3" ] && { XDM_BUDGET_CONTAINER=$3; export XDM_BUDGET_CONTAINER; }
	:
}

# Two in train (the first one's group limit stands), one in eval, one in none.
in_group train 32M ctr-a
start_worker a $((8 * MiB)) 3
a=$wpid
in_group train "" ctr-b
start_worker b $((4 * MiB)) 4
b=$wpid
in_group eval 16M ""
start_worker c $((2 * MiB)) 5
c=$wpid
in_group "" "" ""
start_worker d $((1 * MiB)) 6
d=$wpid

# cgroup(PID) in the checks: what a worker without a container name is
# shown in, its cgroup, read as the adaptor reads its own.
cg="
def cgroup(pid):
    lines = open('/proc/%d/cgroup' % pid).read().splitlines()
    v2 = [l.split(':', 2)[2] for l in lines if l.startswith('0::')]
    return (v2 or [lines[0].split(':', 2)[2]])[0][:127]
"
check "groups and containers" "$cg
assert b['path'] == '$segment', b['path']
assert b['used'] == 15 * 2**20 and b['limit'] == 64 * 2**20, b
assert (p[$a]['group'], p[$a]['container']) == ('train', 'ctr-a'), p[$a]
assert (p[$b]['group'], p[$b]['container']) == ('train', 'ctr-b'), p[$b]
assert (p[$c]['group'], p[$c]['container']) == ('eval', cgroup($c)), p[$c]
assert (p[$d]['group'], p[$d]['container']) == (None, cgroup($d)), p[$d]
assert sorted(g) == ['eval', 'train'], g
assert g['train'] == {'name': 'train', 'members': 2, 'limit': 32 * 2**20, 'used': 12 * 2**20,
                      'remaining': 20 * 2**20, 'peak': 12 * 2**20, 'refusals': 0}, g['train']
assert g['eval'] == {'name': 'eval', 'members': 1, 'limit': 16 * 2**20, 'used': 2 * 2**20,
                     'remaining': 14 * 2**20, 'peak': 2 * 2**20, 'refusals': 0}, g['eval']
"

"$ctl" ps >"$tmp/ps.txt" 2>&1 || fail "xdmctl ps exited $?"
grep -Eq "^ +$a +$a +live +8.0 MiB +xdm +budget_worker +train +ctr-a +-$" "$tmp/ps.txt" ||
	fail "ps does not show $a in train in ctr-a: $(cat "$tmp/ps.txt")"
grep -Eq "^ +$d +$d +live +1.0 MiB +xdm +budget_worker +- +" "$tmp/ps.txt" ||
	fail "ps does not show $d in no group: $(cat "$tmp/ps.txt")"

# ---- budget: the groups, one group -----------------------------------------
"$ctl" budget "$key" >"$tmp/budget.txt" 2>&1 || fail "xdmctl budget exited $?"
grep -q "^  segment  *$segment " "$tmp/budget.txt" || fail "budget: $(cat "$tmp/budget.txt")"
grep -q "^  groups  *2$" "$tmp/budget.txt" || fail "budget: $(cat "$tmp/budget.txt")"
grep -Eq "^ +train +2 +33554432 +12582912 +20971520 +12582912 +0$" "$tmp/budget.txt" ||
	fail "budget has no row for train: $(cat "$tmp/budget.txt")"
grep -Eq "^ +eval +1 +16777216 +2097152 +14680064 +2097152 +0$" "$tmp/budget.txt" ||
	fail "budget has no row for eval: $(cat "$tmp/budget.txt")"
"$ctl" budget "$key" --group train >"$tmp/train.txt" 2>&1 || fail "--group train exited $?"
grep -q "^budget $key group train$" "$tmp/train.txt" && grep -q "^  members  *2$" "$tmp/train.txt" &&
	grep -q "^  remaining  *20971520$" "$tmp/train.txt" ||
	fail "--group train said: $(cat "$tmp/train.txt")"
"$ctl" --json budget "$key" --group eval >"$tmp/eval.json" 2>&1 || fail "--group eval exited $?"
python3 - "$tmp/eval.json" "$key" <<'PY' || fail "--json --group eval: $(cat "$tmp/eval.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d == {"key": sys.argv[2], "name": "eval", "members": 1, "limit": 16 << 20,
             "used": 2 << 20, "remaining": 14 << 20, "peak": 2 << 20, "refusals": 0}, d
PY
"$ctl" budget "$key" --group nosuch >/dev/null 2>"$tmp/nosuch.err"
[ $? -eq 3 ] || fail "--group nosuch does not exit 3"
grep -q "budget $key has no group 'nosuch'" "$tmp/nosuch.err" || fail "$(cat "$tmp/nosuch.err")"

# ---- --group NAME --set SIZE -------------------------------------------------
"$ctl" budget "$key" --group train --set 24M >"$tmp/set.out" 2>&1 || fail "--set 24M exited $?"
grep -q "^budget $key group train: limit 32.0 MiB -> 24.0 MiB$" "$tmp/set.out" ||
	fail "--set said: $(cat "$tmp/set.out")"
unchanged="
assert g['train']['limit'] == 24 * 2**20, g['train']
assert g['eval']['limit'] == 16 * 2**20, g['eval']
assert b['limit'] == 64 * 2**20, b['limit']
"
check "--group train --set 24M" "$unchanged"
for bad in 12Q -1 "" 1.5.5G 100000000T "24M junk"; do
	"$ctl" budget "$key" --group train --set "$bad" >"$tmp/bad.out" 2>"$tmp/bad.err"
	rc=$?
	[ "$rc" -eq 2 ] || fail "--group train --set '$bad' exited $rc, not 2"
	grep -q "is not a size.*the limit is unchanged" "$tmp/bad.err" ||
		fail "--set '$bad' said: $(cat "$tmp/bad.err")"
	[ -s "$tmp/bad.out" ] && fail "--set '$bad' printed: $(cat "$tmp/bad.out")"
done
check "bad sizes change nothing" "$unchanged"
"$ctl" budget "$key" --group nosuch --set 1M >"$tmp/bad.out" 2>"$tmp/bad.err"
[ $? -eq 3 ] || fail "--group nosuch --set 1M does not exit 3"
grep -q "budget $key has no group 'nosuch'.*nothing is changed" "$tmp/bad.err" ||
	fail "$(cat "$tmp/bad.err")"
check "an unknown group changes nothing" "$unchanged"
"$ctl" --json budget "$key" --group eval --set 50% >"$tmp/set.json" 2>&1 ||
	fail "--group eval --set 50% exited $?"
check "--group eval --set 50%" "
s = json.load(open('$tmp/set.json'))
want = b['device_total'] * 50 // 100
assert b['device_total'] > 0 and abs(g['eval']['limit'] - want) <= 1, (g['eval'], want)
assert s == {'key': '$key', 'group': 'eval', 'limit_before': 16 * 2**20,
             'limit': g['eval']['limit']}, s
assert g['train']['limit'] == 24 * 2**20 and b['limit'] == 64 * 2**20
"

# ---- a refusal by the group ---------------------------------------------------
# eval gets 3M; c holds 2M of it, so 2M more is refused by the group (the
# device has room), and counted in the group's refusals and the device's.
"$ctl" budget "$key" --group eval --set 3M >/dev/null 2>&1 || fail "--set 3M exited $?"
in_group eval "" ""
"$worker" hold host "$stack" $((2 * MiB)) </dev/null >"$tmp/refused.out" 2>"$tmp/refused.err" &&
	fail "a worker of eval got 2M past its group's limit"
in_group "" "" ""
grep -q "group 'eval' refused" "$tmp/refused.err" || fail "$(cat "$tmp/refused.err")"
check "a group's refusal" "
assert g['eval']['refusals'] == 1 and b['refusals'] == 1, (g['eval'], b['refusals'])
assert g['eval']['members'] == 1 and g['eval']['used'] == 2 * 2**20, g['eval']
assert g['eval']['remaining'] == 2**20 and g['train']['refusals'] == 0, g
"

# A group check word that garbage overwrote: --set refuses to mend it (the
# word found by its value, ~limit, as xdmctl_ps.sh finds the device's).
flip() {
	python3 - "$segment" <<'PY' || fail "cannot find eval's check word"
import mmap, struct, sys
with open(sys.argv[1], "r+b") as f, mmap.mmap(f.fileno(), 0) as m:
    word = struct.pack("<Q", ~(3 << 20) & (2**64 - 1))
    at = m.find(word)
    if at < 0:
        word = struct.pack("<Q", ~(3 << 20) & (2**64 - 1) ^ 1)
        at = m.find(word)
    assert at >= 0 and m.find(word, at + 1) < 0
    m[at:at + 8] = struct.pack("<Q", struct.unpack("<Q", word)[0] ^ 1)
PY
}
flip
"$ctl" budget "$key" --group eval --set 8M >/dev/null 2>"$tmp/corrupt.err"
[ $? -eq 1 ] || fail "--set on a group with a bad check word does not exit 1"
grep -q "group eval does not match its check word" "$tmp/corrupt.err" ||
	fail "$(cat "$tmp/corrupt.err")"
check "a corrupt group is not changed" "assert g['eval']['limit'] == 3 * 2**20, g['eval']"
flip

# ---- where the segments are: --dir, XDMCTL_SHM_DIR, XDM_BUDGET_DIR ---------------
mkdir "$tmp/elsewhere" || fail "mkdir"
XDM_BUDGET_DIR= "$ctl" --dir "$XDM_BUDGET_DIR" ps >"$tmp/dir.txt" 2>&1 || fail "--dir exited $?"
grep -q "^budget $key: " "$tmp/dir.txt" || fail "--dir does not find the budget"
XDM_BUDGET_DIR= "$ctl" ps --dir="$XDM_BUDGET_DIR" >"$tmp/dir.txt" 2>&1 ||
	fail "ps --dir= exited $?"
grep -q "^budget $key: " "$tmp/dir.txt" || fail "ps --dir= does not find the budget"
XDMCTL_SHM_DIR=$tmp/elsewhere "$ctl" ps >"$tmp/dir.txt" 2>&1 || fail "ps exited $?"
grep -q "^no xdm budget on this machine$" "$tmp/dir.txt" ||
	fail "XDMCTL_SHM_DIR does not come before XDM_BUDGET_DIR: $(cat "$tmp/dir.txt")"
XDMCTL_SHM_DIR=$tmp/elsewhere "$ctl" --dir "$XDM_BUDGET_DIR" budget "$key" >/dev/null 2>&1 ||
	fail "--dir does not come before XDMCTL_SHM_DIR"
"$ctl" --dir "$tmp/none" ps >/dev/null 2>"$tmp/dir.err"
[ $? -eq 1 ] || fail "a --dir that is not there does not exit 1"
grep -q "cannot list $tmp/none" "$tmp/dir.err" || fail "$(cat "$tmp/dir.err")"
"$ctl" --dir= ps >/dev/null 2>&1
[ $? -eq 2 ] || fail "an empty --dir does not exit 2"
"$ctl" --dir >/dev/null 2>&1
[ $? -eq 2 ] || fail "--dir without a directory does not exit 2"

# ---- a worker in a pid namespace of its own ---------------------------------------
ns=no
if unshare --pid --fork --mount-proc --kill-child true 2>/dev/null; then
	ns=yes
	in_group train "" ctr-ns
	mkfifo "$tmp/ns.in" || fail "mkfifo"
	# --kill-child: the worker dies with unshare, which the cleanup kills.
	unshare --pid --fork --mount-proc --kill-child "$worker" hold host "$stack" $((2 * MiB)) \
		<"$tmp/ns.in" >"$tmp/ns.out" 2>"$tmp/ns.err" &
	u=$!
	pids="$pids $u"
	exec 7>"$tmp/ns.in"
	in_group "" "" ""
	wait_for "$tmp/ns.out" ready
	# The first process of a new namespace is its pid 1.
	check "a worker in a pid namespace" "
q = p[1]
assert q['container'] == 'ctr-ns' and q['group'] == 'train', q
assert q['here'] is False and q['pidns'] != p[$a]['pidns'], q
assert q['state'] == 'live' and q['bytes'] == 2 * 2**20, q
h = q['pid_here']
assert h, q
stat = open('/proc/%d/stat' % h).read()
assert int(stat[stat.rindex(')') + 2:].split()[1]) == $u, 'pid_here %d is no child of $u' % h
assert open('/proc/%d/status' % h).read().split('NSpid:')[1].split('\n')[0].split()[-1] == '1'
open('$tmp/ns.pid', 'w').write(str(h))
"
	h=$(cat "$tmp/ns.pid")
	"$ctl" ps >"$tmp/ps.txt" 2>&1 || fail "xdmctl ps exited $?"
	grep -Eq "^ +1 +$h +live +2.0 MiB +xdm +budget_worker +train +ctr-ns +-$" "$tmp/ps.txt" ||
		fail "ps does not show the worker of the namespace: $(cat "$tmp/ps.txt")"
	kill -STOP "$h"
	check "stopped in its namespace" "assert p[1]['state'] == 'stopped', p[1]"
	kill -CONT "$h"
	check "going on in its namespace" "assert p[1]['state'] == 'live', p[1]"
fi
echo "xdmctl_groups: pass (a pid namespace: $ns)"
exit 0
