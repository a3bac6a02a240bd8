# core/: the runtime, module table and loader, stream pool, registry, tracking.
# libxdmcore is the whole core as a convenience library: libxdm is it with
# only the xdm_ symbols exported, and internal unit tests link it directly.
noinst_LTLIBRARIES += core/libxdmcore.la
core_libxdmcore_la_SOURCES = \
	core/internal.h \
	core/spinlock.h \
	core/counters.h \
	core/counters.c \
	core/error.c \
	core/params.c \
	core/module_table.c \
	core/loader.c \
	core/layer.c \
	core/stream_pool.c \
	core/event_pool.c \
	core/registry.c \
	core/chunks.c \
	core/tracking.c \
	core/runtime_build.c \
	core/runtime.c \
	core/runtime_table.c \
	core/query_id.c \
	core/native.c \
	core/tags.c \
	core/version.c \
	core/uuid.c \
	core/stream_frees.c \
	core/capture_frees.c \
	core/tree.h \
	core/tree.c \
	core/tree_process.c \
	core/tree_runtime.c \
	core/tree_blocks.c \
	core/tree_chunks.c \
	core/tree_streams.c \
	core/mount.c \
	core/frontend.h \
	core/ipc.h \
	core/ipc_handle.c \
	core/ipc_export.c \
	core/ipc_allow.c \
	core/ipc_server.c \
	core/ipc_serve_open.c \
	core/ipc_peer.c \
	core/ipc_import.c
core_libxdmcore_la_LIBADD = $(LIBS)

lib_LTLIBRARIES += libxdm.la
libxdm_la_SOURCES =
nodist_EXTRA_libxdm_la_SOURCES = core/dummy.c
libxdm_la_LIBADD = core/libxdmcore.la
libxdm_la_LDFLAGS = -version-info $(XDM_LT_VERSION) -no-undefined \
	-export-symbols-regex '^xdm_'
dist_man_MANS += man/xdm.3
