# adaptors/budget: one byte limit per physical device, shared by every
# process on it through a POSIX shared memory segment.  See man/xdm-budget.7.
pkglib_LTLIBRARIES += adaptors/budget.la
adaptors_budget_la_SOURCES = \
	adaptors/budget/budget.h \
	adaptors/budget/module.c \
	adaptors/budget/segment.c \
	adaptors/budget/reclaim.c \
	adaptors/budget/credit.c \
	adaptors/budget/credit_thread.c \
	adaptors/budget/validate.c \
	adaptors/budget/attrs.c
adaptors_budget_la_LDFLAGS = $(module_link_flags)
adaptors_budget_la_LIBADD = lib/budget_segment/libbudget_segment.la $(module_link_libs) -lrt

# The same module with kill points (faults.c): a process that loads it from
# tests/faults/.libs stops itself at the step $XDM_BUDGET_FAULT names, so
# the suite can kill it there.  Built for the tests only, never installed.
noinst_LTLIBRARIES += tests/faults/budget.la
tests_faults_budget_la_SOURCES = $(adaptors_budget_la_SOURCES) adaptors/budget/faults.c
tests_faults_budget_la_CPPFLAGS = $(AM_CPPFLAGS) -DXDM_BUDGET_FAULTS
tests_faults_budget_la_LDFLAGS = $(module_link_flags) -rpath $(abs_builddir)
tests_faults_budget_la_LIBADD = lib/budget_segment/libbudget_segment.la $(module_link_libs) \
	-lrt

# The suite runs the budget across real processes: budget_worker is the
# program each of them execs (-no-install: a real executable, so that its
# pid is the one the segment records).  The suite includes segment.h to
# watch the segment from outside.
check_PROGRAMS += tests/check_budget tests/budget_worker
TESTS += tests/check_budget
tests_check_budget_SOURCES = tests/check_budget.c tests/budget_test.h tests/budget_util.h
tests_check_budget_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_budget_LDFLAGS = $(AM_LDFLAGS) -no-install
tests_check_budget_LDADD = libxdm.la $(CHECK_LIBS) -lrt

# A worker killed at every step of a change of the accounting (the test
# build of the module above), and the usage exact after the reclaim.
check_PROGRAMS += tests/check_budget_kill
TESTS += tests/check_budget_kill
tests_check_budget_kill_SOURCES = tests/check_budget_kill.c tests/budget_test.h \
	tests/budget_util.h
tests_check_budget_kill_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_budget_kill_LDFLAGS = $(AM_LDFLAGS) -no-install
tests_check_budget_kill_LDADD = libxdm.la $(CHECK_LIBS) -lrt

# Workers killed at random and restarted while the limit flips; the usage
# after the reclaim must be 0.  The suite runs it for 3 s.
check_PROGRAMS += tests/budget_torture
TESTS += tests/budget_torture
tests_budget_torture_SOURCES = tests/budget_torture.c tests/budget_test.h
tests_budget_torture_LDFLAGS = $(AM_LDFLAGS) -no-install
tests_budget_torture_LDADD = libxdm.la

# credit=SIZE: per-thread records, the limit under many threads, a thread's
# exit, drain requests, fini and fork.
check_PROGRAMS += tests/check_budget_credit
TESTS += tests/check_budget_credit
tests_check_budget_credit_SOURCES = tests/check_budget_credit.c tests/budget_test.h \
	tests/budget_util.h
tests_check_budget_credit_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_budget_credit_LDFLAGS = $(AM_LDFLAGS) -no-install
tests_check_budget_credit_LDADD = libxdm.la $(CHECK_LIBS) -lrt

# Segments that are not what they should be, refused at attach.
check_PROGRAMS += tests/check_budget_segment
TESTS += tests/check_budget_segment
tests_check_budget_segment_SOURCES = tests/check_budget_segment.c tests/budget_util.h
tests_check_budget_segment_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_budget_segment_LDADD = libxdm.la $(CHECK_LIBS) -lrt
tests_budget_worker_SOURCES = tests/budget_worker.c tests/budget_test.h
tests_budget_worker_LDFLAGS = $(AM_LDFLAGS) -no-install
tests_budget_worker_LDADD = libxdm.la

# The same multi-process test with a CUDA stack, on a machine with a GPU.
EXTRA_DIST += tests/budget_gpu.sh
if HAVE_CUDA
TESTS += tests/budget_gpu.sh
endif

dist_man_MANS += man/xdm-budget.7
