# adaptors/guard: the debug guard, canaries around blocks, poison on free and
# a quarantine before reuse.  See man/xdm-guard.7.
pkglib_LTLIBRARIES += adaptors/guard.la
adaptors_guard_la_SOURCES = \
	adaptors/guard/guard.h \
	adaptors/guard/module.c \
	adaptors/guard/live.c \
	adaptors/guard/scan.c \
	adaptors/guard/canary.c \
	adaptors/guard/poison.c \
	adaptors/guard/quarantine.c \
	adaptors/guard/report.c \
	adaptors/guard/attrs.c
adaptors_guard_la_LDFLAGS = $(module_link_flags)
adaptors_guard_la_LIBADD = $(module_link_libs)

dist_man_MANS += man/xdm-guard.7

# On the host platform, where the tests can write past a block with memset.
check_PROGRAMS += tests/check_guard
TESTS += tests/check_guard
tests_check_guard_SOURCES = tests/check_guard.c
tests_check_guard_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_guard_LDADD = libxdm.la $(CHECK_LIBS)

# On a GPU, with kernels that write out of bounds; skips (77) without one.
# One process, no fork (CUDA state does not survive it); -no-install so a
# sanitizer can run the real program, as for tests/check_cuda.
if HAVE_CUDA
check_PROGRAMS += tests/check_guard_cuda
TESTS += tests/check_guard_cuda
tests_check_guard_cuda_SOURCES = tests/check_guard_cuda.c tests/cudatest.c tests/cudatest.h \
	tests/cudacheck.h
tests_check_guard_cuda_CFLAGS = $(AM_CFLAGS) $(CUDA_CFLAGS) $(CHECK_CFLAGS)
tests_check_guard_cuda_LDFLAGS = $(AM_LDFLAGS) -no-install
tests_check_guard_cuda_LDADD = libxdm.la $(CHECK_LIBS)
endif
