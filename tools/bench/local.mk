# tools/bench: xdm-bench, allocation throughput and latency of any stack
# against the driver's own allocators in the same run (man/xdm-bench.1).
# It uses only the public API, and tools/common for --replay.
bin_PROGRAMS += tools/bench/xdm-bench
tools_bench_xdm_bench_SOURCES = \
	tools/bench/bench.h \
	tools/bench/main.c \
	tools/bench/options.c \
	tools/bench/hold.c \
	tools/bench/tree_reader.c \
	tools/bench/subject_xdm.c \
	tools/bench/devices.c \
	tools/bench/anchors.c \
	tools/bench/workloads.c \
	tools/bench/threads.c \
	tools/bench/streams.c \
	tools/bench/cross.c \
	tools/bench/replay.c \
	tools/bench/replay_csv.c \
	tools/bench/ipc.c \
	tools/bench/ipc_importer.c \
	tools/bench/ipc_wire.h \
	tools/bench/reserved.c \
	tools/bench/stats.c \
	tools/bench/report.c
# The driver anchors need cuda.h to compile, never libcuda to link: they
# dlopen libcuda.so.1 when they run.  Without the headers the bench builds
# without them and says so when --anchors asks for them.  (automake
# distributes a conditional source either way.)  The flags are set outside
# the conditional too: a per-target variable replaces AM_CPPFLAGS in both
# branches, and an empty one would lose the include path.
tools_bench_xdm_bench_CPPFLAGS = $(AM_CPPFLAGS)
if HAVE_CUDA
tools_bench_xdm_bench_SOURCES += \
	tools/bench/cuda_anchors.h \
	tools/bench/cuda_driver.c \
	tools/bench/subject_cuda.c \
	tools/bench/cuda_edge.c \
	tools/bench/cuda_touch.c
tools_bench_xdm_bench_CPPFLAGS += $(CUDA_CFLAGS) -DXDM_BENCH_CUDA=1
endif
# -lm: exp2() draws the log-uniform sizes of the random workload.
tools_bench_xdm_bench_LDADD = tools/common/libxdmtools.la libxdm.la -lm
dist_man_MANS += man/xdm-bench.1
