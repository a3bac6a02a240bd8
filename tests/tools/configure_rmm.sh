#!/bin/sh
# SPDX-License-Identifier: MIT
#
# configure_rmm.sh - what configure decided about RMM, and that the build
# followed it.  Without --with-rmm (CI, a Debian machine: RMM is not
# packaged) configure's summary must say the rmm backend is not built and
# why, and no rmm module may exist; with it, the summary names the RMM
# release and the module and its GPU test must have been built.  Either
# way xdm/rmm.hpp is in the source tree, for programs to compile against
# their own RMM.
#
# Exit 0 pass, 1 fail.  Run by make check from the build directory.

set -u

top=${XDM_TOP_BUILDDIR:-.}
src=${XDM_TOP_SRCDIR:-.}
fail() {
	echo "configure_rmm: FAIL: $*"
	exit 1
}

[ -f "$top/config.log" ] || fail "no config.log in $top"
line=$(grep -E '^ *rmm backend: ' "$top/config.log" | tail -1)
[ -n "$line" ] || fail "configure's summary has no 'rmm backend:' line"
echo "configure_rmm: $line"
[ -f "$src/include/xdm/rmm.hpp" ] || fail "include/xdm/rmm.hpp is missing"

if grep -q '^#define XDM_RMM_VERSION ' "$top/config.h"; then
	case $line in
	*"rmm backend:"*" yes (RMM "*) ;;
	*) fail "XDM_RMM_VERSION is defined but the summary says: $line" ;;
	esac
	[ -f "$top/backends/rmm.la" ] || fail "--with-rmm, but backends/rmm.la was not built"
	[ -e "$top/tests/gpu/check_rmm_cuda" ] ||
		fail "--with-rmm, but tests/gpu/check_rmm_cuda was not built"
else
	case $line in
	*"rmm backend:"*" no (not built: configure --with-rmm=DIR (RMM is not packaged by Debian))"*) ;;
	*) fail "without RMM the summary must say why the backend is not built: $line" ;;
	esac
	[ ! -e "$top/backends/rmm.la" ] || fail "backends/rmm.la was built without RMM"
	[ ! -e "$top/backends/.libs/rmm.so" ] || fail "an rmm module exists without RMM"
fi
echo "configure_rmm: PASS"
