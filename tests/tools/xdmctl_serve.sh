#!/bin/sh
# SPDX-License-Identifier: MIT
#
# xdmctl_serve.sh - xdmctl metrics and xdmctl serve against live workers in
# groups (one refused by its group, one killed, one in a container whose
# name needs escaping): the metrics say what `xdmctl --json ps` says
# (tests/tools/metrics_check.py), pass `promtool check metrics` where
# promtool is installed, and change nothing in the segment; an unreadable
# segment is a comment.  serve answers GET and HEAD /metrics with the same
# text, 404 another path, 405 another method, 400 garbage, 505 HTTP/2, 408
# a client too slow (and then the next client), refuses a bad --listen
# (exit 2) and a port in use (exit 1), and exits 0 on SIGTERM and SIGINT.
#
# Exit 0 pass, 1 fail.  Run by make check from the build directory, with
# XDM_TOP_BUILDDIR, XDM_TOP_SRCDIR, XDM_MODULE_PATH and XDM_CONFIG set by
# the harness.

set -u

if ! command -v curl >/dev/null 2>&1; then
	echo "SKIP: curl is not installed (tests/install-deps.sh installs it)"
	exit 77
fi
name_of_test=xdmctl-serve
. "${XDM_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/tools/xdmctl_live_test.sh"
srcdir=${XDM_TOP_SRCDIR:-$(dirname "$0")/../..}

# The segment is in a directory of this run, which xdmctl reads by
# $XDM_BUDGET_DIR: the metrics hold this run's budget and nothing else.
unset XDMCTL_SHM_DIR
XDM_BUDGET_DIR=$tmp/budgets
export XDM_BUDGET_DIR
mkdir "$XDM_BUDGET_DIR" || fail "mkdir"
segment=$XDM_BUDGET_DIR/xdm-budget-$key
MiB=1048576

promtool=no
command -v promtool >/dev/null 2>&1 && promtool=yes
# promtool_ok FILE: promtool's verdict on FILE, where there is a promtool.
promtool_ok() {
	[ "$promtool" = yes ] || return 0
	promtool check metrics <"$1" >"$tmp/promtool.out" 2>&1 ||
		fail "promtool check metrics on $1: $(cat "$tmp/promtool.out")"
}

# A container name with a quote, a backslash, a newline and a byte that is
# not UTF-8: the label must escape the first three and replace the last.
odd=$(printf 'ctr "a" \\ b\nx\377')
XDM_BUDGET_GROUP=train XDM_BUDGET_GROUP_LIMIT=32M XDM_BUDGET_CONTAINER=$odd
export XDM_BUDGET_GROUP XDM_BUDGET_GROUP_LIMIT XDM_BUDGET_CONTAINER
start_worker a $((8 * MiB)) 3
a=$wpid
XDM_BUDGET_GROUP=eval XDM_BUDGET_GROUP_LIMIT=3M XDM_BUDGET_CONTAINER=ctr-c
start_worker c $((2 * MiB)) 4
c=$wpid
# Refused by eval: 2M past the 1M it has left.
"$worker" hold host "$stack" $((2 * MiB)) </dev/null >"$tmp/refused.out" 2>"$tmp/refused.err" &&
	fail "a worker of eval got 2M past its group's limit"
grep -q "group 'eval' refused" "$tmp/refused.err" || fail "$(cat "$tmp/refused.err")"
unset XDM_BUDGET_GROUP XDM_BUDGET_GROUP_LIMIT XDM_BUDGET_CONTAINER
start_worker b $((4 * MiB)) 5
b=$wpid
kill -9 "$b"
wait "$b" 2>/dev/null

# ---- xdmctl metrics ------------------------------------------------------
cp "$segment" "$tmp/segment.before" || fail "cannot copy the segment"
"$ctl" metrics >"$tmp/metrics.txt" 2>"$tmp/metrics.err" || fail "xdmctl metrics exited $?"
cmp -s "$segment" "$tmp/segment.before" || fail "xdmctl metrics changed the segment"
"$ctl" --json ps >"$tmp/ps.json" 2>"$tmp/ps.err" || fail "xdmctl --json ps exited $?"
python3 "$srcdir/tests/tools/metrics_check.py" "$tmp/metrics.txt" "$tmp/ps.json" "$key" ||
	fail "the metrics do not say what ps says"
promtool_ok "$tmp/metrics.txt"
check "what the workers did" "
assert p[$b]['state'] == 'dead' and p[$b]['bytes'] == 4 * 2**20, p[$b]
assert g['eval']['refusals'] == 1 and b['refusals'] == 1, (g, b)
assert g['train']['used'] == 8 * 2**20 and g['train']['limit'] == 32 * 2**20, g
"
grep -q "^xdm_process_held_bytes{.*,pid=\"$a\",.*,container=\"ctr \\\\\"a\\\\\" \\\\\\\\ b\\\\nx$(printf '\357\277\275')\",group=\"train\",command=\"budget_worker\",via=\"xdm\"} 8388608$" \
	"$tmp/metrics.txt" || fail "the container of $a is not escaped: $(grep "pid=\"$a\"" "$tmp/metrics.txt")"
grep -q "^xdm_process_live{.*,pid=\"$b\",.*} 0$" "$tmp/metrics.txt" ||
	fail "$b is not dead in the metrics"
grep -q "^xdm_budget_group_refusals_total{.*,group=\"eval\"} 1$" "$tmp/metrics.txt" ||
	fail "eval's refusal is not counted"

# A segment that cannot be read is a comment, and the rest goes on.
mkdir "$tmp/bad" || fail "mkdir"
head -c 100 /dev/zero >"$tmp/bad/xdm-budget-short"
"$ctl" --dir "$tmp/bad" metrics >"$tmp/bad.txt" 2>"$tmp/bad.err" ||
	fail "metrics over a bad segment exited $?"
grep -q "^# skipped $tmp/bad/xdm-budget-short: is a file of 100 bytes, not a segment" \
	"$tmp/bad.txt" || fail "metrics over a bad segment said: $(cat "$tmp/bad.txt")"
grep -q "^xdm_" "$tmp/bad.txt" && fail "metrics of a bad segment: $(cat "$tmp/bad.txt")"
promtool_ok "$tmp/bad.txt"
"$ctl" --dir "$tmp/none" metrics >/dev/null 2>&1
[ $? -eq 1 ] || fail "metrics of a directory that is not there does not exit 1"
"$ctl" --json metrics >/dev/null 2>&1
[ $? -eq 2 ] || fail "metrics --json does not exit 2"

# ---- xdmctl serve ----------------------------------------------------------
# Each server gives a client 2 s to send its request (the slow client's 408).
start_serve serve 127.0.0.1:0 2000
url=http://$addr/metrics
# status NAME CURL-ARGS...: the status code of a request, its head in
# $tmp/NAME.head and its body in $tmp/NAME.body.
status() {
	n=$1
	shift
	curl -sS --max-time 120 -D "$tmp/$n.head" -o "$tmp/$n.body" -w '%{http_code}' "$@" \
		2>"$tmp/$n.curl.err" || fail "curl $*: $(cat "$tmp/$n.curl.err")"
}

[ "$(status get "$url")" = 200 ] || fail "GET /metrics: $(cat "$tmp/get.head")"
tr -d '\r' <"$tmp/get.head" >"$tmp/get.h"
grep -qi "^content-type: text/plain; version=0.0.4" "$tmp/get.h" || fail "$(cat "$tmp/get.h")"
grep -qi "^connection: close$" "$tmp/get.h" || fail "no Connection: close: $(cat "$tmp/get.h")"
cmp -s "$tmp/get.body" "$tmp/metrics.txt" ||
	fail "the scrape is not what xdmctl metrics printed: $(diff "$tmp/metrics.txt" "$tmp/get.body")"
python3 "$srcdir/tests/tools/metrics_check.py" "$tmp/get.body" "$tmp/ps.json" "$key" ||
	fail "the scrape does not say what ps says"
promtool_ok "$tmp/get.body"
[ "$(status query "$url?x=1")" = 200 ] || fail "GET /metrics?x=1"
[ "$(status nope "http://$addr/nope")" = 404 ] || fail "GET /nope is not 404"
[ "$(status root "http://$addr/")" = 404 ] || fail "GET / is not 404"
[ "$(status post -X POST -d x "$url")" = 405 ] || fail "POST /metrics is not 405"
grep -qi "^allow: GET, HEAD" "$tmp/post.head" || fail "405 without Allow: $(cat "$tmp/post.head")"
[ "$(status put -X DELETE "$url")" = 405 ] || fail "DELETE /metrics is not 405"

# raw NAME BYTES: what the server answers to BYTES (a printf format): its
# status line in $tmp/NAME.status, all of it in $tmp/NAME.answer.
host=${addr%:*}
raw() {
	printf "$2" | python3 -c '
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=120)
s.sendall(sys.stdin.buffer.read())
answer = s.makefile("rb").read()
open(sys.argv[3], "wb").write(answer)
print(answer.split(b"\r\n")[0].decode())
' "$host" "$port" "$tmp/$1.answer" >"$tmp/$1.status" 2>&1 || fail "$1: $(cat "$tmp/$1.status")"
}
# HEAD: GET's head, GET's length, and nothing after the head.
raw head 'HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n'
python3 - "$tmp/head.answer" "$tmp/metrics.txt" <<'PY' || fail "HEAD /metrics: $(cat "$tmp/head.answer")"
import sys
answer, body = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
head, _, rest = answer.partition(b"\r\n\r\n")
assert head.startswith(b"HTTP/1.1 200 OK\r\n") and rest == b"", answer
assert b"\r\nContent-Length: %d\r\n" % len(body) in head + b"\r\n", head
PY
raw garbage 'garbage\r\n\r\n'
grep -q "^HTTP/1.1 400 " "$tmp/garbage.status" || fail "garbage: $(cat "$tmp/garbage.status")"
raw nul 'GET /metrics\0 HTTP/1.1\r\n\r\n'
grep -q "^HTTP/1.1 400 " "$tmp/nul.status" || fail "a NUL: $(cat "$tmp/nul.status")"
raw field 'GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n'
grep -q "^HTTP/1.1 400 " "$tmp/field.status" || fail "a bad field: $(cat "$tmp/field.status")"
raw h2 'GET /metrics HTTP/2.0\r\n\r\n'
grep -q "^HTTP/1.1 505 " "$tmp/h2.status" || fail "HTTP/2.0: $(cat "$tmp/h2.status")"
raw h10 'GET /metrics HTTP/1.0\n\n'
grep -q "^HTTP/1.1 200 " "$tmp/h10.status" || fail "HTTP/1.0, LF: $(cat "$tmp/h10.status")"
raw long "GET /$(head -c 9000 /dev/zero | tr '\0' a) HTTP/1.1\r\n\r\n"
grep -q "^HTTP/1.1 400 " "$tmp/long.status" || fail "a long head: $(cat "$tmp/long.status")"

# A client that sends half a request and waits: the server answers it 408
# when its time is up, and the next client after it.  The next client is
# sent only once the slow one is connected and has sent its half.
python3 -c '
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=120)
s.sendall(b"GET /met")
print("sent", flush=True)
answer = s.makefile("rb").read()
print(answer.split(b"\r\n")[0].decode(), flush=True)
' "$host" "$port" >"$tmp/slow.out" 2>&1 &
slow=$!
pids="$pids $slow"
wait_for "$tmp/slow.out" sent
[ "$(status next "$url")" = 200 ] || fail "the client after a slow one"
wait "$slow" || fail "the slow client: $(cat "$tmp/slow.out")"
grep -q "^HTTP/1.1 408 " "$tmp/slow.out" || fail "the slow client got: $(cat "$tmp/slow.out")"

# ---- --listen, and the signals ------------------------------------------------
"$ctl" serve --listen "$addr" >/dev/null 2>"$tmp/inuse.err"
[ $? -eq 1 ] || fail "serve on a port in use does not exit 1"
grep -q "cannot listen on $addr: Address already in use" "$tmp/inuse.err" ||
	fail "$(cat "$tmp/inuse.err")"
for bad in nonsense 127.0.0.1 ::1:9464 127.0.0.1:65536 127.0.0.1:port "[::1]" "[::1]9464"; do
	"$ctl" serve --listen "$bad" >/dev/null 2>"$tmp/listen.err"
	rc=$?
	[ "$rc" -eq 2 ] || fail "--listen '$bad' exited $rc, not 2"
	grep -qF -- "--listen '$bad'" "$tmp/listen.err" || fail "$(cat "$tmp/listen.err")"
done
"$ctl" serve >/dev/null 2>&1
[ $? -eq 2 ] || fail "serve without --listen does not exit 2"

kill -TERM "$spid"
wait "$spid"
rc=$?
[ "$rc" -eq 0 ] || fail "serve exited $rc on SIGTERM"
# A shell starts a background command with SIGINT ignored; serve takes it
# all the same, blocked and read from its signalfd.
start_serve int 127.0.0.1:0 2000
kill -INT "$spid"
wait "$spid"
rc=$?
[ "$rc" -eq 0 ] || fail "serve exited $rc on SIGINT"

# IPv6, where the machine has a loopback for it.
v6=no
if python3 -c 'import socket; socket.socket(socket.AF_INET6).bind(("::1", 0))' 2>/dev/null; then
	v6=yes
	start_serve v6 "[::1]:0" 2000
	case $addr in "[::1]:"*) ;; *) fail "serve on [::1]:0 says $addr" ;; esac
	[ "$(status v6 -g "http://$addr/metrics")" = 200 ] || fail "GET over IPv6"
	kill -TERM "$spid"
	wait "$spid" || fail "serve on IPv6 exited $? on SIGTERM"
fi
[ "$promtool" = yes ] || echo "promtool is not installed: the format was checked by metrics_check.py alone"
echo "xdmctl_serve: pass (promtool: $promtool, IPv6: $v6)"
exit 0
