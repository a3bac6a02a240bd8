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
	backends/pool/chunks.c \
	backends/pool/attrs.c
backends_pool_la_LDFLAGS = $(module_link_flags)
backends_pool_la_LIBADD = $(module_link_libs)

dist_man_MANS += man/xdm-pool.7
