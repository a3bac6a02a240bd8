# tools/: command-line programs.  xdm-bench uses only the public API.
bin_PROGRAMS += tools/xdm-bench
tools_xdm_bench_SOURCES = \
	tools/bench.h \
	tools/bench_main.c \
	tools/bench_options.c \
	tools/bench_hold.c \
	tools/bench_tree_reader.c \
	tools/bench_subject_xdm.c \
	tools/bench_anchors.c \
	tools/bench_workloads.c \
	tools/bench_threads.c \
	tools/bench_streams.c \
	tools/bench_cross.c \
	tools/bench_replay.c \
	tools/bench_replay_csv.c \
	tools/bench_reserved.c \
	tools/bench_stats.c \
	tools/bench_report.c
# The driver anchors need cuda.h to compile, never libcuda to link: they
# dlopen libcuda.so.1 when they run.  Without the headers the bench builds
# without them and says so when --anchors asks for them.  (automake
# distributes a conditional source either way.)  The flags are set outside
# the conditional too: a per-target variable replaces AM_CPPFLAGS in both
# branches, and an empty one would lose the include path.
tools_xdm_bench_CPPFLAGS = $(AM_CPPFLAGS)
if HAVE_CUDA
tools_xdm_bench_SOURCES += \
	tools/bench_cuda.h \
	tools/bench_cuda_driver.c \
	tools/bench_subject_cuda.c \
	tools/bench_cuda_edge.c \
	tools/bench_cuda_touch.c
tools_xdm_bench_CPPFLAGS += $(CUDA_CFLAGS) -DXDM_BENCH_CUDA=1
endif
# -lm: exp2() draws the log-uniform sizes of the random workload.
tools_xdm_bench_LDADD = libxdm.la -lm
dist_man_MANS += man/xdm-bench.1
TESTS += tests/bench_smoke.sh
EXTRA_DIST += tests/bench_smoke.sh
