# backends/rmm: the "rmm" backend, an RMM resource (RAPIDS Memory Manager)
# at the bottom of a stack.  C++ inside (resource.cpp), the same xdm_ops
# outside (module.c).  Built only with --with-rmm=DIR (RMM is not packaged
# by Debian); its sources are in every tarball.  See man/xdm-rmm.7.
if HAVE_RMM
pkglib_LTLIBRARIES += backends/rmm.la
endif
backends_rmm_la_SOURCES = backends/rmm/resource.h backends/rmm/module.c \
	backends/rmm/resource.cpp
backends_rmm_la_CPPFLAGS = $(AM_CPPFLAGS) $(RMM_CPPFLAGS)
backends_rmm_la_CXXFLAGS = $(RMM_CXXFLAGS) $(PTHREAD_FLAGS) -Wall -fvisibility=hidden \
	-fvisibility-inlines-hidden
# Only the entry symbol (exports.map): the RMM templates compiled in stay the
# module's own, whatever RMM the program that loads it has.
backends_rmm_la_LDFLAGS = $(module_link_flags) \
	-Wl,--version-script=$(srcdir)/backends/rmm/exports.map
EXTRA_DIST += backends/rmm/exports.map
backends_rmm_la_LIBADD = $(module_link_libs) $(RMM_LIBS)

# A program compiles it against its own RMM: installed with or without one.
xdminclude_HEADERS += include/xdm/rmm.hpp
dist_man_MANS += man/xdm-rmm.7
