# frameworks/torch: torch's pluggable CUDA allocator, served by xdm.  A C++
# module in $(pkglibdir) that torch loads by path (python/xdm/torch.py), built
# only where configure found torch's headers and CUDA's (--with-torch); its
# source is in every tarball.
if HAVE_TORCH
pkglib_LTLIBRARIES += frameworks/torch/libxdm-torch.la
endif
frameworks_torch_libxdm_torch_la_SOURCES = frameworks/torch/alloc.cpp
frameworks_torch_libxdm_torch_la_CPPFLAGS = $(AM_CPPFLAGS) $(TORCH_CPPFLAGS)
# No sanitizers: the module is loaded into a python that has no ASan runtime.
frameworks_torch_libxdm_torch_la_CXXFLAGS = $(TORCH_CXXFLAGS) $(PTHREAD_FLAGS) -Wall \
	-fvisibility=hidden -fvisibility-inlines-hidden
frameworks_torch_libxdm_torch_la_LDFLAGS = $(module_link_flags) $(PTHREAD_FLAGS) \
	$(TORCH_LDFLAGS)
frameworks_torch_libxdm_torch_la_LIBADD = $(module_link_libs) $(TORCH_LIBS)
