# frameworks/torch: torch's CUDA allocator (its CUDAAllocator interface),
# served by xdm.  A C++ module in $(pkglibdir) that python/xdm/torch.py loads
# by path and installs, built only where configure found torch's headers and
# CUDA's (--with-torch); its source is in every tarball.
if HAVE_TORCH
pkglib_LTLIBRARIES += frameworks/torch/libxdm-torch.la
endif
frameworks_torch_libxdm_torch_la_SOURCES = frameworks/torch/glue.hpp \
	frameworks/torch/allocator.cpp frameworks/torch/pools.cpp frameworks/torch/fraction.cpp \
	frameworks/torch/stats.cpp frameworks/torch/history.cpp \
	frameworks/torch/install.cpp frameworks/torch/oom.cpp frameworks/torch/ipc.cpp \
	frameworks/torch/mempool_allocator.cpp
frameworks_torch_libxdm_torch_la_CPPFLAGS = $(AM_CPPFLAGS) $(TORCH_CPPFLAGS)
# No sanitizers: the module is loaded into a python that has no ASan runtime.
frameworks_torch_libxdm_torch_la_CXXFLAGS = $(TORCH_CXXFLAGS) $(PTHREAD_FLAGS) -Wall \
	-fvisibility=hidden -fvisibility-inlines-hidden
frameworks_torch_libxdm_torch_la_LDFLAGS = $(module_link_flags) $(PTHREAD_FLAGS) \
	$(TORCH_LDFLAGS)
frameworks_torch_libxdm_torch_la_LIBADD = $(module_link_libs) $(TORCH_LIBS)
