# tools/: command-line programs.  xdm-bench uses only the public API.
# logcsv.[ch], the reader of the logging adaptor's CSV, is compiled into
# both programs: xdm-bench replays a log, xdmctl draws one.
bin_PROGRAMS += tools/xdm-bench
tools_xdm_bench_SOURCES = \
	tools/bench.h \
	tools/bench_main.c \
	tools/bench_options.c \
	tools/bench_hold.c \
	tools/bench_tree_reader.c \
	tools/bench_subject_xdm.c \
	tools/bench_devices.c \
	tools/bench_anchors.c \
	tools/bench_workloads.c \
	tools/bench_threads.c \
	tools/bench_streams.c \
	tools/bench_cross.c \
	tools/bench_replay.c \
	tools/bench_replay_csv.c \
	tools/logcsv.h \
	tools/logcsv.c \
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

# xdmctl: every xdm process of the machine, from outside (man/xdmctl.1).
# It links no module: the budget's lock and liveness test are compiled in
# from the adaptor's own sources, so that it agrees with a reclaimer on
# who is dead and takes the segment's lock the way the adaptor does.
bin_PROGRAMS += tools/xdmctl
tools_xdmctl_SOURCES = \
	tools/xdmctl.h \
	tools/xdmctl_main.c \
	tools/xdmctl_json.c \
	tools/xdmctl_units.c \
	tools/xdmctl_segments.h \
	tools/xdmctl_segments.c \
	tools/xdmctl_mounts.c \
	tools/xdmctl_show.c \
	tools/xdmctl_ps.c \
	tools/xdmctl_budget.c \
	tools/xdmctl_top.c \
	tools/xdmctl_timeline.c \
	tools/xdmctl_snapshot.c \
	tools/xdmctl_args.h \
	tools/xdmctl_args.c \
	tools/xdmctl_output.h \
	tools/xdmctl_output.c \
	tools/logcsv.h \
	tools/logcsv.c \
	tools/utf8.h \
	tools/utf8.c \
	tools/markup.h \
	tools/markup.c \
	tools/timeline.h \
	tools/timeline_model.c \
	tools/timeline_format.c \
	tools/timeline_svg.c \
	tools/timeline_html.c \
	tools/pickle.h \
	tools/pickle.c \
	adaptors/budget/liveness.c \
	adaptors/budget/lock.c \
	fusefs/mountinfo.h \
	fusefs/mountinfo.c
# A flag of its own gives xdmctl its own objects of the adaptor's files.
tools_xdmctl_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/adaptors/budget
tools_xdmctl_LDADD = libxdm.la -lrt -lm
dist_man_MANS += man/xdmctl.1
# What xdmctl timeline drew of a PyTorch training run on the GPU machine
# (examples/xdmctl_gpu_demo.sh), rendered to PNG; README shows it.
EXTRA_DIST += doc/xdmctl-timeline.png
# ps and budget against live processes; top in a real terminal (tmux).
TESTS += tests/xdmctl_ps.sh tests/xdmctl_top.sh
EXTRA_DIST += tests/xdmctl_ps.sh tests/xdmctl_top.sh tests/xdmctl_live_test.sh
# One budget per physical device under any device order: host devices here,
# two GPUs in devices_gpu.sh (a skip on fewer).
TESTS += tests/devices_order.sh
EXTRA_DIST += tests/devices_order.sh tests/devices_order_body.sh tests/devices_gpu.sh
if HAVE_CUDA
TESTS += tests/devices_gpu.sh
endif
# timeline: drawn from logs that tests/timeline_gen.py simulates, whose
# true figures it knows without reading the CSV back.
TESTS += tests/xdmctl_timeline.sh
EXTRA_DIST += tests/xdmctl_timeline.sh tests/timeline_gen.py tests/xdmctl_log_test.sh
# snapshot: from the same simulated logs, read back the way PyTorch's
# memory viewer reads it.
TESTS += tests/xdmctl_snapshot.sh
EXTRA_DIST += tests/xdmctl_snapshot.sh
