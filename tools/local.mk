# tools/: command-line programs.  xdm-bench uses only the public API.
bin_PROGRAMS += tools/xdm-bench
tools_xdm_bench_SOURCES = \
	tools/bench.h \
	tools/bench_main.c \
	tools/bench_options.c \
	tools/bench_subject_xdm.c \
	tools/bench_workloads.c \
	tools/bench_threads.c \
	tools/bench_stats.c \
	tools/bench_report.c
# -lm: exp2() draws the log-uniform sizes of the random workload.
tools_xdm_bench_LDADD = libxdm.la -lm
dist_man_MANS += man/xdm-bench.1
TESTS += tests/bench_smoke.sh
EXTRA_DIST += tests/bench_smoke.sh
