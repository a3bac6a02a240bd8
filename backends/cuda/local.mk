# backends/cuda: the cuda module, one shared object with the "cuda" platform
# and the "cuda_direct", "cuda_async" and "cuda_vmm" backends (cuda_vmm keeps
# its granules in backends/common/vrange, compiled in).  It compiles against
# the toolkit's cuda.h but links no libcuda: the platform dlopens
# libcuda.so.1 at run time.  See man/xdm-cuda.7.
if HAVE_CUDA
pkglib_LTLIBRARIES += backends/cuda.la
backends_cuda_la_SOURCES = \
	backends/cuda/cuda_priv.h \
	backends/cuda/driver.h \
	backends/cuda/driver.c \
	backends/cuda/module.c \
	backends/cuda/platform.c \
	backends/cuda/stream.c \
	backends/cuda/direct.c \
	backends/cuda/async.c \
	backends/cuda/ipc.h \
	backends/cuda/ipc_export.c \
	backends/cuda/ipc_import.c \
	backends/cuda/vmm.h \
	backends/cuda/vmm.c \
	backends/cuda/vmm_map.c \
	backends/cuda/vmm_attrs.c \
	backends/cuda/vmm_ipc.c \
	backends/cuda/peers.h \
	backends/cuda/peers.c \
	backends/cuda/peers_grant.c \
	backends/common/vrange.h \
	backends/common/vrange.c
backends_cuda_la_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CFLAGS)
backends_cuda_la_LDFLAGS = $(module_link_flags)
backends_cuda_la_LIBADD = $(module_link_libs)

dist_man_MANS += man/xdm-cuda.7
endif

# The page is installed with the module, and always distributed.
EXTRA_DIST += man/xdm-cuda.7
