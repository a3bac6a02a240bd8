#!/bin/sh
# The whole test job: a -Werror build and `make check`, an install check of
# the Python package (tests/python/install_check.sh), the same suite again
# under ThreadSanitizer and then under AddressSanitizer and
# UndefinedBehaviorSanitizer (builds of their own: the two cannot share a
# process; the ASan build is clang's fuzzing build, which also runs the
# libFuzzer targets briefly, tests/fuzz/run.sh), then `make distcheck`
# (which also builds a module out of tree against the installed headers)
# and a check that the tarball holds every file of the repository, and
# beside those the Debian packages built from that tarball, linted with
# lintian, installed into a throwaway root, used and purged
# (tests/deb/packages.sh).
# The Python tests run in the plain build only, and the log-reading xdmctl
# tests not under ThreadSanitizer (tests/local.mk says why).
# Run from anywhere after tests/install-deps.sh.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
jobs=$(nproc 2>/dev/null || echo 2)
# Tests spend much of their time waiting (for a gate, a killed worker, a
# lock's bound, a forked reader), so twice as many run at once as there
# are cores; none depends on being scheduled (tests/README).
check_jobs=$((2 * jobs))

show_logs() {
	echo "---- failing test logs in $1 ----"
	for log in "$1"/tests/*/*.log "$1"/test-suite.log; do
		[ -f "$log" ] || continue
		grep -qE '^(FAIL|ERROR)|:F:|:E:' "$log" 2>/dev/null && { echo "== $log"; tail -60 "$log"; }
	done
	return 1
}

run_suite() {
	dir=$1; shift
	rm -rf "$dir"; mkdir -p "$dir"
	(cd "$dir" && "$top/configure" "$@" >configure.out) ||
		{ tail -30 "$dir/configure.out"; return 1; }
	make -C "$dir" -j"$jobs" >"$dir/make.out" 2>&1 || { tail -40 "$dir/make.out"; return 1; }
	make -C "$dir" -j"$check_jobs" check || show_logs "$dir"
}

# Each stage says how long it took, so that CI's time is known by stage.
stage_name="autoreconf" stage_start=$(date +%s)
stage() {
	echo "ci: stage '$stage_name' took $(($(date +%s) - stage_start)) s"
	stage_name=$1 stage_start=$(date +%s)
	echo "== $1"
}
autoreconf -fi >/dev/null 2>&1 || autoreconf -fi
stage "build with -Werror and make check"
run_suite build/ci-plain --enable-werror
stage "install check of the Python package"
# make install DESTDIR=... for prefixes /usr and /usr/local, and pip install
# ./python into a venv, each imported after (77: a part could not run).
sh tests/python/install_check.sh build/ci-plain || [ $? -eq 77 ]
stage "ThreadSanitizer build with -Werror and make check"
# TSAN_OPTIONS (tests/tsan.supp, halt_on_error) come from the build.
run_suite build/ci-tsan --enable-werror --enable-tsan
# ASan and UBSan: one clang build serves the suite and the libFuzzer
# targets (tests/fuzz), since a fuzzing build is the whole tree under both
# sanitizers (with libFuzzer's coverage hooks too).  clang 14 warns about
# ops tables ended by { 0 } the way kernel C ends them, so this build is
# not -Werror; the two above are.  Where clang has no libFuzzer, gcc's
# ASan and UBSan run the suite and the fuzz targets are skipped.  Fuzz
# failures count in the closing line and fail the job, after the other
# stages have run.
# Ten seconds each: the seeds and what the run finds on the way are a
# regression check; long runs are made by hand (DESIGN-NOTES, Fuzzing).
fuzz_secs=${XDM_CI_FUZZ_SECONDS:-10}
if sh tests/fuzz/run.sh --probe >/dev/null 2>&1; then
	stage "ASan + UBSan build (clang, for the fuzz targets too) and make check"
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		run_suite build/ci-sanitizers CC="${FUZZ_CC:-clang}" --enable-fuzzing
	# (the fuzz runner sets the options it wants)
	unset ASAN_OPTIONS UBSAN_OPTIONS
	stage "libFuzzer targets, ${fuzz_secs} s each"
	XDM_FUZZ_BUILD="$top/build/ci-sanitizers" FUZZ_JOBS=$jobs sh tests/fuzz/run.sh \
		"$fuzz_secs" >build/ci-fuzz.out 2>&1 || true
else
	stage "ASan + UBSan build (gcc: no clang with libFuzzer here) and make check"
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		run_suite build/ci-sanitizers --enable-werror --enable-sanitizers
	unset ASAN_OPTIONS UBSAN_OPTIONS
	sh tests/fuzz/run.sh --probe >build/ci-fuzz.out 2>&1 || true
fi
cat build/ci-fuzz.out
fuzz_counts=$(sed -n 's/^fuzz: \([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p' build/ci-fuzz.out)
if [ -n "$fuzz_counts" ]; then
	fuzz_passed=${fuzz_counts% *} fuzz_failed=${fuzz_counts#* }
elif grep -q '^fuzz: SKIP' build/ci-fuzz.out; then
	fuzz_passed=0 fuzz_failed=0
else
	fuzz_passed=0 fuzz_failed=1	# it did not get as far as running them
fi
stage "make distcheck, and beside it the Debian packages"
# The Debian packages (tests/deb/packages.sh) are built from the release
# tarball, unpacked afresh, reusing nothing of the builds above, with
# nocheck: the suite ran on these sources in the first stage.  Then
# lintian, and an install into a throwaway overlay of this machine's root,
# used and purged there, so that nothing else ever sees the packages.
# They run beside distcheck, on a copy of the tarball `make dist` makes
# first (distcheck writes its own again): each spends much of its time in
# one process at a time (autoreconf, configure, install, lintian, dpkg),
# so the two together take a minute less than one after the other.  A
# failure counts in the closing line and fails the job; where the overlay
# cannot be mounted, the install part is skipped and says why.
make -C build/ci-plain dist >build/ci-plain/dist.out 2>&1 || { tail -30 build/ci-plain/dist.out; exit 1; }
rm -f build/ci-deb.tar.gz
cp build/ci-plain/xdm-*.tar.gz build/ci-deb.tar.gz
sh tests/deb/packages.sh build/ci-deb.tar.gz build/ci-deb >build/ci-deb.out 2>&1 &
deb_pid=$!
# The suite ran in full above.  distcheck builds the tarball in a
# read-only VPATH tree with -Werror, installs it, builds a module out of
# tree against the installed headers (installcheck), uninstalls and
# cleans, but runs no suite again (no TESTS, no check programs); that the
# tarball holds every file is checked directly (tests/dist-complete.sh).
if ! make -C build/ci-plain -j"$jobs" distcheck TESTS= check_PROGRAMS= check_LTLIBRARIES= \
	>build/ci-plain/distcheck.out 2>&1; then
	tail -60 build/ci-plain/distcheck.out
	wait "$deb_pid" || true	# its mounts are undone by its own exit
	exit 1
fi
grep -E 'archives ready|is ready for distribution' build/ci-plain/distcheck.out || true
sh tests/dist-complete.sh build/ci-plain/xdm-*.tar.gz
deb_rc=0
wait "$deb_pid" || deb_rc=$?
echo "-- Debian packages (tests/deb/packages.sh)"
cat build/ci-deb.out
deb_counts=$(sed -n 's/^deb: \([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p' build/ci-deb.out)
if [ -n "$deb_counts" ]; then
	deb_passed=${deb_counts% *} deb_failed=${deb_counts#* }
else
	deb_passed=0 deb_failed=1	# it did not get as far as counting
fi
[ "$deb_rc" -eq 0 ] || [ "$deb_rc" -eq 77 ] || [ "$deb_failed" -gt 0 ] || deb_failed=1
stage "summary"
# One closing line for machines: check test cases (plus the script tests)
# of the three suites, as counted by their own logs, and one per fuzz target.
summary() {
	cat "$1"/tests/*/*.log 2>/dev/null | awk '
		/Checks: [0-9]+, Failures: [0-9]+, Errors: [0-9]+/ {
			gsub(/[,%:]/, " "); for (i = 1; i <= NF; i++) {
				if ($i == "Checks") c += $(i + 1); if ($i == "Failures") f += $(i + 1)
				if ($i == "Errors") e += $(i + 1) } }
		END { printf "%d %d\n", c - f - e, f + e }'
}
set -- $(summary build/ci-plain) $(summary build/ci-sanitizers) $(summary build/ci-tsan)
scripts=$(grep -hE '^# (PASS|SKIP):' build/ci-plain/test-suite.log | awk '{print $3}' | paste -sd' ')
echo "ci: automake results (pass skip) of the plain build: $scripts"
echo "ci: fuzz targets (pass fail): $fuzz_passed $fuzz_failed"
echo "ci: Debian package checks (pass fail): $deb_passed $deb_failed"
echo "ci: $(($1 + $3 + $5 + fuzz_passed + deb_passed)) passed, $(($2 + $4 + $6 + fuzz_failed + deb_failed)) failed"
[ "$fuzz_failed" -eq 0 ] && [ "$deb_failed" -eq 0 ]
