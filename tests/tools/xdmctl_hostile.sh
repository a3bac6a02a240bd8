#!/bin/sh
# SPDX-License-Identifier: MIT
#
# xdmctl_hostile.sh - xdmctl against budget segments of another user who
# means harm, as real users made for the run (xdmtest-*, removed at exit):
#
# - that user cuts its segment short and grows it back, over and over
#   (segment_churn), in a directory root shares with it, while root's
#   xdmctl ps, metrics, top -n 1 and a scraped serve read it, many times:
#   none of them dies (a reader that maps the file dies of SIGBUS);
# - its segment in a directory anyone can write (as /dev/shm) is not read,
#   and xdmctl says so on standard error once per run (ps, top's three
#   frames, serve's three scrapes), while root's own file there is read;
# - root's budget --set on its segment is done as that user: it works
#   where the owner may write the file (mode 0600, and 0644 in the open
#   directory), and fails with EACCES where only root could (mode 0400),
#   leaving the limit as it was (root itself would have written it);
# - a third user's --set on it is the kernel's EACCES, said (where that
#   user can run the build tree's xdmctl).
#
# Exit 0 pass, 1 fail, 77 skip (not root, or no useradd, setpriv or curl).
# Run by make check from the build directory, with XDM_TOP_BUILDDIR,
# XDM_TOP_SRCDIR, XDM_MODULE_PATH and XDM_CONFIG set by the harness.

set -u

if [ "$(id -u)" -ne 0 ]; then
	echo "SKIP: xdmctl_hostile makes two local users, which needs root"
	exit 77
fi
for tool in useradd userdel setpriv curl; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "SKIP: xdmctl_hostile needs $tool"
		exit 77
	fi
done
name_of_test=xdmctl-hostile
. "${XDM_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/tools/xdmctl_live_test.sh"

# ---- the users -------------------------------------------------------------
owner=xdmtest-hos-$$
other=xdmtest-oth-$$
churners=
users=
# Their processes end before they do: userdel refuses a user that runs one.
remove_users() {
	for p in $churners; do
		kill -9 "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	for u in $users; do
		userdel "$u" >/dev/null 2>&1 || echo "could not remove user $u (userdel $u)" >&2
	done
}
cleanup_first=remove_users
for u in "$owner" "$other"; do
	if ! useradd -r -M -s /usr/sbin/nologin "$u" >"$tmp/useradd.err" 2>&1; then
		echo "SKIP: useradd could not make the user $u: $(cat "$tmp/useradd.err")"
		exit 77
	fi
	users="$users $u"
done
owner_uid=$(id -u "$owner")
# as USER CMD...: CMD with USER's ids alone.
as() {
	u=$1
	shift
	setpriv --reuid="$u" --regid="$(id -g "$u")" --clear-groups -- "$@"
}

# The users reach what they run through $tmp alone: the build tree may be
# closed to them.
chmod 755 "$tmp" || fail "chmod $tmp"
cp "$top/tests/tools/segment_churn" "$tmp/segment_churn" || fail "cp segment_churn"
chmod 755 "$tmp/segment_churn"

# ---- a segment to copy: a real worker's, its one row filled into all --------
mkdir -m 755 "$tmp/make" "$tmp/shared" "$tmp/sets" "$tmp/check" || fail "mkdir"
mkdir -m 1777 "$tmp/open" || fail "mkdir"
chmod 1777 "$tmp/open"
XDM_BUDGET_DIR=$tmp/make
export XDM_BUDGET_DIR
start_worker w 4194304 3
cp "$tmp/make/xdm-budget-$key" "$tmp/good" || fail "cannot copy the segment"
exec 3>&-
wait "$wpid" || fail "the worker exited $?"
unset XDM_BUDGET_DIR
"$tmp/segment_churn" fill "$tmp/good" || fail "segment_churn fill"
chmod 644 "$tmp/good"
unset XDMCTL_SHM_DIR XDM_BUDGET_DIR

# place DIR MODE: a copy of the segment in DIR, the owner's, of MODE.
place() {
	cp "$tmp/good" "$1/xdm-budget-$key" && chown "$owner" "$1/xdm-budget-$key" &&
		chmod "$2" "$1/xdm-budget-$key" || fail "cannot place the segment in $1"
}

# ---- a file cut short under its readers ------------------------------------
place "$tmp/shared" 644
# setpriv execs the churner, so that $! is the churner (as() would run in a subshell).
setpriv --reuid="$owner" --regid="$(id -g "$owner")" --clear-groups -- \
	"$tmp/segment_churn" churn "$tmp/shared/xdm-budget-$key" >"$tmp/churn.out" 2>"$tmp/churn.err" &
churners="$churners $!"
wait_for "$tmp/churn.out" churning

# survive NAME EXPECTED CMD...: CMD exits EXPECTED (never by a signal).
survive() {
	n=$1
	want=$2
	shift 2
	"$@" >"$tmp/$n.txt" 2>"$tmp/$n.stderr"
	rc=$?
	[ "$rc" -lt 128 ] || fail "$n: xdmctl died of signal $((rc - 128)) reading a file cut short"
	[ "$rc" -eq "$want" ] || fail "$n: xdmctl exited $rc, not $want: $(cat "$tmp/$n.stderr")"
}
read_ok=0
for i in $(seq 60); do
	survive metrics 0 "$ctl" --dir "$tmp/shared" metrics
	grep -q "^xdm_budget_limit_bytes{" "$tmp/metrics.txt" && read_ok=$((read_ok + 1))
done
for i in $(seq 20); do
	survive ps 0 "$ctl" --dir "$tmp/shared" ps --timeout 1000
	survive top 0 "$ctl" --dir "$tmp/shared" top -n 1
done
"$ctl" --dir "$tmp/shared" serve --listen 127.0.0.1:0 --timeout 2000 \
	>"$tmp/serve.out" 2>"$tmp/serve.err" &
spid=$!
pids="$pids $spid"
wait_for "$tmp/serve.out" "listening on"
addr=$(sed -n 's/^xdmctl serve: listening on //p' "$tmp/serve.out")
for i in $(seq 40); do
	code=$(curl -sS --max-time 120 -o "$tmp/scrape.body" -w '%{http_code}' \
		"http://$addr/metrics" 2>"$tmp/curl.err")
	[ "$code" = 200 ] || fail "scrape $i: '$code' $(cat "$tmp/curl.err")"
done
kill -0 "$spid" 2>/dev/null || fail "serve died scraping a file cut short"
kill -TERM "$spid"
wait "$spid"
rc=$?
[ "$rc" -eq 0 ] || fail "serve exited $rc after scrapes of a file cut short"
for p in $churners; do
	kill -9 "$p"
	wait "$p" 2>/dev/null
done
churners=
grep -q . "$tmp/churn.err" && fail "segment_churn: $(cat "$tmp/churn.err")"
# Whole again (the churner was killed anywhere in its loop), it reads as
# the owner's segment, numbers and all.
place "$tmp/shared" 644
"$ctl" --dir "$tmp/shared" --json budget "$key" >"$tmp/whole.json" 2>"$tmp/whole.err" ||
	fail "budget over the segment at rest exited $?: $(cat "$tmp/whole.json" "$tmp/whole.err")"
grep -q '"limit": 67108864, "used": 4194304' "$tmp/whole.json" ||
	fail "the segment at rest reads $(cat "$tmp/whole.json")"

# ---- another user's file where anyone could have made it --------------------
place "$tmp/open" 644
cp "$tmp/good" "$tmp/open/xdm-budget-$key-root" || fail "cp"
sentence="$tmp/open/xdm-budget-$key is owned by user $owner (uid $owner_uid), neither you"
sentence="$sentence nor root, in a directory anyone can write: it is not read"
# said_once NAME: NAME's standard error says it once.
said_once() {
	[ "$(grep -cF -- "$sentence" "$tmp/$1.stderr")" -eq 1 ] ||
		fail "$1 does not say once that the file is not read: $(cat "$tmp/$1.stderr")"
}
survive open-ps 0 "$ctl" --dir "$tmp/open" ps --timeout 1000
said_once open-ps
skipped="^budget $key: /xdm-budget-$key is uid $owner_uid's, in a directory anyone can write"
grep -q "$skipped: not read" "$tmp/open-ps.txt" || fail "ps lists the skipped file as: $(cat "$tmp/open-ps.txt")"
grep -q "^budget $key-root: limit 64.0 MiB, used 4.0 MiB" "$tmp/open-ps.txt" ||
	fail "root's own file there is not read: $(cat "$tmp/open-ps.txt")"
survive open-top 0 "$ctl" --dir "$tmp/open" top -n 3 -d 0.1
said_once open-top
"$ctl" --dir "$tmp/open" serve --listen 127.0.0.1:0 --timeout 2000 \
	>"$tmp/open-serve.out" 2>"$tmp/open-serve.stderr" &
spid=$!
pids="$pids $spid"
wait_for "$tmp/open-serve.out" "listening on"
addr=$(sed -n 's/^xdmctl serve: listening on //p' "$tmp/open-serve.out")
for i in 1 2 3; do
	code=$(curl -sS --max-time 120 -o "$tmp/open-scrape.body" -w '%{http_code}' \
		"http://$addr/metrics" 2>"$tmp/curl.err")
	[ "$code" = 200 ] || fail "scrape $i of the open directory: '$code' $(cat "$tmp/curl.err")"
done
kill -TERM "$spid"
wait "$spid" || fail "serve exited $?"
said_once open-serve
grep -q "^# skipped $tmp/open/xdm-budget-$key: is uid $owner_uid's" "$tmp/open-scrape.body" ||
	fail "the scrape does not name the skipped file: $(cat "$tmp/open-scrape.body")"

# ---- root's --set, as the owner --------------------------------------------
# limit_of DIR: the limit of the segment in DIR, read by root from a copy
# of its own (the file may be one root does not read where it is).
limit_of() {
	cp "$1/xdm-budget-$key" "$tmp/check/xdm-budget-$key" || fail "cp"
	"$ctl" --dir "$tmp/check" --json budget "$key" 2>"$tmp/check.err" |
		sed -n 's/.*"limit": \([0-9]*\),.*/\1/p'
}
place "$tmp/sets" 600
survive set-own 0 "$ctl" --dir "$tmp/sets" budget "$key" --set 32M
grep -q "^budget $key: limit 64.0 MiB -> 32.0 MiB$" "$tmp/set-own.txt" ||
	fail "--set as the owner said: $(cat "$tmp/set-own.txt")"
[ "$(limit_of "$tmp/sets")" = 33554432 ] || fail "the limit is $(limit_of "$tmp/sets"), not 32M"
# Mode 0400: its owner may not write it, root may.  Done as the owner, it
# is refused; done as root, it would have gone through.
chmod 400 "$tmp/sets/xdm-budget-$key"
survive set-readonly 1 "$ctl" --dir "$tmp/sets" budget "$key" --set 16M
grep -q "cannot be opened for writing: Permission denied" "$tmp/set-readonly.stderr" ||
	fail "--set on a file its owner may not write: $(cat "$tmp/set-readonly.stderr")"
grep -q "user $owner (uid $owner_uid)" "$tmp/set-readonly.stderr" ||
	fail "the refusal does not name the owner: $(cat "$tmp/set-readonly.stderr")"
[ "$(limit_of "$tmp/sets")" = 33554432 ] ||
	fail "root wrote the limit itself: it is $(limit_of "$tmp/sets"), not 32M"
# Skipped for reading where anyone could have made it, set all the same.
survive set-open 0 "$ctl" --dir "$tmp/open" budget "$key" --set 48M
[ "$(limit_of "$tmp/open")" = 50331648 ] || fail "the open directory's limit is not 48M"

# ---- a user who is neither owner nor root ----------------------------------
chmod 600 "$tmp/sets/xdm-budget-$key"
if as "$other" test -x "$ctl" && as "$other" "$ctl" --version >/dev/null 2>&1; then
	as "$other" "$ctl" --dir "$tmp/sets" budget "$key" --set 8M \
		>"$tmp/set-other.txt" 2>"$tmp/set-other.stderr"
	rc=$?
	[ "$rc" -eq 1 ] || fail "another user's --set exited $rc: $(cat "$tmp/set-other.stderr")"
	# It cannot even read it (0600): the listing says so, as it always did.
	grep -q "cannot be opened: Permission denied (it is another user's budget)" \
		"$tmp/set-other.stderr" || fail "another user's --set: $(cat "$tmp/set-other.stderr")"
	other_checked=yes
else
	other_checked="no (the build tree is closed to $other)"
fi
[ "$(limit_of "$tmp/sets")" = 33554432 ] || fail "another user changed the limit"

echo "xdmctl_hostile: pass (a whole read in $read_ok of 60 metrics under churn;" \
	"another user's --set checked: $other_checked)"
exit 0
