# fusefs: the FUSE front end of the introspection tree, fusefs.so in
# $(pkglibdir).  libxdm dlopens it on the first mount, so only programs that
# mount load libfuse.  See man/xdm-fs.7.
if HAVE_FUSE
pkglib_LTLIBRARIES += fusefs/fusefs.la
fusefs_fusefs_la_SOURCES = \
	fusefs/fusefs.h \
	fusefs/server.c \
	fusefs/ops.c \
	fusefs/stale.c
fusefs_fusefs_la_CFLAGS = $(AM_CFLAGS) $(FUSE_CFLAGS)
fusefs_fusefs_la_LDFLAGS = $(module_link_flags)
fusefs_fusefs_la_LIBADD = lib/mountinfo/libmountinfo.la $(module_link_libs) $(FUSE_LIBS)
endif

# The page describes the tree, xdm_mount() and the mount key, which exist
# with or without FUSE: it is always installed.
dist_man_MANS += man/xdm-fs.7
