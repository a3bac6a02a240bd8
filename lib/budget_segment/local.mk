# lib/budget_segment: the budget's shared segment as one internal library
# with one header, segment.h: its layout, its robust lock, the liveness
# rule of its processes, and the reader that opens a segment and checks
# its layout.  The budget module (adaptors/budget) and xdmctl link it, so
# that both agree on the format, take the lock the same way and call the
# same processes dead.  A convenience library: it is compiled into each of
# them and never installed; nothing of it is exported from budget.so.
noinst_LTLIBRARIES += lib/budget_segment/libbudget_segment.la
lib_budget_segment_libbudget_segment_la_SOURCES = \
	lib/budget_segment/segment.h \
	lib/budget_segment/lock.c \
	lib/budget_segment/liveness.c \
	lib/budget_segment/reader.c
