# lib/budget_segment: the budget's shared segment as one internal library
# with one header, segment.h: its layout, its lock, the liveness
# rule of its processes, the reader that opens a segment and checks its
# layout, a member's life in it (attach, charge, reclaim, detach), and the
# directory a group of users shares for its budgets (shared_dir.c).
# The budget module (adaptors/budget), the preload shim (preload/) and
# xdmctl link it, so that all agree on the format, take the lock the same
# way, charge the same way and call the same processes dead.  A convenience library: it is compiled into each of
# them and never installed; nothing of it is exported from budget.so.
noinst_LTLIBRARIES += lib/budget_segment/libbudget_segment.la
lib_budget_segment_libbudget_segment_la_SOURCES = \
	lib/budget_segment/segment.h \
	lib/budget_segment/lock.c \
	lib/budget_segment/liveness.c \
	lib/budget_segment/reader.c \
	lib/budget_segment/member.c \
	lib/budget_segment/member_config.c \
	lib/budget_segment/shared_dir.c \
	lib/budget_segment/validate.c \
	lib/budget_segment/reclaim.c \
	lib/budget_segment/credit.c \
	lib/budget_segment/credit_thread.c
# Its sentences name users and groups (lib/names), for each of its users.
lib_budget_segment_libbudget_segment_la_LIBADD = lib/names/libnames.la
# The fault build's kill points (faults.c) are compiled only into
# tests/faults/budget.la, with the library's sources and XDM_BUDGET_FAULTS.
budget_segment_sources = $(lib_budget_segment_libbudget_segment_la_SOURCES)
