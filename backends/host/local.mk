# backends/host: the host module, one shared object with the "host" platform
# (streams as worker-thread queues, CUDA-style events), the "host" backend
# (host memory) and the "host_vmm" backend (one reserved range mapped a
# granule at a time, with the granule map of backends/common compiled in).
# See man/xdm-host.7.
pkglib_LTLIBRARIES += backends/host.la
backends_host_la_SOURCES = \
	backends/host/host.h \
	backends/host/module.c \
	backends/host/platform.c \
	backends/host/streams.h \
	backends/host/streams.c \
	backends/host/backend.c \
	backends/host/stream.h \
	backends/host/queue.h \
	backends/host/stream.c \
	backends/host/event.c \
	backends/host/copy.c \
	backends/host/vmm.c \
	backends/common/vrange.h \
	backends/common/vrange.c
backends_host_la_LDFLAGS = $(module_link_flags)
backends_host_la_LIBADD = $(module_link_libs)

# The queue and event code is plain C over its own structs, so the test
# links it directly and drives it with real threads, no runtime needed; the
# same test also dlopens the built host.so to check its ops tables, and runs
# the backend through a runtime (hence libxdm).
check_PROGRAMS += tests/check_host_platform
TESTS += tests/check_host_platform
tests_check_host_platform_SOURCES = \
	tests/check_host_platform.c \
	backends/host/stream.h \
	backends/host/queue.h \
	backends/host/stream.c \
	backends/host/event.c \
	backends/host/copy.c
tests_check_host_platform_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_host_platform_LDADD = libxdm.la $(CHECK_LIBS)

# host_vmm through a runtime, with an in-process adaptor that reaches its
# allocate_at and partial deallocate (see the file's head comment).
check_PROGRAMS += tests/check_host_vmm
TESTS += tests/check_host_vmm
tests_check_host_vmm_SOURCES = tests/check_host_vmm.c
tests_check_host_vmm_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_host_vmm_LDADD = libxdm.la $(CHECK_LIBS)

dist_man_MANS += man/xdm-host.7
