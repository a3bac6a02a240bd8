# adaptors/budget: one byte limit per physical device, shared by every
# process on it through a POSIX shared memory segment.  See man/xdm-budget.7.
pkglib_LTLIBRARIES += adaptors/budget.la
adaptors_budget_la_SOURCES = \
	adaptors/budget/budget.h \
	adaptors/budget/module.c \
	adaptors/budget/attrs.c
adaptors_budget_la_LDFLAGS = $(module_link_flags)
adaptors_budget_la_LIBADD = lib/budget_segment/libbudget_segment.la $(module_link_libs) -lrt

dist_man_MANS += man/xdm-budget.7
