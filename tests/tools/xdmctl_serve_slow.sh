#!/bin/sh
# SPDX-License-Identifier: MIT
#
# xdmctl_serve_slow.sh - xdmctl serve against clients that mean to keep
# Prometheus out, and where it listens:
#
# - ten clients each send half a request and stall (each would be given 20
#   s); a scrape meanwhile is answered, within 1 s (the one timed check of
#   this test: a bound on a hostile case, generous for a loaded machine);
# - with its table of clients full, one more client is answered 503 at once;
# - --listen :PORT listens on loopback alone (127.0.0.1, and ::1 where the
#   machine has it: /proc/net/tcp says so, and a non-loopback address of the
#   machine is refused), and *:PORT on every address.
#
# Exit 0 pass, 1 fail, 77 skip (no curl).  Run by make check from the build
# directory, with XDM_TOP_BUILDDIR, XDM_TOP_SRCDIR, XDM_MODULE_PATH and
# XDM_CONFIG set by the harness.

set -u

if ! command -v curl >/dev/null 2>&1; then
	echo "SKIP: curl is not installed (tests/install-deps.sh installs it)"
	exit 77
fi
name_of_test=xdmctl-serve-slow
. "${XDM_TOP_SRCDIR:-$(dirname "$0")/../..}/tests/tools/xdmctl_live_test.sh"

unset XDMCTL_SHM_DIR
XDM_BUDGET_DIR=$tmp/budgets
export XDM_BUDGET_DIR
mkdir "$XDM_BUDGET_DIR" || fail "mkdir"
start_worker w 1048576 3

# listening PORT: the local addresses listening on PORT, one a line, in
# /proc/net/tcp's hex (0100007F is 127.0.0.1).
listening() {
	hex=$(printf '%04X' "$1")
	cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
		awk -v p=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == p {
			print substr($2, 1, length($2) - 5) }' | sort -u
}

# ---- loopback by default ---------------------------------------------------
start_serve loop :0 20000
listening "$port" >"$tmp/loop.addrs"
[ -s "$tmp/loop.addrs" ] || fail "nothing listens on port $port: $(cat "$tmp/loop.out")"
grep -vx -e 0100007F -e 00000000000000000000000001000000 "$tmp/loop.addrs" >"$tmp/loop.other" &&
	fail "--listen :0 listens beyond loopback: $(cat "$tmp/loop.other") ($(cat "$tmp/loop.out"))"
grep -qx 0100007F "$tmp/loop.addrs" || fail "--listen :0 is not on 127.0.0.1: $(cat "$tmp/loop.addrs")"
# An address of this machine that is not loopback, where there is one: refused.
outside=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -E '^[0-9.]+$' | grep -v '^127\.' | head -n 1)
if [ -n "$outside" ]; then
	curl -sS --max-time 60 -o /dev/null "http://$outside:$port/metrics" 2>"$tmp/outside.err" &&
		fail "a scrape through $outside was answered"
	outside_checked=$outside
else
	outside_checked="no address beside loopback"
fi

# ---- ten slow clients, then a scrape -----------------------------------------
# Each connects, sends half a request head and stalls until its input
# closes; "stalled" once all have sent their halves.
mkfifo "$tmp/slow.in" || fail "mkfifo"
python3 -c '
import socket, sys
socks = []
for _ in range(int(sys.argv[2])):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=120)
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
    socks.append(s)
print("stalled", flush=True)
sys.stdin.read()
' "$port" 10 <"$tmp/slow.in" >"$tmp/slow.out" 2>&1 &
pids="$pids $!"
exec 4>"$tmp/slow.in"
wait_for "$tmp/slow.out" stalled
took=$(curl -sS --max-time 60 -o "$tmp/scrape.body" -w '%{http_code} %{time_total}' \
	"http://127.0.0.1:$port/metrics" 2>"$tmp/scrape.err") ||
	fail "the scrape beside ten slow clients: $(cat "$tmp/scrape.err")"
[ "${took% *}" = 200 ] || fail "the scrape beside ten slow clients: $took"
awk -v t="${took#* }" 'BEGIN { exit !(t < 1.0) }' ||
	fail "the scrape beside ten slow clients took ${took#* } s"
grep -q "^xdm_budget_used_bytes{.*key=\"$key\"} 1048576$" "$tmp/scrape.body" ||
	fail "the scrape: $(cat "$tmp/scrape.body")"

# ---- a full table ---------------------------------------------------------
# 54 more clients fill the 64 entries, connecting one after another; the
# server takes connections in the order they came, so the next one finds
# the table full and is answered 503 at once (it sends nothing: the answer
# must not depend on a request).
python3 -c '
import socket, sys
port = int(sys.argv[1])
held = [socket.create_connection(("127.0.0.1", port), timeout=120)
        for _ in range(int(sys.argv[2]))]
last = socket.create_connection(("127.0.0.1", port), timeout=120)
answer = last.makefile("rb").read()
print(answer.split(b"\r\n")[0].decode(), flush=True)
' "$port" 54 >"$tmp/full.out" 2>&1 || fail "the clients of a full table: $(cat "$tmp/full.out")"
grep -q "^HTTP/1.1 503 " "$tmp/full.out" || fail "a client past the table got: $(cat "$tmp/full.out")"
exec 4>&-
kill -TERM "$spid"
wait "$spid"
rc=$?
[ "$rc" -eq 0 ] || fail "serve exited $rc on SIGTERM with clients"

# ---- every address, asked for ------------------------------------------------
start_serve any '*:0' 20000
listening "$port" >"$tmp/any.addrs"
grep -qx -e 00000000 -e 00000000000000000000000000000000 "$tmp/any.addrs" ||
	fail "--listen '*:0' is not on every address: $(cat "$tmp/any.addrs")"
[ "$(curl -sS --max-time 60 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/metrics")" = 200 ] ||
	fail "a scrape of '*:0'"
kill -TERM "$spid"
wait "$spid" || fail "serve on '*:0' exited $?"

echo "xdmctl_serve_slow: pass (a scrape beside ten slow clients in ${took#* } s;" \
	"outside address: $outside_checked)"
exit 0
