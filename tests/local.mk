# tests/: check suites of the core.  Each suite is its own program.
core_tests = tests/check_errors tests/check_runtime tests/check_tracking tests/check_tree \
	tests/check_devices \
	tests/check_native
check_PROGRAMS += $(core_tests)
TESTS += $(core_tests)
noinst_HEADERS += tests/testutil.h tests/thread_churn.h
tests_check_errors_SOURCES = tests/check_errors.c
tests_check_errors_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_errors_LDADD = libxdm.la $(CHECK_LIBS)
tests_check_runtime_SOURCES = tests/check_runtime.c
tests_check_runtime_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_runtime_LDADD = libxdm.la $(CHECK_LIBS)
tests_check_devices_SOURCES = tests/check_devices.c
tests_check_devices_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_devices_LDADD = libxdm.la $(CHECK_LIBS)
tests_check_tracking_SOURCES = tests/check_tracking.c
tests_check_tracking_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_tracking_LDADD = libxdm.la $(CHECK_LIBS)
tests_check_tree_SOURCES = tests/check_tree.c
tests_check_tree_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_tree_LDADD = libxdm.la $(CHECK_LIBS) -lrt
tests_check_native_SOURCES = tests/check_native.c
tests_check_native_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_native_LDADD = libxdm.la $(CHECK_LIBS)

# The atomic read-modify-writes of one pair, counted by single-stepping a
# child with ptrace (doc/hot-path.md); x86-64, skips (77) elsewhere.
check_PROGRAMS += tests/check_rmw
TESTS += tests/check_rmw
tests_check_rmw_SOURCES = tests/check_rmw.c
tests_check_rmw_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_rmw_LDADD = libxdm.la $(CHECK_LIBS)
EXTRA_DIST += tests/data/host.conf tests/lsan.supp tests/tsan.supp
# Not run by make check: make check itself, repeatedly, under stress-ng.
EXTRA_DIST += tests/under-load.sh

# The introspection tree through a real FUSE mount (issue 5).  fuse_walk
# reads a mounted tree from another process (check_fusefs spawns it; it
# also serves a person who wants to time a walk by hand).  The lifecycle
# script kills and restarts xdm-bench over one mount point.
EXTRA_DIST += tests/fusefs_lifecycle.sh
if HAVE_FUSE
check_PROGRAMS += tests/check_fusefs tests/fuse_walk
TESTS += tests/check_fusefs tests/fusefs_lifecycle.sh
tests_check_fusefs_SOURCES = tests/check_fusefs.c
tests_check_fusefs_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_fusefs_LDFLAGS = $(AM_LDFLAGS) -no-install
tests_check_fusefs_LDADD = libxdm.la $(CHECK_LIBS) -lrt
tests_fuse_walk_SOURCES = tests/fuse_walk.c
endif

# Another local user against a budget segment and a FUSE tree (issue 15):
# run as root, it makes two throwaway users and drops to each; skips
# otherwise.  The mount case is left out where a user cannot mount.
check_PROGRAMS += tests/check_users
TESTS += tests/check_users
tests_check_users_SOURCES = tests/check_users.c
tests_check_users_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_users_LDFLAGS = $(AM_LDFLAGS) -no-install
tests_check_users_LDADD = libxdm.la $(CHECK_LIBS) -lrt

# The programs of tools/ (moved here from tools/local.mk).
TESTS += tests/bench_smoke.sh
EXTRA_DIST += tests/bench_smoke.sh

# ps and budget against live processes; top in a real terminal (tmux).
TESTS += tests/xdmctl_ps.sh tests/xdmctl_top.sh
EXTRA_DIST += tests/xdmctl_ps.sh tests/xdmctl_top.sh tests/xdmctl_live_test.sh
# One budget per physical device under any device order: host devices here,
# two GPUs in devices_gpu.sh (a skip on fewer).
TESTS += tests/devices_order.sh
EXTRA_DIST += tests/devices_order.sh tests/devices_order_body.sh tests/devices_gpu.sh
if HAVE_CUDA
TESTS += tests/devices_gpu.sh
endif
# timeline: drawn from logs that tests/timeline_gen.py simulates, whose
# true figures it knows without reading the CSV back.
TESTS += tests/xdmctl_timeline.sh
EXTRA_DIST += tests/xdmctl_timeline.sh tests/timeline_gen.py tests/xdmctl_log_test.sh
# snapshot: from the same simulated logs, read back the way PyTorch's
# memory viewer reads it.
TESTS += tests/xdmctl_snapshot.sh
EXTRA_DIST += tests/xdmctl_snapshot.sh
