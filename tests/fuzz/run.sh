#!/bin/sh
# SPDX-License-Identifier: MIT
#
# run.sh --probe - exit 0 where $FUZZ_CC (clang) links a libFuzzer target,
# else say why and exit 77.
#
# run.sh [SECONDS [TARGET...]] - build the libFuzzer targets of tests/fuzz
# and run each for SECONDS (default 20) over its seed corpus, failing on any
# crash, leak, sanitizer report or broken property.  SECONDS 0 runs only the
# seeds and what earlier runs found, once each (a regression run).
#
# The build tree is $XDM_FUZZ_BUILD (default build/fuzz of the source tree),
# configured with CC=clang --enable-fuzzing when it is not yet.  New inputs
# that reach new code are kept in $XDM_FUZZ_BUILD/tests/fuzz/found/<target>/
# (the seeds in the source tree are never written); an input that failed is
# saved as $XDM_FUZZ_BUILD/tests/fuzz/artifacts/<target>/crash-* and can be
# replayed with `<target binary> <file>`.
#
# Exit 0 all passed, 1 something failed, 77 no clang with libFuzzer here.
# The last line says "fuzz: N passed, N failed".
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
probe_only=no
[ "${1:-}" = --probe ] && { probe_only=yes; shift; }
secs=${1:-20}
[ $# -gt 0 ] && shift
targets=${*:-fuzz_config fuzz_stack fuzz_size fuzz_tree_store fuzz_logcsv fuzz_ipc_handle fuzz_ipc_server}
build=${XDM_FUZZ_BUILD:-$top/build/fuzz}
cc=${FUZZ_CC:-clang}

case $secs in
''|*[!0-9]*) echo "usage: $0 [SECONDS [TARGET...]]" >&2; exit 2 ;;
esac

# Is there a compiler that links a libFuzzer target at all?
probe=$(mktemp -d) || exit 1
printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
	'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);' \
	'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return d && n ? 0 : 0; }' \
	>"$probe/t.c"
if ! "$cc" -fsanitize=fuzzer,address,undefined "$probe/t.c" -o "$probe/t" >/dev/null 2>&1; then
	rm -rf "$probe"
	echo "fuzz: SKIP: $cc cannot link a libFuzzer target (Debian 12: apt-get install clang libclang-rt-14-dev)"
	exit 77
fi
rm -rf "$probe"
[ "$probe_only" = yes ] && exit 0

if [ ! -f "$build/Makefile" ]; then
	[ -x "$top/configure" ] || (cd "$top" && autoreconf -fi >/dev/null 2>&1) ||
		{ echo "fuzz: autoreconf failed" >&2; exit 1; }
	mkdir -p "$build"
	(cd "$build" && CC=$cc "$top/configure" --enable-fuzzing >configure.out 2>&1) ||
		{ tail -20 "$build/configure.out"; echo "fuzz: configure failed" >&2; exit 1; }
fi
make -C "$build" -j"${FUZZ_JOBS:-2}" fuzz-build >"$build/fuzz-build.out" 2>&1 ||
	{ tail -40 "$build/fuzz-build.out"; echo "fuzz: the build failed" >&2; exit 1; }

# Every report stops the run at once; libFuzzer then saves the input.
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1}
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export ASAN_OPTIONS UBSAN_OPTIONS

# One target's run, its verdict left in $build/tests/fuzz/$t.verdict.
run_one() {
	t=$1
	bin=$build/tests/fuzz/$t
	seeds=$top/tests/fuzz/corpus/$t
	found=$build/tests/fuzz/found/$t
	art=$build/tests/fuzz/artifacts/$t
	log=$build/tests/fuzz/$t.log
	verdict=$build/tests/fuzz/$t.verdict
	mkdir -p "$found" "$art"
	if [ "$secs" -eq 0 ]; then
		limit="-runs=0"
	else
		limit="-max_total_time=$secs"
	fi
	# found/ first: libFuzzer writes new inputs to the first directory.  The
	# dictionary holds the format's words, which random bytes rarely spell.
	# -max_len bounds an input (a config is short; 4 KiB holds any real one).
	"$bin" "$limit" -dict="$top/tests/fuzz/dict/$t.dict" -max_len=4096 -timeout=10 \
		-rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$art/" \
		"$found" "$seeds" >"$log" 2>&1 &
	pid=$!
	wait $pid
	rc=$?
	# A target that died cannot unlink its budget segment (key fuzz-<pid>).
	rm -f "/dev/shm/xdm-budget-fuzz-$pid"
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	cov=$(grep -Eo 'cov: [0-9]+' "$log" | tail -1)
	if [ $rc -eq 0 ]; then
		echo "fuzz: PASS: $t: ${runs:-?} executions in ${secs}s, ${cov:-cov: ?}, corpus $(ls "$found" | wc -l) found + $(ls "$seeds" | wc -l) seeds" >"$verdict"
	else
		{
			echo "fuzz: FAIL: $t (exit $rc, ${runs:-?} executions); the input is in $art/"
			grep -E 'ERROR|property failed|SUMMARY|^    #[0-9] ' "$log" | head -20
			echo "  (whole log: $log)"
		} >"$verdict"
	fi
}

# Each target is one single-threaded process: FUZZ_JOBS of them run at
# once (the cores of the machine), each for its full SECONDS.
jobs=${FUZZ_JOBS:-2}
running=0
for t in $targets; do
	rm -f "$build/tests/fuzz/$t.verdict"
	run_one "$t" &
	running=$((running + 1))
	if [ $running -ge "$jobs" ]; then
		wait
		running=0
	fi
done
wait
passed=0 failed=0
for t in $targets; do
	verdict=$build/tests/fuzz/$t.verdict
	if [ -f "$verdict" ] && grep -q '^fuzz: PASS' "$verdict"; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		[ -f "$verdict" ] || echo "fuzz: FAIL: $t left no verdict" >"$verdict"
	fi
	cat "$verdict"
done
echo "fuzz: $passed passed, $failed failed"
[ $failed -eq 0 ]
