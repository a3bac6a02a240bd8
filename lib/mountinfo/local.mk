# lib/mountinfo: the mounts of this mount namespace, read from
# /proc/self/mountinfo without entering any of them.  The FUSE front end
# (fusefs: stale mounts of dead processes) and xdmctl (the trees processes
# serve) link it; a convenience library, never installed.
noinst_LTLIBRARIES += lib/mountinfo/libmountinfo.la
lib_mountinfo_libmountinfo_la_SOURCES = \
	lib/mountinfo/mountinfo.h \
	lib/mountinfo/mountinfo.c
