# adaptors/budget: one byte limit per physical device, shared by every
# process on it through a POSIX shared memory segment.  See man/xdm-budget.7.
pkglib_LTLIBRARIES += adaptors/budget.la
adaptors_budget_la_SOURCES = \
	adaptors/budget/budget.h \
	adaptors/budget/shared.h \
	adaptors/budget/module.c \
	adaptors/budget/segment.c \
	adaptors/budget/reclaim.c \
	adaptors/budget/credit.c \
	adaptors/budget/attrs.c
adaptors_budget_la_LDFLAGS = $(module_link_flags)
adaptors_budget_la_LIBADD = $(module_link_libs) -lrt

# The suite runs the budget across real processes: budget_worker is the
# program each of them execs (-no-install: a real executable, so that its
# pid is the one the segment records).  The suite includes shared.h to
# watch the segment from outside.
check_PROGRAMS += tests/check_budget tests/budget_worker
TESTS += tests/check_budget
tests_check_budget_SOURCES = tests/check_budget.c tests/budget_test.h
tests_check_budget_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_budget_LDFLAGS = $(AM_LDFLAGS) -no-install
tests_check_budget_LDADD = libxdm.la $(CHECK_LIBS) -lrt
tests_budget_worker_SOURCES = tests/budget_worker.c tests/budget_test.h
tests_budget_worker_LDFLAGS = $(AM_LDFLAGS) -no-install
tests_budget_worker_LDADD = libxdm.la

# The same multi-process test with a CUDA stack, on a machine with a GPU.
EXTRA_DIST += tests/budget_gpu.sh
if HAVE_CUDA
TESTS += tests/budget_gpu.sh
endif

dist_man_MANS += man/xdm-budget.7
