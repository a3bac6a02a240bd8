# tests/cuda.mk: the GPU suite, the planted out-of-bounds program and the
# Compute Sanitizer gate (issue 3).  Built wherever configure found cuda.h;
# both tests skip (77) on a machine without a GPU.  Neither program links
# libcuda: tests/cudatest.c reaches it with dlopen, hence $(LIBS) (-ldl where
# needed), which automake appends to every link.
EXTRA_DIST += tests/sanitizer_gate.sh
dist_doc_DATA += doc/sanitizer-gate.md
# What the gate captured: named *.log so that a copy of tests/*.log (the GPU
# machine's runner makes one) brings them back with the test logs.
CLEANFILES += tests/sanitizer-*.log

if HAVE_CUDA
check_PROGRAMS += tests/check_cuda tests/cuda_oob tests/check_native_cuda \
	tests/check_vmm_cuda tests/check_peer_cuda
TESTS += tests/check_cuda tests/check_native_cuda tests/check_vmm_cuda \
	tests/check_peer_cuda tests/sanitizer_gate.sh

# -no-install: real executables in the build tree, not libtool wrapper
# scripts, so that compute-sanitizer runs the program itself.
tests_check_cuda_SOURCES = tests/check_cuda.c tests/cudatest.c tests/cudatest.h \
	tests/cudacheck.h
tests_check_cuda_CFLAGS = $(AM_CFLAGS) $(CUDA_CFLAGS) $(CHECK_CFLAGS)
tests_check_cuda_LDFLAGS = $(AM_LDFLAGS) -no-install
tests_check_cuda_LDADD = libxdm.la $(CHECK_LIBS)

tests_check_native_cuda_SOURCES = tests/check_native_cuda.c tests/cudatest.c \
	tests/cudatest.h tests/cudacheck.h
tests_check_native_cuda_CFLAGS = $(AM_CFLAGS) $(CUDA_CFLAGS) $(CHECK_CFLAGS)
tests_check_native_cuda_LDFLAGS = $(AM_LDFLAGS) -no-install
tests_check_native_cuda_LDADD = libxdm.la $(CHECK_LIBS)

# cuda_vmm under the test's own adaptor, which calls allocate_at and partial
# releases as a pool would.
tests_check_vmm_cuda_SOURCES = tests/check_vmm_cuda.c tests/cudatest.c tests/cudatest.h \
	tests/cudacheck.h
tests_check_vmm_cuda_CFLAGS = $(AM_CFLAGS) $(CUDA_CFLAGS) $(CHECK_CFLAGS)
tests_check_vmm_cuda_LDFLAGS = $(AM_LDFLAGS) -no-install
tests_check_vmm_cuda_LDADD = libxdm.la $(CHECK_LIBS)

# peers= on two GPUs: a kernel of device 1 writes a block of device 0's
# runtime; skips (77) on a machine with fewer GPUs, or two without peer access.
tests_check_peer_cuda_SOURCES = tests/check_peer_cuda.c tests/cudatest.c tests/cudatest.h \
	tests/cudacheck.h
tests_check_peer_cuda_CFLAGS = $(AM_CFLAGS) $(CUDA_CFLAGS) $(CHECK_CFLAGS)
tests_check_peer_cuda_LDFLAGS = $(AM_LDFLAGS) -no-install
tests_check_peer_cuda_LDADD = libxdm.la $(CHECK_LIBS)

tests_cuda_oob_SOURCES = tests/cuda_oob.c tests/cudatest.c tests/cudatest.h
tests_cuda_oob_CFLAGS = $(AM_CFLAGS) $(CUDA_CFLAGS)
tests_cuda_oob_LDFLAGS = $(AM_LDFLAGS) -no-install
tests_cuda_oob_LDADD = libxdm.la
endif
