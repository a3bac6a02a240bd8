# backends/rmm: the "rmm" backend, an RMM resource (RAPIDS Memory Manager)
# at the bottom of a stack.  C++ inside (resource.cpp), the same xdm_ops
# outside (module.c).  Built only with --with-rmm=DIR (RMM is not packaged
# by Debian); its sources are in every tarball.  See man/xdm-rmm.7.
if HAVE_RMM
pkglib_LTLIBRARIES += backends/rmm.la
endif
backends_rmm_la_SOURCES = backends/rmm/resource.h backends/rmm/rmm_calls.hpp \
	backends/rmm/module.c backends/rmm/resource.cpp
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

# What a pair costs RAPIDS through RMM, with xdm underneath and without
# (BENCHMARKS.md); built with the backend, never installed.
if HAVE_RMM
noinst_PROGRAMS += tools/bench/xdm-rmm-bench
endif
tools_bench_xdm_rmm_bench_SOURCES = tools/bench/rmm_bench.cpp
tools_bench_xdm_rmm_bench_CPPFLAGS = $(AM_CPPFLAGS) $(RMM_CPPFLAGS)
tools_bench_xdm_rmm_bench_CXXFLAGS = $(RMM_CXXFLAGS) $(PTHREAD_FLAGS) -Wall -O2
tools_bench_xdm_rmm_bench_LDADD = libxdm.la $(RMM_LIBS)
