# tests/: check suites of the core.  Each suite is its own program.
core_tests = tests/check_errors tests/check_runtime tests/check_tracking tests/check_tree
check_PROGRAMS += $(core_tests)
TESTS += $(core_tests)
noinst_HEADERS += tests/testutil.h
tests_check_errors_SOURCES = tests/check_errors.c
tests_check_errors_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_errors_LDADD = libxdm.la $(CHECK_LIBS)
tests_check_runtime_SOURCES = tests/check_runtime.c
tests_check_runtime_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_runtime_LDADD = libxdm.la $(CHECK_LIBS)
tests_check_tracking_SOURCES = tests/check_tracking.c
tests_check_tracking_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_tracking_LDADD = libxdm.la $(CHECK_LIBS)
tests_check_tree_SOURCES = tests/check_tree.c
tests_check_tree_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_tree_LDADD = libxdm.la $(CHECK_LIBS) -lrt
EXTRA_DIST += tests/data/host.conf
