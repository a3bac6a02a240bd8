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
	backends/host/shared.c \
	backends/common/vrange.h \
	backends/common/vrange.c
backends_host_la_LDFLAGS = $(module_link_flags)
backends_host_la_LIBADD = $(module_link_libs)

dist_man_MANS += man/xdm-host.7
