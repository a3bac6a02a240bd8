# tools/xdmctl: every xdm process of the machine, from outside
# (man/xdmctl.1): the budget segments and their processes, the trees they
# mount, the logging CSV drawn as memory over time or as a snapshot, a live
# process's chunks as a snapshot;
# the budgets as Prometheus metrics, printed or served over HTTP.
# It links no module: the budget segment's library (lib/budget_segment),
# which the budget module links too, gives it the layout, the lock and the
# liveness rule, so that it agrees with a reclaimer on who is dead and
# takes the segment's lock the way the adaptor does.
bin_PROGRAMS += tools/xdmctl/xdmctl
tools_xdmctl_xdmctl_SOURCES = \
	tools/xdmctl/xdmctl.h \
	tools/xdmctl/main.c \
	tools/xdmctl/json.c \
	tools/xdmctl/units.c \
	tools/xdmctl/segments.h \
	tools/xdmctl/segments.c \
	tools/xdmctl/mounts.c \
	tools/xdmctl/show.c \
	tools/xdmctl/ps.c \
	tools/xdmctl/budget.c \
	tools/xdmctl/budget_set.c \
	tools/xdmctl/as_owner.h \
	tools/xdmctl/as_owner.c \
	tools/xdmctl/nspid.c \
	tools/xdmctl/top.c \
	tools/xdmctl/timeline.c \
	tools/xdmctl/snapshot.h \
	tools/xdmctl/snapshot.c \
	tools/xdmctl/snapshot_keys.c \
	tools/xdmctl/snapshot_live.c \
	tools/xdmctl/chunks.h \
	tools/xdmctl/chunks_parse.c \
	tools/xdmctl/tree_read.h \
	tools/xdmctl/tree_read.c \
	tools/xdmctl/args.h \
	tools/xdmctl/args.c \
	tools/xdmctl/output.h \
	tools/xdmctl/output.c \
	tools/xdmctl/utf8.h \
	tools/xdmctl/utf8.c \
	tools/xdmctl/markup.h \
	tools/xdmctl/markup.c \
	tools/xdmctl/timeline.h \
	tools/xdmctl/timeline_model.c \
	tools/xdmctl/timeline_format.c \
	tools/xdmctl/timeline_svg.c \
	tools/xdmctl/timeline_html.c \
	tools/xdmctl/pickle.h \
	tools/xdmctl/pickle.c \
	tools/xdmctl/metrics.h \
	tools/xdmctl/metrics.c \
	tools/xdmctl/serve.h \
	tools/xdmctl/serve.c \
	tools/xdmctl/listen.c \
	tools/xdmctl/serve_loop.c \
	tools/xdmctl/http.c
tools_xdmctl_xdmctl_LDADD = tools/common/libxdmtools.la \
	lib/budget_segment/libbudget_segment.la lib/mountinfo/libmountinfo.la lib/names/libnames.la \
	libxdm.la -lrt -lm
dist_man_MANS += man/xdmctl.1
# What xdmctl timeline drew of a PyTorch training run on the GPU machine
# (examples/xdmctl_gpu_demo.sh), rendered to PNG; README shows it.
EXTRA_DIST += doc/xdmctl-timeline.png
