# backends/pool: the stream-ordered suballocator, one shared object over any
# upstream.  See man/xdm-pool.7.
pkglib_LTLIBRARIES += backends/pool.la
backends_pool_la_SOURCES = \
	backends/pool/pool.h \
	backends/pool/module.c \
	backends/pool/size.c \
	backends/pool/arena.c \
	backends/pool/chunk.c \
	backends/pool/span.c \
	backends/pool/trim.c \
	backends/pool/tcache.c \
	backends/pool/attrs.c
backends_pool_la_LDFLAGS = $(module_link_flags)
backends_pool_la_LIBADD = $(module_link_libs)

# The pool on the host platform: carving, streams, growth, trim, max, errors.
check_PROGRAMS += tests/check_pool
TESTS += tests/check_pool
tests_check_pool_SOURCES = tests/check_pool.c
tests_check_pool_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_pool_LDADD = libxdm.la $(CHECK_LIBS)

# The pool's per-thread caches: pairs served without the arena, streams
# kept apart, stale ids, bounds, counters, trims and thread exits.
check_PROGRAMS += tests/check_pool_tcache
TESTS += tests/check_pool_tcache
tests_check_pool_tcache_SOURCES = tests/check_pool_tcache.c
tests_check_pool_tcache_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_pool_tcache_LDADD = libxdm.la $(CHECK_LIBS)

# The pool over host_vmm, a virtual-memory upstream on the host platform:
# joins, give-backs, the trimmer, data and counters through churn.
check_PROGRAMS += tests/check_pool_vmm
TESTS += tests/check_pool_vmm
tests_check_pool_vmm_SOURCES = tests/check_pool_vmm.c
tests_check_pool_vmm_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_pool_vmm_LDADD = libxdm.la $(CHECK_LIBS)

# The pool on a GPU, over cuda_async and cuda_direct; skips (77) without
# one.  One process, no fork (CUDA state does not survive it); -no-install
# so a sanitizer can run the real program, as for tests/check_cuda.
if HAVE_CUDA
check_PROGRAMS += tests/check_pool_cuda
TESTS += tests/check_pool_cuda
tests_check_pool_cuda_SOURCES = tests/check_pool_cuda.c tests/cudatest.c tests/cudatest.h \
	tests/cudacheck.h
tests_check_pool_cuda_CFLAGS = $(AM_CFLAGS) $(CUDA_CFLAGS) $(CHECK_CFLAGS)
tests_check_pool_cuda_LDFLAGS = $(AM_LDFLAGS) -no-install
tests_check_pool_cuda_LDADD = libxdm.la $(CHECK_LIBS)

# The pool over cuda_vmm: releases under a kernel, joined ranges, the trimmer
# against the driver's free memory.  Skips (77) without a GPU.
check_PROGRAMS += tests/check_pool_vmm_cuda
TESTS += tests/check_pool_vmm_cuda
tests_check_pool_vmm_cuda_SOURCES = tests/check_pool_vmm_cuda.c tests/cudatest.c \
	tests/cudatest.h tests/cudacheck.h
tests_check_pool_vmm_cuda_CFLAGS = $(AM_CFLAGS) $(CUDA_CFLAGS) $(CHECK_CFLAGS)
tests_check_pool_vmm_cuda_LDFLAGS = $(AM_LDFLAGS) -no-install
tests_check_pool_vmm_cuda_LDADD = libxdm.la $(CHECK_LIBS)
endif
dist_man_MANS += man/xdm-pool.7
