# preload/: libxdm-preload.so, the LD_PRELOAD shim that holds programs
# which never heard of xdm to the GPU's budget (xdm-preload(7)).  It
# charges through lib/budget_segment, the code the budget adaptor charges
# through, and exports only the driver's names it stands in for and dlsym.
# It needs no CUDA toolkit to build: cuda_abi.h has the ABI facts it uses.
lib_LTLIBRARIES += preload/libxdm-preload.la
preload_libxdm_preload_la_SOURCES = \
	preload/preload.h \
	preload/cuda_abi.h \
	preload/state.c \
	preload/dlsym.c \
	preload/driver.c \
	preload/hooks.c \
	preload/table.c \
	preload/devices.c \
	preload/scheduler_env.c \
	preload/nvml.c \
	preload/pools.c
preload_libxdm_preload_la_LDFLAGS = -module -avoid-version -shared -no-undefined \
	-export-symbols-regex '^(cu[A-Z][A-Za-z_0-9]*|nvmlDeviceGetMemoryInfo(_v2)?|dlsym)$$'
preload_libxdm_preload_la_LIBADD = lib/budget_segment/libbudget_segment.la libxdm.la -ldl -lrt


dist_man_MANS += man/xdm-preload.7
