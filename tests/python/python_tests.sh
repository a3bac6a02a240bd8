#!/bin/sh
# The CPU tests of the Python package (tests/python/, pytest) against this
# build tree: the package from the source directory, libxdm and the modules
# from the build directory, the host platform.  Run by `make check`, which
# sets XDM_TOP_SRCDIR, XDM_TOP_BUILDDIR, XDM_MODULE_PATH, XDM_CONFIG and
# PYTHON; by hand: XDM_TOP_SRCDIR=.. XDM_TOP_BUILDDIR=. tests/python/python_tests.sh
#
# Exits 77 (skipped) only when no interpreter can import pytest; pytest's
# own "no tests ran" (5) is a failure.
set -u
src=${XDM_TOP_SRCDIR:?XDM_TOP_SRCDIR is not set}
build=${XDM_TOP_BUILDDIR:?XDM_TOP_BUILDDIR is not set}
lib="$build/.libs/libxdm.so"

if [ ! -f "$lib" ]; then
	echo "python_tests: $lib is missing: build first" >&2
	exit 99
fi

# The configured interpreter, else Debian's (where tests/install-deps.sh
# puts python3-pytest): the package is pure Python and needs only 3.9.
python=
for candidate in "${PYTHON:-}" python3 /usr/bin/python3; do
	case $candidate in '' | :) continue ;; esac
	if "$candidate" -c 'import sys, pytest; sys.exit(sys.version_info < (3, 9))' \
		>/dev/null 2>&1; then
		python=$candidate
		break
	fi
done
if [ -z "$python" ]; then
	echo "python_tests: SKIP: no Python 3.9+ that can import pytest" \
		"(${PYTHON:-no PYTHON configured}; apt-get install python3-pytest)"
	exit 77
fi

# Under --enable-sanitizers libxdm and the modules are ASan-instrumented and
# the interpreter is not: ASan's runtime must be loaded first, so preload
# exactly the runtimes libxdm was linked with.  Python's own allocations
# never free at exit, so leak detection is off for this process.  The same
# holds for ThreadSanitizer (--enable-tsan): dlopening libtsan later fails
# for want of static TLS.  It then sees the threads and locks of libxdm and
# the modules; the interpreter itself is not instrumented.
runtimes=$(ldd "$lib" 2>/dev/null | awk '/lib(asan|ubsan|tsan)\.so/ { print $3 }' | sort)
for san in asan tsan; do
	[ -z "$runtimes" ] || break
	nm -D --undefined-only "$lib" 2>/dev/null | grep -q "__${san}_init" || continue
	# Instrumented, but not linked with a shared runtime (clang's default):
	# the compiler says where its shared one is, or there is none to load.
	runtimes=$(${CC:-cc} -print-file-name=lib$san.so)
	if [ ! -f "$runtimes" ]; then
		echo "python_tests: SKIP: libxdm is instrumented by -fsanitize and ${CC:-cc}" \
			"has no shared runtime (lib$san.so) to preload into python"
		exit 77
	fi
done
if [ -n "$runtimes" ]; then
	preload=
	for r in $runtimes; do
		if [ ! -f "$r" ]; then
			# ldd could not resolve it: ask the compiler where it lives.
			name=$(basename "$r")
			r=$(${CC:-cc} -print-file-name="$name")
		fi
		preload="$preload${preload:+ }$r"
	done
	LD_PRELOAD="$preload${LD_PRELOAD:+ $LD_PRELOAD}"
	ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
	export LD_PRELOAD ASAN_OPTIONS
	echo "python_tests: sanitizer build, preloading $preload"
fi

PYTHONPATH="$src/python${PYTHONPATH:+:$PYTHONPATH}"
XDM_LIBRARY=$lib
# The source tree stays clean (and may be read-only, as in distcheck).
PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH XDM_LIBRARY PYTHONDONTWRITEBYTECODE
echo "python_tests: $("$python" -c 'import sys; print(sys.executable, sys.version.split()[0])')"

"$python" -m pytest -q -p no:cacheprovider "$src/tests/python"
rc=$?
case $rc in
0) exit 0 ;;
5) echo "python_tests: pytest collected no tests" >&2; exit 1 ;;
*) exit 1 ;;
esac
